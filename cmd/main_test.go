package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPrintBanner(t *testing.T) {
	env := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(env, []byte("export GITEA_URL=http://127.0.0.1:3000\n\n# login: a / b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, kubeconfig, envFile, gateway, metrics, want string
	}{
		{"nothing to say", "", "", "", "", ""},
		{"only metrics: nothing to say", "", "", "", "https://127.0.0.1:8443/metrics", ""},
		{"embedded control plane", "/tmp/k", "", "", "", "\n    export KUBECONFIG=/tmp/k\n\n"},
		{"with the demo Gitea, the gateway and metrics", "/tmp/k", env, "http://127.0.0.1:8083", "https://127.0.0.1:8443/metrics",
			"\n    export KUBECONFIG=/tmp/k\n    export GITEA_URL=http://127.0.0.1:3000\n    # login: a / b\n    export FLEET_GATEWAY_URL=http://127.0.0.1:8083\n    export FLEET_METRICS_URL=https://127.0.0.1:8443/metrics\n\n"},
		{"a cluster of one's own, demo Gitea", "", env, "", "",
			"\n    export GITEA_URL=http://127.0.0.1:3000\n    # login: a / b\n\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printBanner(&b, c.kubeconfig, c.envFile, c.gateway, c.metrics); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("banner\n got %q\nwant %q", b.String(), c.want)
			}
		})
	}
	if err := printBanner(&bytes.Buffer{}, "", filepath.Join(t.TempDir(), "missing"), "", ""); err == nil {
		t.Error("a missing env file must be an error")
	}
}

func TestGatewayURL(t *testing.T) {
	base := options{giteaURL: "http://127.0.0.1:3000", repository: "fleet/demo"}
	cases := []struct {
		name string
		o    func(options) options
		want string
	}{
		{"all interfaces", func(o options) options { o.gatewayAddr = ":8083"; return o }, "http://127.0.0.1:8083"},
		{"unspecified IP", func(o options) options { o.gatewayAddr = "0.0.0.0:9"; return o }, "http://127.0.0.1:9"},
		{"one host", func(o options) options { o.gatewayAddr = "10.0.0.1:8083"; return o }, "http://10.0.0.1:8083"},
		{"disabled", func(o options) options { o.gatewayAddr = ""; return o }, ""},
		{"no Gitea", func(o options) options { o.gatewayAddr = ":8083"; o.giteaURL = ""; return o }, ""},
	}
	for _, c := range cases {
		if got := gatewayURL(c.o(base)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestMetricsURL(t *testing.T) {
	cases := []struct {
		o    options
		want string
	}{
		{options{metricsAddr: ":8443", metricsSecure: true}, "https://127.0.0.1:8443/metrics"},
		{options{metricsAddr: "127.0.0.1:8080"}, "http://127.0.0.1:8080/metrics"},
		{options{metricsAddr: "0", metricsSecure: true}, ""},
	}
	for _, c := range cases {
		if got := metricsURL(c.o); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.o, got, c.want)
		}
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	good := options{claimTTL: time.Hour, concurrency: 1, maxOpenClaims: 4, pageRows: 500, takeover: time.Minute}
	for name, tc := range map[string]struct {
		edit func(*options)
		want string
	}{
		"claim ttl":          {func(o *options) { o.claimTTL = 0 }, "--claim-ttl must be positive"},
		"concurrency":        {func(o *options) { o.concurrency = 0 }, "--taskclaim-concurrency must be at least 1"},
		"open claims":        {func(o *options) { o.maxOpenClaims = 0 }, "--max-open-claims-per-worker must be at least 1, got 0"},
		"no page rows":       {func(o *options) { o.pageRows = 0 }, "--plan-page-rows must be between 1 and 500, got 0"},
		"page rows too many": {func(o *options) { o.pageRows = 501 }, "--plan-page-rows must be between 1 and 500, got 501"},
		"takeover too short": {func(o *options) { o.takeover = 4 * time.Second }, "--apply-takeover-timeout must be at least 5s, got 4s"},
		"negative pace":      {func(o *options) { o.rowWrites = -1 }, "--apply-row-writes-per-second must be 0 (no pace) or a positive number, got -1"},
		"pace too slow": {func(o *options) { o.rowWrites, o.takeover = 0.01, time.Minute },
			"--apply-row-writes-per-second 0.01 leaves 1m40s between two rows, more than a third of --apply-takeover-timeout (1m0s)"},
	} {
		t.Run(name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			err := run(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestRowWriteLimiter(t *testing.T) {
	if l, err := rowWriteLimiter(0, 0); l != nil || err != nil {
		t.Fatalf("0: %v, %v; want no pace", l, err)
	}
	l, err := rowWriteLimiter(20, 0)
	if err != nil || l == nil || l.Limit() != 20 || l.Burst() != 1 {
		t.Fatalf("20: %v, %v; want 20 rows a second, one at a time", l, err)
	}
	// The default takeover timeout (60 s) allows a row every 20 s, no slower.
	if _, err := rowWriteLimiter(0.05, 0); err != nil {
		t.Fatalf("0.05 under the default timeout: %v", err)
	}
	if _, err := rowWriteLimiter(0.04, 0); err == nil {
		t.Fatal("0.04 under the default timeout: accepted, want refused")
	}
}

// TestImageBuildLinksNoEnvtest: the manager the images carry (built with the nolocalcp
// tag, as hack/images.sh and the Dockerfile do) links none of envtest, whose init wants
// a writable /tmp that a pod with a read-only root filesystem does not have.
func TestImageBuildLinksNoEnvtest(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "nolocalcp", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "sigs.k8s.io/controller-runtime/pkg/envtest") || strings.HasPrefix(pkg, "sigs.k8s.io/controller-runtime/pkg/internal/testing") {
			t.Errorf("the image's manager links %s", pkg)
		}
	}
}
