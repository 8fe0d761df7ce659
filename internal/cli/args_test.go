package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// runCLI runs kubectl-fleet with args against an API server that does not exist, so a
// command that got past its argument checks would fail with exit code 1, not 2.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.Getenv = func(k string) string { return env[k] }
	all := append([]string{"--server", "http://127.0.0.1:1", "-n", "default"}, args...)
	code = Execute(context.Background(), o, all)
	return code, out.String(), errOut.String()
}

func TestArgumentHandling(t *testing.T) {
	worker := map[string]string{EnvWorker: "bot-1"}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string // in stderr
	}{
		{"unknown command", nil, []string{"frobnicate"}, "unknown command"},
		{"unknown flag", nil, []string{"status", "--frob"}, "unknown flag"},
		{"status with arguments", nil, []string{"status", "extra"}, "unexpected arguments"},
		{"status with an unknown output", nil, []string{"status", "-o", "xml"}, "xml"},

		{"register without identity", nil, []string{"register", "--repository", "a/b"}, "--identity is required"},
		{"register without repository", nil, []string{"register", "--identity", "bot"}, "--repository is required"},
		{"register with a bad repository", nil, []string{"register", "--identity", "bot", "--repository", "nope"}, "is not owner/name"},
		{"register with a fractional ttl", nil, []string{"register", "--identity", "bot", "--repository", "a/b", "--ttl", "1500ms"}, "whole seconds"},
		{"register with a ttl too long", nil, []string{"register", "--identity", "bot", "--repository", "a/b", "--ttl", "721h"}, "whole seconds"},
		{"register with a bad name", nil, []string{"register", "--identity", "bot", "--repository", "a/b", "--name", "Bad_Name"}, "--name"},
		{"register a pid that does not exist", nil, []string{"register", "--identity", "bot", "--repository", "a/b", "--pid", "2147483000", "--host-id", "h"}, "does not exist"},
		{"register with a negative pid", nil, []string{"register", "--identity", "bot", "--repository", "a/b", "--pid", "-3"}, "not a process id"},
		{"register with arguments", nil, []string{"register", "--identity", "bot", "--repository", "a/b", "x"}, "unexpected arguments"},
		{"register with an unknown output", nil, []string{"register", "--identity", "bot", "--repository", "a/b", "-o", "csv"}, "csv"},

		{"heartbeat without worker", nil, []string{"heartbeat"}, "no worker"},
		{"heartbeat with a negative interval", worker, []string{"heartbeat", "--every", "-1s"}, "at least 1s"},
		{"heartbeat faster than once a second", worker, []string{"heartbeat", "--every", "500ms"}, "at least 1s"},

		{"run without command", nil, []string{"run", "--identity", "bot", "--repository", "a/b"}, "give the command after --"},
		{"run without dash", nil, []string{"run", "--identity", "bot", "--repository", "a/b", "true"}, "give the command after --"},
		{"run an unknown command", nil, []string{"run", "--identity", "bot", "--repository", "a/b", "--", "/no/such/cmd"}, "/no/such/cmd"},
		{"run without identity", nil, []string{"run", "--repository", "a/b", "--", "true"}, "--identity is required"},
		{"run beating faster than once a second", nil, []string{"run", "--identity", "bot", "--repository", "a/b", "--every", "200ms", "--", "true"}, "at least 1s"},

		{"claim without arguments", worker, []string{"claim"}, "expected: claim issue N"},
		{"claim an unknown kind", worker, []string{"claim", "commit", "3"}, `unknown target kind "commit"`},
		{"claim a non-number", worker, []string{"claim", "issue", "three"}, "is not an issue or pull request number"},
		{"claim in a malformed repository", worker, []string{"claim", "issue", "acme#3"}, "does not name a repository as owner/name#number"},
		{"claim owner/name# without a number", worker, []string{"claim", "issue", "acme/app#"}, "is not an issue or pull request number"},
		{"claim in two repositories at once", worker, []string{"claim", "issue", "acme/app#3", "--repository", "acme/lib"}, "the target names acme/app but --repository is acme/lib"},
		{"claim number zero", worker, []string{"claim", "issue", "0"}, "is not an issue or pull request number"},
		{"claim an issue at a head", worker, []string{"claim", "issue", "3", "--head", "abcdef1"}, "pull requests only"},
		{"claim a pull request at a bad head", worker, []string{"claim", "pr", "3", "--head", "XYZ"}, "is not a commit id"},
		{"claim without worker", nil, []string{"claim", "issue", "3"}, "no worker"},
		{"claim with a zero timeout", worker, []string{"claim", "issue", "3", "--timeout", "0s"}, "--timeout must be positive"},
		{"claim with an unknown output", worker, []string{"claim", "issue", "3", "-o", "table"}, "table"},

		{"release two claims", worker, []string{"release", "a", "b"}, "at most one claim"},
		{"complete with a zero timeout", worker, []string{"complete", "--timeout", "0s"}, "--timeout must be positive"},
		{"release without a worker or name", nil, []string{"release"}, "name the claim, or the worker"},

		{"token without worker", nil, []string{"token"}, "no worker"},
		{"token too short", worker, []string{"token", "--duration", "1m"}, "at least 10m"},

		{"plan with an empty remote", nil, []string{"plan", "--remote", ""}, "--remote must not be empty"},
		{"plan with a bad repository", nil, []string{"plan", "--canonical-repository", "x"}, "is not owner/name"},
		{"plan with arguments", nil, []string{"plan", "p"}, "unexpected arguments"},

		{"approve without plan", nil, []string{"approve"}, "name one plan"},
		{"approve two plans", nil, []string{"approve", "a", "b"}, "name one plan"},
		{"approve with an unknown output", nil, []string{"approve", "a", "-o", "toml"}, "toml"},

		// mcp without a worker serves and answers every tool call with the reason
		// (TestMCPStartFailureIsAnswered).
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.env, tc.args...)
			if code != ExitUsage {
				t.Fatalf("exit code %d, want %d (stderr %q)", code, ExitUsage, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Fatalf("stderr %q does not say %q", stderr, tc.want)
			}
			if stdout != "" {
				t.Fatalf("bad input printed %q on stdout", stdout)
			}
		})
	}
}

