package retirement

import (
	"strings"
	"testing"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

func TestHostAgentLost(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	grace := 15 * time.Second
	for _, tc := range []struct {
		name    string
		lease   HostLease
		lost    bool
		recheck time.Time
	}{
		{"held", HostLease{Held: true}, false, time.Time{}},
		{"no Lease at all", HostLease{}, true, time.Time{}},
		{"just released", HostLease{UnheldSince: now.Add(-time.Second)}, false, now.Add(14 * time.Second)},
		{"expired within the grace", HostLease{UnheldSince: now.Add(-14 * time.Second)}, false, now.Add(time.Second)},
		{"grace ends now", HostLease{UnheldSince: now.Add(-grace)}, true, time.Time{}},
		{"long gone", HostLease{UnheldSince: now.Add(-time.Hour)}, true, time.Time{}},
		{"expiry in the future (clock skew)", HostLease{UnheldSince: now.Add(time.Minute)}, false, now.Add(time.Minute + grace)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost, at := HostAgentLost(tc.lease, now, grace)
			if lost != tc.lost || !at.Equal(tc.recheck) {
				t.Errorf("HostAgentLost = %v, %v; want %v, %v", lost, at, tc.lost, tc.recheck)
			}
		})
	}
}

func TestLostHostPlan(t *testing.T) {
	rows := []Row{
		{Name: "e1", HostID: "E", Phase: fleet.Active},
		{Name: "e2", HostID: "E", Phase: fleet.Retired},
		{Name: "a1", HostID: "A", Phase: fleet.Active},
	}
	p := LostHostPlan(rows, "E", "acme/widgets", "acme/widgets", "agent of E gone")
	if p.Outcome != OutcomePlanned || p.CandidateCount != 0 || len(p.CandidateWorkerIdentities) != 0 {
		t.Fatalf("a lost host plan has no candidate: %+v", p)
	}
	if p.AssessedCount != 2 || p.PreservedCount != 2 {
		t.Errorf("counts %d/%d, want 2/2 (the host's rows only)", p.AssessedCount, p.PreservedCount)
	}
	want := map[string]string{"e1": ReasonHostBindingUnproven, "e2": ReasonAlreadyTerminal}
	for _, a := range p.Preserved {
		if want[a.WorkerIdentity] != a.ReasonCode {
			t.Errorf("%s preserved as %s, want %s", a.WorkerIdentity, a.ReasonCode, want[a.WorkerIdentity])
		}
		if a.ReasonCode == ReasonHostBindingUnproven && a.Detail != "agent of E gone" {
			t.Errorf("detail %q", a.Detail)
		}
	}
	if p.RegistryFingerprint != RegistryFingerprint(rows) {
		t.Error("the registry fingerprint is the whole namespace's")
	}
	if p.CandidateFingerprint != CandidateFingerprint(nil, "acme/widgets") {
		t.Error("the candidate fingerprint is that of no candidate")
	}
	if p.PreservedReasonCounts[ReasonHostBindingUnproven] != 1 || p.PreservedReasonCounts[ReasonAlreadyTerminal] != 1 {
		t.Errorf("reason counts %v", p.PreservedReasonCounts)
	}
}

func TestLostHostApply(t *testing.T) {
	rep := LostHostApply([]string{"e2", "e1", "e1"}, "gone")
	if rep.Outcome != OutcomeTransactionFailed || rep.MutationPerformed || rep.RetiredCount != 0 {
		t.Fatalf("report %+v", rep)
	}
	if len(rep.Preserved) != 2 || rep.Preserved[0].WorkerIdentity != "e1" || rep.Preserved[1].ReasonCode != ReasonHostBindingUnproven {
		t.Errorf("preserved %+v", rep.Preserved)
	}
	if v := JudgeApply(rep); v.Success {
		t.Error("an apply that could not run on its host is no success")
	}
	if none := LostHostApply(nil, "gone"); none.Outcome != OutcomeNothingRequested || len(none.Preserved) != 0 {
		t.Errorf("a lost host with nothing approved: %+v", none)
	}
	// In a fleet, a lost host keeps the whole report from being a success.
	ok := true
	agg, _, done := AggregateApply([]HostShare{
		{HostID: "A", Plan: "p-a", Apply: &HostApply{Outcome: OutcomeApplied, Retired: []string{"a1"}, RetiredCount: 1, MutationPerformed: true, Complete: &ok}},
		{HostID: "E", Plan: "p-e", Apply: &HostApply{Outcome: rep.Outcome, Preserved: rep.Preserved, Message: rep.Detail}},
	})
	if !done || agg.Outcome != OutcomeApplied || !agg.Interrupted || JudgeApply(agg).Success {
		t.Errorf("fleet report %+v", agg)
	}
	if !strings.Contains(LostHostDetail("E", HostLease{}, time.Second), `"E"`) {
		t.Error("the detail names the host")
	}
}

func TestJudgeLostHost(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	grace := 15 * time.Second
	held := HostLease{Held: true}
	unheldLong := HostLease{UnheldSince: now.Add(-time.Minute)}
	unheldJust := HostLease{UnheldSince: now.Add(-5 * time.Second)}
	for _, tc := range []struct {
		name string
		in   LostHostInput
		want LostHostVerdict
	}{
		{"planned and not approved waits for nothing",
			LostHostInput{Outcome: OutcomePlanned, Lease: unheldLong}, LostHostVerdict{Action: LostHostLeave}},
		{"applied waits for nothing",
			LostHostInput{Outcome: OutcomeApplied, Approved: true, Lease: unheldLong}, LostHostVerdict{Action: LostHostLeave}},
		{"not planned, held Lease: look again when its term could lapse, plus the grace",
			LostHostInput{Lease: held, LeaseExpires: now.Add(10 * time.Second)}, LostHostVerdict{Action: LostHostWait, RecheckAt: now.Add(25 * time.Second)}},
		{"not planned, held Lease of unknown term: only an event brings it back",
			LostHostInput{Lease: held}, LostHostVerdict{Action: LostHostWait}},
		{"not planned, unheld within the grace: look again when the grace ends",
			LostHostInput{Lease: unheldJust}, LostHostVerdict{Action: LostHostWait, RecheckAt: now.Add(10 * time.Second)}},
		{"not planned, unheld past the grace: close the plan",
			LostHostInput{Lease: unheldLong}, LostHostVerdict{Action: LostHostClosePlan}},
		{"not planned, no Lease at all: close the plan",
			LostHostInput{Lease: HostLease{}}, LostHostVerdict{Action: LostHostClosePlan}},
		{"approved before its apply, lost: close the apply",
			LostHostInput{Outcome: OutcomePlanned, Approved: true, Lease: unheldLong}, LostHostVerdict{Action: LostHostCloseApply}},
		{"approved before its apply, within the grace: wait",
			LostHostInput{Outcome: OutcomePlanned, Approved: true, Lease: unheldJust}, LostHostVerdict{Action: LostHostWait, RecheckAt: now.Add(10 * time.Second)}},
		{"apply in progress, lost: settle it as a takeover",
			LostHostInput{Outcome: OutcomePlanned, ApplyInProgress: true, Approved: true, Lease: unheldLong}, LostHostVerdict{Action: LostHostSettleApply}},
		{"apply in progress, not approved any more, lost: still settle it",
			LostHostInput{Outcome: OutcomePlanned, ApplyInProgress: true, Lease: unheldLong}, LostHostVerdict{Action: LostHostSettleApply}},
	} {
		tc.in.Now, tc.in.Grace = now, grace
		if got := JudgeLostHost(tc.in); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
