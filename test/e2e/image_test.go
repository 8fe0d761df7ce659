//go:build e2e

package e2e_test

import (
	"debug/buildinfo"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestManagerImageHasNoLocalControlPlane: the manager binary the cluster's image carries
// (hack/images.sh writes it beside the kubectl-fleet plugin, $FLEET_E2E_PLUGIN) was built
// with the nolocalcp tag, so it cannot start an embedded kube-apiserver and etcd in the
// cluster. A pod starts without it too (its /tmp is writable), so only the binary's own
// build settings show it.
func TestManagerImageHasNoLocalControlPlane(t *testing.T) {
	plugin := os.Getenv("FLEET_E2E_PLUGIN")
	if plugin == "" {
		t.Fatal("hack/e2e.sh sets FLEET_E2E_PLUGIN beside the images' binaries")
	}
	bin := filepath.Join(filepath.Dir(plugin), "manager")
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("reading the build settings of %s: %v", bin, err)
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), "nolocalcp") {
			return
		}
	}
	t.Fatalf("%s was built without the nolocalcp tag (settings: %v): the image would carry the embedded control plane", bin, info.Settings)
}
