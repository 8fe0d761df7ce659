// Package hack_test checks the logic of the toolchain scripts in hack/.
package hack_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The envtest build replaces exactly the staging modules kubernetes both maps to
// ./staging and requires at v0.0.0 (sample-controller is replace-only and not served).
func TestStagingModules(t *testing.T) {
	out, err := exec.Command("bash", "-c", `source ./envtest.sh && staging_modules "$1" >&3`, "_",
		"testdata/kubernetes.go.mod").Output()
	if err != nil {
		t.Fatalf("staging_modules: %v", err)
	}
	got := strings.Fields(string(out))
	want := []string{"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go", "k8s.io/kubectl"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("staging_modules = %v, want %v", got, want)
	}
}

// make verify compares tree digests before and after regeneration: the digest must move
// with any content or name change and nothing else.
func TestTreeDigest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	digest := func() string {
		t.Helper()
		out, err := exec.Command("bash", "tree-digest.sh", dir).Output()
		if err != nil {
			t.Fatalf("tree-digest.sh: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	write("a/x.yaml", "one")
	write("b.go", "two")
	d0 := digest()
	if d1 := digest(); d1 != d0 {
		t.Fatal("digest of an unchanged tree moved")
	}
	write("a/x.yaml", "ONE")
	d2 := digest()
	if d2 == d0 {
		t.Fatal("content change did not move the digest")
	}
	write("a/x.yaml", "one")
	if digest() != d0 {
		t.Fatal("restoring the content did not restore the digest")
	}
	if err := os.Rename(filepath.Join(dir, "b.go"), filepath.Join(dir, "c.go")); err != nil {
		t.Fatal(err)
	}
	if digest() == d0 {
		t.Fatal("a rename did not move the digest")
	}
}
