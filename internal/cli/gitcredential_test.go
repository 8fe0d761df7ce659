package cli

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func TestGitCredentialForGateway(t *testing.T) {
	for _, tt := range []struct {
		gateway, input string
		want           bool
	}{
		{"http://127.0.0.1:8082", "protocol=http\nhost=127.0.0.1:8082\n", true},
		{"http://127.0.0.1:8082", "protocol=http\nhost=127.0.0.1:8082\npath=acme/widgets.git\n", true},
		{"https://gw.example:8443/", "protocol=https\nhost=GW.example:8443\n\nignored=after the blank line\n", true},
		{"http://127.0.0.1:8082", "protocol=https\nhost=127.0.0.1:8082\n", false},     // another scheme
		{"http://127.0.0.1:8082", "protocol=http\nhost=127.0.0.1:3000\n", false},      // Gitea itself
		{"http://127.0.0.1:8082", "protocol=http\nhost=127.0.0.1\n", false},           // the port is part of the host
		{"http://127.0.0.1:8082", "protocol=https\nhost=github.com\npath=x\n", false}, // elsewhere
		{"http://h/fleet", "protocol=http\nhost=h\npath=fleet/acme/widgets.git\n", true},
		{"http://h/fleet", "protocol=http\nhost=h\npath=other/acme/widgets.git\n", false},
		{"http://h/fleet", "protocol=http\nhost=h\npath=fleetx/acme.git\n", false},
	} {
		req, err := readGitCredentialRequest(strings.NewReader(tt.input))
		if err != nil {
			t.Fatalf("%q: %v", tt.input, err)
		}
		gw, err := url.Parse(tt.gateway)
		if err != nil {
			t.Fatal(err)
		}
		if got := req.forGateway(gw); got != tt.want {
			t.Errorf("gateway %s, request %q: forGateway = %v, want %v", tt.gateway, tt.input, got, tt.want)
		}
	}
	if _, err := readGitCredentialRequest(strings.NewReader("protocol http\n")); err == nil {
		t.Error("a line without = was accepted")
	}
}

// gitCredential runs the helper with stdin against an API server that does not exist: an
// answer that needed a token would fail with exit code 1.
func gitCredential(t *testing.T, env map[string]string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	o.Getenv = func(k string) string { return env[k] }
	code = Execute(context.Background(), o, append([]string{"--server", "http://127.0.0.1:1", "-n", "default", "git-credential"}, args...))
	return code, out.String(), errOut.String()
}

func TestGitCredentialAnswersOnlyTheGateway(t *testing.T) {
	env := map[string]string{EnvGatewayURL: "http://127.0.0.1:8082", EnvWorker: "bot-1"}
	for _, action := range []string{"store", "erase"} {
		code, out, _ := gitCredential(t, env, "protocol=http\nhost=127.0.0.1:8082\nusername=bot-1\npassword=x\n", action)
		if code != ExitOK || out != "" {
			t.Errorf("%s: exit %d, output %q; want 0 and nothing (nothing is kept)", action, code, out)
		}
	}
	code, out, _ := gitCredential(t, env, "protocol=https\nhost=github.com\n", "get")
	if code != ExitOK || out != "" {
		t.Errorf("get for another host: exit %d, output %q; want 0 and no answer", code, out)
	}
	code, out, _ = gitCredential(t, env, "protocol=http\nhost=127.0.0.1:8082\n", "get")
	if code != ExitFailure || out != "" {
		t.Errorf("get for the gateway without an API server: exit %d, output %q; want %d and no answer", code, out, ExitFailure)
	}
	code, _, stderr := gitCredential(t, map[string]string{EnvWorker: "bot-1"}, "protocol=http\nhost=127.0.0.1:8082\n", "get")
	if code != ExitFailure || !strings.Contains(stderr, "no gateway") {
		t.Errorf("get without a gateway URL: exit %d, stderr %q; want %d naming the missing gateway", code, stderr, ExitFailure)
	}
	if code, _, _ := gitCredential(t, env, "", "get", "extra"); code != ExitUsage {
		t.Errorf("two actions: exit %d, want %d", code, ExitUsage)
	}
}