// Commands that pass their checks reach the API server; here it does not exist.
func TestValidInputReachesTheAPIServer(t *testing.T) {
	for _, args := range [][]string{
		{"status"},
		{"heartbeat", "--worker", "bot-1"},
		{"claim", "issue", "3", "--worker", "bot-1"},
		{"plan"},
		{"approve", "plan-1"},
	} {
		code, _, stderr := runCLI(t, nil, args...)
		if code != ExitFailure || !strings.Contains(stderr, "127.0.0.1:1") {
			t.Errorf("%v: exit code %d, stderr %q; want 1 with the connection error", args, code, stderr)
		}
	}
}

func TestEveryCommandHasHelpWithAnExample(t *testing.T) {
	root := NewRootCommand(NewOptions(genericiooptions.NewTestIOStreamsDiscard()))
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Short == "" || c.Example == "" {
			t.Errorf("%s: Short %q, Example %q", c.Name(), c.Short, c.Example)
		}
		code, out, _ := runCLI(t, nil, c.Name(), "--help")
		if code != ExitOK || !strings.Contains(out, "Examples:") {
			t.Errorf("%s --help: exit %d, output lacks Examples:\n%s", c.Name(), code, out)
		}
	}
}

func TestWorkerComesFromTheEnvironment(t *testing.T) {
	o := NewOptions(genericiooptions.NewTestIOStreamsDiscard())
	o.Getenv = func(k string) string { return map[string]string{EnvWorker: "from-env", EnvNamespace: "ns-env"}[k] }
	if w, _ := o.workerName(""); w != "from-env" {
		t.Errorf("worker %q, want from-env", w)
	}
	if w, _ := o.workerName("flag"); w != "flag" {
		t.Errorf("worker %q, want the flag's", w)
	}
	if ns, _ := o.Namespace(); ns != "ns-env" {
		t.Errorf("namespace %q, want ns-env", ns)
	}
	flag := "ns-flag"
	o.ConfigFlags.Namespace = &flag
	if ns, _ := o.Namespace(); ns != "ns-flag" {
		t.Errorf("namespace %q, want -n", ns)
	}
}

func TestDefaultNameAndInstanceID(t *testing.T) {
	id := newInstanceID()
	if !strings.HasPrefix(id, "inst-") || len(id) != len("inst-")+16 {
		t.Fatalf("instance id %q", id)
	}
	for identity, want := range map[string]string{
		"bot-alice":             "bot-alice-",
		"Bot_Alice.2":           "bot-alice-2-",
		"___":                   "worker-",
		strings.Repeat("x", 60): strings.Repeat("x", 40) + "-",
	} {
		got := defaultName(identity, "inst-0123456789abcdef")
		if got != want+"01234567" {
			t.Errorf("defaultName(%q) = %q, want %q", identity, got, want+"01234567")
		}
	}
}

func TestParseItemRef(t *testing.T) {
	for _, tc := range []struct {
		ref, repo string
		number    int64
	}{
		{"12", "", 12},
		{"#12", "", 12},
		{"acme/app#12", "acme/app", 12},
		{"Acme/My.App_2#7", "Acme/My.App_2", 7},
	} {
		repo, n, err := parseItemRef(tc.ref)
		if err != nil || repo != tc.repo || n != tc.number {
			t.Errorf("parseItemRef(%q) = %q, %d, %v; want %q, %d", tc.ref, repo, n, err, tc.repo, tc.number)
		}
	}
	for _, bad := range []string{"", "#", "0", "acme/app#0", "acme/app#-1", "a/b/c#1", "acme#1", "acme/app#1#2"} {
		if _, _, err := parseItemRef(bad); err == nil {
			t.Errorf("parseItemRef(%q) accepted it", bad)
		}
	}
	if got, err := pickRepository("acme/app", "ACME/app"); err != nil || got != "acme/app" {
		t.Errorf("the same repository named twice: %q, %v", got, err)
	}
	if got, err := pickRepository("", "acme/lib"); err != nil || got != "acme/lib" {
		t.Errorf("--repository alone: %q, %v", got, err)
	}
}
