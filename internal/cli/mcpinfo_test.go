package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/giteatools/fleet-controller/internal/cli"
)

// TestMCPServerDescribesItself: what an MCP host reads before calling any tool. The
// server names the binary's version (not the API version), advertises tools without
// listChanged (the list never changes) and no logging, and annotates each tool as a host
// shows it: inspect and the Gitea reads read only, merge is destructive, release and
// complete are idempotent. Every tool has an output schema, an object, that describes its
// structured content.
func TestMCPServerDescribesItself(t *testing.T) {
	ctx := context.Background()
	cs := hostSession(t)

	init := cs.InitializeResult()
	if v := init.ServerInfo.Version; v == "" || v == "v1alpha1" || v != cli.Version {
		t.Errorf("server version %q, want the binary's (%q)", v, cli.Version)
	}
	caps := init.Capabilities
	if caps.Tools == nil || caps.Tools.ListChanged {
		t.Errorf("tools capability %+v: want tools, without listChanged", caps.Tools)
	}
	b, err := json.Marshal(caps)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"logging"`) {
		t.Errorf("capabilities %s: the server sends no log messages, yet advertises logging", b)
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range tools.Tools {
		if schema := schemaOf(t, tool.OutputSchema); schema.Type != "object" || len(schema.Properties) == 0 {
			t.Errorf("tool %s has an output schema of type %q with %d properties: want an object schema with its properties",
				tool.Name, schema.Type, len(schema.Properties))
		}
		if tool.Annotations == nil {
			t.Errorf("tool %s has no annotations", tool.Name)
			continue
		}
		byName[tool.Name] = tool
	}
	for name, want := range map[string]struct{ readOnly, destructive, idempotent bool }{
		"inspect":  {readOnly: true},
		"claim":    {},
		"release":  {idempotent: true},
		"complete": {idempotent: true},
		"comment":  {},
		"review":   {},
		"approve":  {},
		"merge":    {destructive: true},
		"open_pr":  {},

		"write_file":  {destructive: true, idempotent: true},
		"delete_file": {destructive: true, idempotent: true},

		"read_issue":    {readOnly: true},
		"read_pr":       {readOnly: true},
		"read_diff":     {readOnly: true},
		"read_file":     {readOnly: true},
		"list_comments": {readOnly: true},
		"read_timeline": {readOnly: true},
		"search_issues": {readOnly: true},
	} {
		a := byName[name].Annotations
		if a == nil {
			t.Errorf("no tool %s", name)
			continue
		}
		destructive := a.DestructiveHint == nil || *a.DestructiveHint // the protocol's default is true
		if a.ReadOnlyHint != want.readOnly || (!want.readOnly && destructive != want.destructive) || a.IdempotentHint != want.idempotent {
			t.Errorf("%s: readOnly %v, destructive %v, idempotent %v; want %+v", name, a.ReadOnlyHint, destructive, a.IdempotentHint, want)
		}
	}
}

// TestMCPInputsListTheirValues: kind, merge style and search state are closed sets,
// listed as enums in the input schemas, and a value outside them is refused.
func TestMCPInputsListTheirValues(t *testing.T) {
	ctx := context.Background()
	cs := hostSession(t)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	enums := map[string]string{}
	for _, tool := range tools.Tools {
		b, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var schema struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatal(err)
		}
		for name, p := range schema.Properties {
			if len(p.Enum) > 0 {
				enums[tool.Name+"."+name] = strings.Join(p.Enum, ",")
			}
		}
	}
	want := map[string]string{"inspect.kind": "issue,pr", "claim.kind": "issue,pr", "merge.style": "merge,rebase,rebase-merge,squash",
		"search_issues.kind": "issue,pr", "search_issues.state": "open,closed,all"}
	for k, v := range want {
		if enums[k] != v {
			t.Errorf("%s enum = %q, want %q", k, enums[k], v)
		}
	}
	if len(enums) != len(want) {
		t.Errorf("enums %v, want only %v", enums, want)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "claim", Arguments: map[string]any{"kind": "epic", "number": 1}})
	if err == nil && !res.IsError {
		t.Error("a claim of kind epic was accepted")
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_issues", Arguments: map[string]any{"query": "x", "state": "merged"}})
	if err == nil && !res.IsError {
		t.Error("a search in state merged was accepted")
	}
}

// schemaOf decodes a tool's schema as a host reads it (nil: the zero schema).
func schemaOf(t *testing.T, s any) jsonschema.Schema {
	t.Helper()
	var out jsonschema.Schema
	if s == nil {
		return out
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// hostSession connects an MCP host to a worker's server over the in-memory transport,
// as a host would before any tool call (no cluster is reached until a tool runs).
func hostSession(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	o := cli.NewOptions(genericiooptions.NewTestIOStreamsDiscard())
	s := o.NewMCPServer(cli.MCPConfig{Namespace: "ns", Worker: "w"})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestMCPStartFailureIsAnswered: `kubectl fleet mcp` started by an MCP host for a worker
// it cannot act for (no worker named; no API server answering) completes the handshake
// and lists its tools, and every tool call returns the reason as a tool error, where a
// host shows it. It does not exit before the handshake, which a host would show only as a
// closed connection.
func TestMCPStartFailureIsAnswered(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no worker", nil, "no worker: pass --worker or set " + cli.EnvWorker},
		{"no API server", []string{"--worker", "bot-gone", "--request-timeout", "5s"}, "127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(self, append([]string{"mcp", "--server", "http://127.0.0.1:1", "-n", "default"}, tc.args...)...)
			cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, cli.EnvWorker+"=") }),
				asKubectlFleet+"=1")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("the handshake failed: %v", err)
			}
			defer func() { _ = cs.Close() }()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			working, err := hostSession(t).ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(tools.Tools) != len(working.Tools) {
				t.Errorf("%d tools listed, want the %d a working server lists", len(tools.Tools), len(working.Tools))
			}
			for _, tool := range []string{"inspect", "claim", "comment", "read_issue"} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"kind": "issue", "number": 1, "body": "x"}})
				if err != nil {
					t.Fatalf("%s: %v", tool, err)
				}
				text := ""
				if len(res.Content) > 0 {
					if tc, ok := res.Content[0].(*mcp.TextContent); ok {
						text = tc.Text
					}
				}
				if !res.IsError || !strings.Contains(text, "cannot act for its worker") || !strings.Contains(text, tc.want) {
					t.Errorf("%s answered isError=%v %q: want the start-up failure, saying %q", tool, res.IsError, text, tc.want)
				}
			}
		})
	}
}
