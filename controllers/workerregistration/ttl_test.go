package workerregistration

import (
	"math"
	"testing"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// A registration with a huge TTL and a fresh heartbeat stays live: the overflow used
// to turn such a TTL negative, and the worker stale.
func TestHugeTTLKeepsAFreshWorkerLive(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	hb := now.Add(-time.Minute)
	for _, seconds := range []int64{math.MaxInt64 / int64(time.Second), math.MaxInt64/int64(time.Second) + 1, 10_000_000_000, math.MaxInt64} {
		state, next := fleet.Classify(fleet.ClassifyInput{
			Now: now, Phase: fleet.Active, LastHeartbeatAt: &hb, HeartbeatTTL: retirement.SecondsDuration(seconds), PID: fleet.PIDUnknown,
		})
		if state != fleet.Live {
			t.Errorf("TTL %d s: %s, want live", seconds, state)
		}
		if r := requeueAt(now, next); r.RequeueAfter <= 0 {
			t.Errorf("TTL %d s: requeue after %v, want a positive delay", seconds, r.RequeueAfter)
		}
	}
}

func TestApplyBootRule(t *testing.T) {
	bootTime := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	host := liveness.HostFacts{HostID: "h", BootID: "boot-now", BootTime: bootTime}
	before, after := bootTime.Add(-time.Minute), bootTime.Add(time.Minute)
	tests := []struct {
		name       string
		pid        fleet.PIDState
		targetBoot string
		host       liveness.HostFacts
		heartbeat  *time.Time
		want       fleet.PIDState
	}{
		{"same boot, gone", fleet.PIDGone, "boot-now", host, &after, fleet.PIDGone},
		{"earlier boot, heartbeat before this boot", fleet.PIDGone, "boot-old", host, &before, fleet.PIDGone},
		{"other boot, heartbeat after this boot (cloned machine id)", fleet.PIDGone, "boot-old", host, &after, fleet.PIDUnknown},
		{"other boot, heartbeat at boot time", fleet.PIDGone, "boot-old", host, &bootTime, fleet.PIDUnknown},
		{"other boot, no heartbeat", fleet.PIDGone, "boot-old", host, nil, fleet.PIDUnknown},
		{"other boot, boot time unknown", fleet.PIDGone, "boot-old", liveness.HostFacts{BootID: "boot-now"}, &before, fleet.PIDUnknown},
		{"other boot, reused", fleet.PIDReused, "boot-old", host, &after, fleet.PIDReused},
		{"other boot, alive", fleet.PIDAlive, "boot-old", host, &after, fleet.PIDAlive},
		{"target boot unknown", fleet.PIDGone, "", host, &after, fleet.PIDGone},
	}
	for _, tc := range tests {
		if got := applyBootRule(tc.pid, tc.targetBoot, tc.host, tc.heartbeat); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
