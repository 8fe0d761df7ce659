package gateway

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// A token is read only from a Secret labelled for the server the request goes to: a
// GiteaServer's token never reaches the flags' server, nor another GiteaServer, and the
// flags' server's (no server label) never reaches a GiteaServer.
func TestCredentialSelector(t *testing.T) {
	secrets := map[string]labels.Set{
		"flags":    {LoginLabel: "carol"},
		"server-a": {LoginLabel: "carol", ServerLabel: "gitea-a"},
		"server-b": {LoginLabel: "carol", ServerLabel: "gitea-b"},
		"other":    {LoginLabel: "dave", ServerLabel: "gitea-a"},
	}
	for server, want := range map[string]string{"": "flags", "gitea-a": "server-a", "gitea-b": "server-b"} {
		sel, err := credentialSelector(server, "carol")
		if err != nil {
			t.Fatalf("credentialSelector(%q): %v", server, err)
		}
		for name, set := range secrets {
			if got := sel.Matches(set); got != (name == want) {
				t.Errorf("server %q: Secret %s matched = %v, want %v", server, name, got, name == want)
			}
		}
	}
	if _, err := credentialSelector("gitea-a", "not a login!"); err == nil {
		t.Error("a login that is no label value was selected")
	}
}
