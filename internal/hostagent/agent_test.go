package hostagent

import (
	"regexp"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestLeaseName(t *testing.T) {
	a, b := LeaseName("3d1219c7c4c5404aaa1f6d2a48adfda4"), LeaseName("host-b")
	valid := regexp.MustCompile(`^fleet-host-[0-9a-f]{16}$`)
	for _, n := range []string{a, b, LeaseName(""), LeaseName(string(make([]byte, 4096)))} {
		if !valid.MatchString(n) {
			t.Errorf("LeaseName gave %q", n)
		}
	}
	if a == b || a != LeaseName("3d1219c7c4c5404aaa1f6d2a48adfda4") {
		t.Errorf("LeaseName is not a deterministic function of the host id: %q %q", a, b)
	}
}

func TestHolderOf(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	lease := func(holder string, renewedAgo time.Duration, seconds int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		if renewedAgo >= 0 {
			l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-renewedAgo)}
		}
		if seconds != 0 {
			l.Spec.LeaseDurationSeconds = ptr.To(seconds)
		}
		return l
	}
	tests := []struct {
		name string
		l    *coordinationv1.Lease
		ok   bool
	}{
		{"fresh", lease("agent-1", 5*time.Second, 15), true},
		{"expired", lease("agent-1", 16*time.Second, 15), false},
		{"exactly at expiry", lease("agent-1", 15*time.Second, 15), false},
		{"released (no holder)", lease("", 1*time.Second, 15), false},
		{"never renewed", lease("agent-1", -1, 15), false},
		{"no duration", lease("agent-1", time.Second, 0), false},
	}
	for _, tc := range tests {
		h, ok := HolderOf(tc.l, now)
		if ok != tc.ok {
			t.Errorf("%s: held=%v, want %v", tc.name, ok, tc.ok)
		}
		if ok && h.Agent != "agent-1" {
			t.Errorf("%s: holder %q", tc.name, h.Agent)
		}
	}
}

func TestNewInstanceIDIsFreshPerCall(t *testing.T) {
	if a, b := NewInstanceID(), NewInstanceID(); a == b || !regexp.MustCompile(`^agent-[0-9a-f]{16}$`).MatchString(a) {
		t.Errorf("instance ids %q %q", a, b)
	}
}

func TestUnheldSince(t *testing.T) {
	created := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	renewed := created.Add(time.Hour)
	l := func(renew *time.Time, seconds int32) *coordinationv1.Lease {
		x := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		if renew != nil {
			x.Spec.RenewTime = &metav1.MicroTime{Time: *renew}
		}
		if seconds != 0 {
			x.Spec.LeaseDurationSeconds = ptr.To(seconds)
		}
		return x
	}
	for _, tc := range []struct {
		name string
		l    *coordinationv1.Lease
		want time.Time
	}{
		{"crashed holder: the end of its last term", l(&renewed, 15), renewed.Add(15 * time.Second)},
		{"released (client-go writes a 1 s term)", l(&renewed, 1), renewed.Add(time.Second)},
		{"no duration", l(&renewed, 0), renewed},
		{"never held: its creation", l(nil, 15), created},
	} {
		if got := unheldSince(tc.l); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
