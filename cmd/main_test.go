package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestPrintBanner(t *testing.T) {
	env := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(env, []byte("export GITEA_URL=http://127.0.0.1:3000\n\n# login: a / b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, kubeconfig, envFile, want string
	}{
		{"nothing to say", "", "", ""},
		{"embedded control plane", "/tmp/k", "", "\n    export KUBECONFIG=/tmp/k\n\n"},
		{"with the demo Gitea", "/tmp/k", env,
			"\n    export KUBECONFIG=/tmp/k\n    export GITEA_URL=http://127.0.0.1:3000\n    # login: a / b\n\n"},
		{"a cluster of one's own, demo Gitea", "", env,
			"\n    export GITEA_URL=http://127.0.0.1:3000\n    # login: a / b\n\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printBanner(&b, c.kubeconfig, c.envFile); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("banner\n got %q\nwant %q", b.String(), c.want)
			}
		})
	}
	if err := printBanner(&bytes.Buffer{}, "", filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing env file must be an error")
	}
}
