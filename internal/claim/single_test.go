package claim

import (
	"testing"
	"time"
)

func TestBeyondOpenClaimLimit(t *testing.T) {
	t0 := fxNow
	q := func(name string, ago time.Duration, phase string) QueuedClaim {
		return QueuedClaim{Name: name, Created: t0.Add(-ago), Phase: phase}
	}
	self := q("c5", 0, PhasePending)
	cases := []struct {
		name   string
		others []QueuedClaim
		max    int
		want   bool
	}{
		{"alone", []QueuedClaim{self}, 1, false},
		{"one open ahead, limit one", []QueuedClaim{q("c1", time.Minute, PhaseActive), self}, 1, true},
		{"one open ahead, limit two", []QueuedClaim{q("c1", time.Minute, PhaseActive), self}, 2, false},
		{"final claims ahead do not count", []QueuedClaim{q("c1", 3*time.Minute, PhaseRejected), q("c2", 2*time.Minute, PhaseReleased),
			q("c3", time.Minute, PhaseCompleted), q("c4", time.Minute, PhaseExpired), q("c0", time.Minute, PhaseRevoked)}, 1, false},
		{"newer open claims do not count", []QueuedClaim{q("c6", -time.Minute, PhasePending), q("c7", -time.Minute, PhaseValidated)}, 1, false},
		{"same second: the name orders", []QueuedClaim{q("c4", 0, PhasePending), q("c6", 0, PhasePending)}, 1, true},
		{"same second, later name", []QueuedClaim{q("c6", 0, PhasePending)}, 1, false},
		{"pending and validated count", []QueuedClaim{q("c1", time.Minute, PhasePending), q("c2", time.Minute, PhaseValidated),
			q("c3", time.Minute, ""), self}, 3, true},
		{"no limit", []QueuedClaim{q("c1", time.Minute, PhaseActive)}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := BeyondOpenClaimLimit(self, tc.others, tc.max); got != tc.want {
				t.Fatalf("BeyondOpenClaimLimit = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOpenClaimLimitCitesItsRule(t *testing.T) {
	r := OpenClaimLimit(fxIssue())
	if r.Outcome != OutcomeRejected || r.RuleID != "TC014" || r.FailedPredicate != "worker_claim_limit" ||
		r.Class != ClassPolicy || r.Blocker != BlockerNone || r.RetryPermitted || r.Target != fxIssue() {
		t.Fatalf("OpenClaimLimit = %+v", r)
	}
}
