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
	p := LostHostPlan(rows, "E", "acme/widgets", "agent of E gone")
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
