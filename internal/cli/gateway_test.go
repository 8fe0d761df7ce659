package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// gatewayStub answers like the gateway's contract: the write succeeds (201, or 200 where
// Gitea answers 200) for the permitted token, and 403 with a typed {"reason","message"}
// body otherwise. It records what it was asked.
type gatewayStub struct {
	mu    sync.Mutex
	calls []string
	body  map[string]any
}

const permittedToken = "tok-permitted"

func (g *gatewayStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	g.mu.Lock()
	g.calls = append(g.calls, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	g.body = map[string]any{}
	_ = json.Unmarshal(b, &g.body)
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+permittedToken {
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"reason":"no_capability","message":"The worker holds no capability for this operation."}`)
		return
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/comments"):
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":501,"html_url":"http://gitea/acme/widgets/issues/7#issuecomment-501","body":"x"}`)
	case strings.HasSuffix(r.URL.Path, "/reviews"):
		_, _ = io.WriteString(w, `{"id":601,"html_url":"http://gitea/acme/widgets/pulls/12#r601","state":"COMMENT"}`)
	case strings.HasSuffix(r.URL.Path, "/merge"):
		w.WriteHeader(http.StatusOK)
	case strings.HasSuffix(r.URL.Path, "/pulls"):
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":701,"number":13,"html_url":"http://gitea/acme/widgets/pulls/13"}`)
	default:
		http.NotFound(w, r)
	}
}

func (g *gatewayStub) last() (string, map[string]any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.calls) == 0 {
		return "", nil
	}
	return g.calls[len(g.calls)-1], g.body
}

// toolsAgainst returns MCP tools whose writes go to gw with token, for a worker whose
// claimed target is wt.
func toolsAgainst(gw, token string, wt writeTarget) *mcpTools {
	t := &mcpTools{o: NewOptions(genericiooptions.NewTestIOStreamsDiscard()), cfg: MCPConfig{GatewayURL: gw, Namespace: "fleet", Worker: "bot-1"},
		token: token, tokenExp: time.Now().Add(time.Hour)}
	t.resolve = func(context.Context, int64) (writeTarget, error) { return wt, nil }
	return t
}

func connect(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var payload map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &payload)
	}
	return res, payload
}

func TestGatewayWritesThroughMCP(t *testing.T) {
	stub := &gatewayStub{}
	gw := httptest.NewServer(stub)
	defer gw.Close()
	issue := writeTarget{owner: "acme", name: "widgets", number: 7}
	pull := writeTarget{owner: "acme", name: "widgets", number: 12, head: "3f2a1b0c9d8e"}

	cases := []struct {
		tool     string
		target   writeTarget
		args     map[string]any
		wantCall string
		wantBody map[string]any
		wantOut  map[string]any
	}{
		{"comment", issue, map[string]any{"body": "on it"}, "POST /api/v1/repos/acme/widgets/issues/7/comments",
			map[string]any{"body": "on it"}, map[string]any{"done": "commented", "id": 501.0, "number": 7.0}},
		{"review", pull, map[string]any{"body": "needs tests", "requestChanges": true}, "POST /api/v1/repos/acme/widgets/pulls/12/reviews",
			map[string]any{"event": "REQUEST_CHANGES", "body": "needs tests", "commit_id": "3f2a1b0c9d8e"}, map[string]any{"done": "reviewed", "id": 601.0}},
		{"approve", pull, map[string]any{}, "POST /api/v1/repos/acme/widgets/pulls/12/reviews",
			map[string]any{"event": "APPROVED", "commit_id": "3f2a1b0c9d8e"}, map[string]any{"done": "approved"}},
		{"merge", pull, map[string]any{"style": "squash"}, "POST /api/v1/repos/acme/widgets/pulls/12/merge",
			map[string]any{"Do": "squash", "head_commit_id": "3f2a1b0c9d8e"}, map[string]any{"done": "merged", "number": 12.0}},
		{"open_pr", issue, map[string]any{"head": "work-7", "base": "main", "title": "Fix 7"}, "POST /api/v1/repos/acme/widgets/pulls",
			map[string]any{"head": "work-7", "base": "main", "title": "Fix 7", "body": "Fixes #7\n"}, map[string]any{"done": "opened", "number": 13.0}},
	}
	for _, tc := range cases {
		t.Run(tc.tool+" permitted", func(t *testing.T) {
			cs := connect(t, toolsAgainst(gw.URL, permittedToken, tc.target).server())
			res, out := call(t, cs, tc.tool, tc.args)
			if res.IsError {
				t.Fatalf("tool error: %+v", res.Content)
			}
			gotCall, body := stub.last()
			if gotCall != tc.wantCall+" Bearer "+permittedToken {
				t.Errorf("call %q, want %q with the bearer token", gotCall, tc.wantCall)
			}
			for k, v := range tc.wantBody {
				if body[k] != v {
					t.Errorf("request %s = %v, want %v (body %v)", k, body[k], v, body)
				}
			}
			for k, v := range tc.wantOut {
				if out[k] != v {
					t.Errorf("output %s = %v, want %v (%v)", k, out[k], v, out)
				}
			}
		})
		t.Run(tc.tool+" refused", func(t *testing.T) {
			cs := connect(t, toolsAgainst(gw.URL, "tok-neutral", tc.target).server())
			res, out := call(t, cs, tc.tool, tc.args)
			if !res.IsError {
				t.Fatalf("a refused write succeeded: %+v", out)
			}
			if out["refused"] != true || out["reason"] != "no_capability" || out["message"] != "The worker holds no capability for this operation." {
				t.Errorf("structured refusal %v", out)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if !strings.Contains(text, "no_capability") {
				t.Errorf("text %q", text)
			}
		})
	}
}

func TestGatewayRefusalWithoutTypedBody(t *testing.T) {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "plain denial")
	}))
	defer gw.Close()
	cs := connect(t, toolsAgainst(gw.URL, permittedToken, writeTarget{owner: "a", name: "b", number: 1}).server())
	res, out := call(t, cs, "comment", map[string]any{"body": "x"})
	if !res.IsError || out["reason"] != "forbidden" || out["message"] != "plain denial" {
		t.Errorf("refusal %v (error %t)", out, res.IsError)
	}
}

