package retirementplan

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestHostPlanName(t *testing.T) {
	long := strings.Repeat("p", 253)
	for _, tc := range []struct{ parent, host string }{
		{"plan-1", "3d1219c7c4c5404aaa1f6d2a48adfda4"},
		{"plan-1", "host-b"},
		{long, "host-b"},
		{long[:250], "host-b"},
	} {
		n := HostPlanName(tc.parent, tc.host)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("HostPlanName(%d chars, %q) = %q: %v", len(tc.parent), tc.host, n, errs)
		}
		if n != HostPlanName(tc.parent, tc.host) {
			t.Errorf("not deterministic: %q", n)
		}
		if !regexp.MustCompile(`-h[0-9a-f]{8}$`).MatchString(n) {
			t.Errorf("%q does not end in the host's hash", n)
		}
	}
	if HostPlanName("plan-1", "a") == HostPlanName("plan-1", "b") {
		t.Error("two hosts share a host plan name")
	}
	if HostPlanName(long, "a") == HostPlanName(long[:252]+"q", "a") {
		t.Error("two long fleet plans share a host plan name")
	}
	if got := HostPlanName("plan-1", "host-b"); !strings.HasPrefix(got, "plan-1-h") {
		t.Errorf("short names keep the fleet plan's name: %q", got)
	}
}

func TestFleetPlanLabelValue(t *testing.T) {
	long := strings.Repeat("p", 100)
	for _, p := range []string{"plan-1", strings.Repeat("p", 63), long} {
		v := labelValue(p)
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label value for %d chars: %q: %v", len(p), v, errs)
		}
	}
	if labelValue("plan-1") != "plan-1" {
		t.Error("a short name is its own label value")
	}
	if labelValue(long) == labelValue(long[:99]+"q") {
		t.Error("two long names share a label value")
	}
}