func TestWriteToolsCheckTheirInput(t *testing.T) {
	stub := &gatewayStub{}
	gw := httptest.NewServer(stub)
	defer gw.Close()
	cs := connect(t, toolsAgainst(gw.URL, permittedToken, writeTarget{owner: "a", name: "b", number: 1}).server())
	for tool, args := range map[string]map[string]any{
		"comment": {"body": "  "},
		"review":  {"body": ""},
		"merge":   {"style": "octopus"},
		"open_pr": {"head": "w"},
	} {
		res, out := call(t, cs, tool, args)
		if !res.IsError {
			t.Errorf("%s %v: %v", tool, args, out)
		}
	}
	if c, _ := stub.last(); c != "" {
		t.Errorf("bad input reached the gateway: %s", c)
	}

	noGateway := toolsAgainst("", permittedToken, writeTarget{owner: "a", name: "b", number: 1})
	res, out := call(t, connect(t, noGateway.server()), "comment", map[string]any{"body": "x"})
	if !res.IsError || !strings.Contains(fmt.Sprint(out["error"]), "no gateway") {
		t.Errorf("without a gateway: %v", out)
	}
}

func TestToolErrorOfAClaimRefusalNamesOnlyItsFields(t *testing.T) {
	ref := &Refusal{Claim: "c1"}
	ref.Result.Class, ref.Result.Blocker, ref.Result.FailedPredicate, ref.Result.RuleID = "contention", "foreign_claimed", "target_claimed", "TC030"
	ref.Result.Message, ref.Result.ContentionIsNormal, ref.Result.ReassessFromFreshState = "fixed message", true, true
	res := toolError(ref)
	var payload map[string]any
	_ = json.Unmarshal(res.StructuredContent.(json.RawMessage), &payload)
	want := map[string]any{"refused": true, "claim": "c1", "class": "contention", "blocker": "foreign_claimed", "failedPredicate": "target_claimed",
		"ruleID": "TC030", "message": "fixed message", "contentionIsNormal": true, "reassessFromFreshState": true, "retryPermitted": false, "outcome": ""}
	if len(payload) != len(want) {
		t.Errorf("payload has %d fields, want %d: %v", len(payload), len(want), payload)
	}
	for k, v := range want {
		if payload[k] != v {
			t.Errorf("%s = %v, want %v", k, payload[k], v)
		}
	}
	if !res.IsError {
		t.Error("not an error")
	}
}
