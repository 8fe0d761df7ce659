package retirement

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

func TestPlanFanout(t *testing.T) {
	rows := []Row{
		{Name: "a1", HostID: "A", Phase: fleet.Active},
		{Name: "a2", HostID: "A", Phase: fleet.Retired},
		{Name: "b1", HostID: "B", Phase: fleet.Active},
		{Name: "c1", HostID: "C", Phase: fleet.Active},
		{Name: "c2", HostID: "C", Phase: fleet.Active},
		{Name: "d1", HostID: "D", Phase: fleet.Retired}, // agent, but no Active row: no host plan
		{Name: "e1", HostID: "", Phase: fleet.Active},
	}
	f := PlanFanout(rows, func(h string) bool { return h == "A" || h == "B" || h == "D" || h == "" })
	if !reflect.DeepEqual(f.Hosts, []string{"A", "B"}) {
		t.Errorf("hosts %v", f.Hosts)
	}
	if want := []HostRows{{"", 1}, {"C", 2}}; !reflect.DeepEqual(f.WithoutAgent, want) {
		t.Errorf("without agent %v, want %v", f.WithoutAgent, want)
	}
	got := map[string]string{}
	for _, a := range f.Uncovered {
		got[a.WorkerIdentity] = a.ReasonCode
		if len(a.Evidence) == 0 {
			t.Errorf("%s carries no evidence", a.WorkerIdentity)
		}
	}
	want := map[string]string{"c1": ReasonHostBindingUnproven, "c2": ReasonHostBindingUnproven, "d1": ReasonAlreadyTerminal, "e1": ReasonHostBindingUnproven}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("uncovered %v, want %v", got, want)
	}
	for _, a := range f.Uncovered {
		if a.WorkerIdentity == "c1" && !strings.Contains(a.Detail, `"C"`) || a.WorkerIdentity == "c1" && !strings.Contains(a.Detail, "no agent") {
			t.Errorf("detail of c1 does not name the host and say no agent holds it: %q", a.Detail)
		}
	}
}

func TestForHostKeepsTheRegistryFingerprintAndNarrowsTheRest(t *testing.T) {
	rows := []Row{
		{Name: "a", HostID: "A"}, {Name: "b", HostID: "B"}, {Name: "a2", HostID: "A"},
	}
	p := Plan{
		RegistryFingerprint: "sha256:reg", CanonicalRepository: "acme/widgets", CanonicalBinding: "gitea:a/42",
		Candidates:                    []Assessment{{WorkerIdentity: "a", ReasonCode: ReasonEligibleStaleOrphan}},
		Preserved:                     []Assessment{{WorkerIdentity: "a2", ReasonCode: ReasonPIDAlive}, {WorkerIdentity: "b", ReasonCode: ReasonHostBindingUnproven}},
		ProtectedActiveWorkflowOwners: []string{"a2", "b"},
	}
	h := ForHost(p, rows, "A")
	if h.RegistryFingerprint != "sha256:reg" {
		t.Errorf("registry fingerprint %s", h.RegistryFingerprint)
	}
	if h.AssessedCount != 2 || h.CandidateCount != 1 || h.PreservedCount != 1 || h.PreservedReasonCounts[ReasonPIDAlive] != 1 {
		t.Errorf("counts %+v", h)
	}
	if !reflect.DeepEqual(h.CandidateWorkerIdentities, []string{"a"}) || !reflect.DeepEqual(h.ProtectedActiveWorkflowOwners, []string{"a2"}) {
		t.Errorf("identities %v owners %v", h.CandidateWorkerIdentities, h.ProtectedActiveWorkflowOwners)
	}
	if h.CandidateFingerprint != CandidateFingerprint([]Row{rows[0]}, "gitea:a/42") {
		t.Errorf("candidate fingerprint is not over the host's candidates")
	}
}

func share(host string, cands ...string) HostShare {
	s := HostShare{HostID: host, Plan: "p-" + host, Outcome: OutcomePlanned, CandidateFingerprint: "sha256:" + host + strings.Join(cands, ","),
		CandidateIdentities: cands, CandidateCount: len(cands), AssessedCount: len(cands) + 1, PreservedCount: 1,
		PreservedReasonCounts: map[string]int{ReasonWorkerLive: 1}, Preserved: []Assessment{{WorkerIdentity: "live-" + host, ReasonCode: ReasonWorkerLive}}}
	for _, c := range cands {
		s.Candidates = append(s.Candidates, Assessment{WorkerIdentity: c, ReasonCode: ReasonEligibleStaleOrphan})
	}
	return s
}

func TestAggregatePlanIsIndependentOfOrder(t *testing.T) {
	hosts := []HostShare{share("A", "a1", "a2"), share("B", "b1"), share("C")}
	unc := Uncovered{Listed: []Assessment{{WorkerIdentity: "z", ReasonCode: ReasonHostBindingUnproven}}, Count: 1,
		ReasonCounts: map[string]int{ReasonHostBindingUnproven: 1}, HostsWithoutAgent: 1}
	want := AggregatePlan(hosts, unc)
	if !want.Planned || want.CandidateCount != 3 || want.AssessedCount != 7 || want.PreservedCount != 4 {
		t.Fatalf("aggregate %+v", want)
	}
	if !reflect.DeepEqual(want.CandidateWorkerIdentities, []string{"a1", "a2", "b1"}) {
		t.Errorf("identities %v", want.CandidateWorkerIdentities)
	}
	if want.PreservedReasonCounts[ReasonHostBindingUnproven] != 1 || want.PreservedReasonCounts[ReasonWorkerLive] != 3 {
		t.Errorf("reason counts %v", want.PreservedReasonCounts)
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20; i++ {
		shuffled := append([]HostShare(nil), hosts...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := AggregatePlan(shuffled, unc); !reflect.DeepEqual(got, want) {
			t.Fatalf("order %v changed the aggregate", shuffled)
		}
	}
}

func TestAggregatePlanWaitsForEveryHost(t *testing.T) {
	b := share("B", "b1")
	b.Outcome = ""
	f := AggregatePlan([]HostShare{share("A", "a1"), b}, Uncovered{})
	if f.Planned || !reflect.DeepEqual(f.Waiting, []string{"p-B"}) {
		t.Errorf("%+v", f)
	}
}

func TestAggregatePlanBoundsItsLists(t *testing.T) {
	var hosts []HostShare
	for h := 0; h < 5; h++ {
		var ids []string
		for i := 0; i < 600; i++ {
			ids = append(ids, fmt.Sprintf("h%d-%04d", h, i))
		}
		hosts = append(hosts, share(fmt.Sprint(h), ids...))
	}
	f := AggregatePlan(hosts, Uncovered{})
	if f.CandidateCount != 3000 || len(f.Candidates) != MaxListedAssessments || len(f.CandidateWorkerIdentities) != MaxApprovableCandidates {
		t.Errorf("count %d, listed %d, identities %d", f.CandidateCount, len(f.Candidates), len(f.CandidateWorkerIdentities))
	}
	if !strings.Contains(f.Message, "more than") {
		t.Errorf("message %q", f.Message)
	}
}

func TestFleetCandidateFingerprint(t *testing.T) {
	a, b := share("A", "a1"), share("B", "b1")
	fp := FleetCandidateFingerprint([]HostShare{a, b})
	if fp != FleetCandidateFingerprint([]HostShare{b, a}) {
		t.Error("depends on order")
	}
	b2 := b
	b2.CandidateFingerprint = "sha256:other"
	if fp == FleetCandidateFingerprint([]HostShare{a, b2}) {
		t.Error("does not move with a host's candidates")
	}
	c := a
	c.HostID = "C"
	if fp == FleetCandidateFingerprint([]HostShare{c, b}) {
		t.Error("does not bind the host")
	}
	if !strings.HasPrefix(fp, "sha256:") || len(fp) != len("sha256:")+64 {
		t.Errorf("shape %s", fp)
	}
}

func TestHostIdentities(t *testing.T) {
	if got := HostIdentities([]string{"b1", "a1", "a2", "a1"}, []string{"a1", "a2", "x"}); !reflect.DeepEqual(got, []string{"a1", "a2"}) {
		t.Errorf("%v", got)
	}
	if got := HostIdentities(nil, []string{"a1"}); got != nil {
		t.Errorf("%v", got)
	}
}

func applied(host string, outcome string, complete *bool, retired ...string) HostShare {
	s := share(host)
	s.Apply = &HostApply{Outcome: outcome, Retired: retired, RetiredCount: len(retired), MutationPerformed: len(retired) > 0, Complete: complete, Message: "msg " + host}
	return s
}

func TestAggregateApply(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name        string
		hosts       []HostShare
		outcome     string
		interrupted bool
		retired     []string
		reason      string
	}{
		{"all clean", []HostShare{applied("A", OutcomeApplied, &yes, "a"), applied("B", OutcomeApplied, &yes, "b")}, OutcomeApplied, false, []string{"a", "b"}, ConditionApplySucceeded},
		{"one partial", []HostShare{applied("A", OutcomeApplied, &yes, "a"), applied("B", OutcomeApplied, &no, "b")}, OutcomeApplied, true, []string{"a", "b"}, ConditionApplyPartial},
		{"one refused after another retired", []HostShare{applied("A", OutcomeApplied, &yes, "a"), applied("B", OutcomeRegistryRevisionMoved, nil)}, OutcomeApplied, true, []string{"a"}, ConditionApplyPartial},
		{"both refused", []HostShare{applied("A", OutcomeCandidateSetMoved, nil), applied("B", OutcomeRegistryRevisionMoved, nil)}, OutcomeRegistryRevisionMoved, false, nil, ConditionApplyRefused},
		{"one failed", []HostShare{applied("A", OutcomeNothingRequested, nil), applied("B", OutcomeTransactionFailed, nil)}, OutcomeTransactionFailed, false, nil, ConditionApplyFailed},
		{"nothing to write", []HostShare{applied("A", OutcomeNothingRequested, nil), applied("B", OutcomeAlreadyRetired, nil)}, OutcomeAlreadyRetired, false, nil, ConditionNothingToApply},
		{"clean with one host that had nothing", []HostShare{applied("A", OutcomeApplied, &yes, "a"), applied("B", OutcomeNothingRequested, nil)}, OutcomeApplied, false, []string{"a"}, ConditionApplySucceeded},
		{"no host", nil, OutcomeNothingRequested, false, nil, ConditionNothingToApply},
		{"one taken over after a crash", []HostShare{applied("A", OutcomeApplied, &yes, "a"), recovered(applied("B", OutcomeApplied, &no, "b"))}, OutcomeApplied, true, []string{"a", "b"}, ConditionApplyInterrupted},
		{"the only host taken over", []HostShare{recovered(applied("A", OutcomeApplied, &no, "a"))}, OutcomeApplied, true, []string{"a"}, ConditionApplyInterrupted},
		{"taken over before any row", []HostShare{applied("A", OutcomeNothingRequested, nil), recovered(applied("B", OutcomeTransactionFailed, nil))}, OutcomeTransactionFailed, false, nil, ConditionApplyInterrupted},
		{"one resumed after a crash", []HostShare{applied("A", OutcomeApplied, &yes, "a"), resumed(applied("B", OutcomeApplied, &yes, "b"))}, OutcomeApplied, false, []string{"a", "b"}, ConditionApplyResumed},
		{"one resumed, another taken over without resuming", []HostShare{resumed(applied("A", OutcomeApplied, &yes, "a")), recovered(applied("B", OutcomeApplied, &no, "b"))}, OutcomeApplied, true, []string{"a", "b"}, ConditionApplyInterrupted},
		{"a resumption that stopped early is partial", []HostShare{resumed(applied("A", OutcomeApplied, &no, "a"))}, OutcomeApplied, true, []string{"a"}, ConditionApplyPartial},
	}
	for _, tc := range tests {
		rep, msg, done := AggregateApply(tc.hosts)
		if !done || rep.Outcome != tc.outcome || rep.Interrupted != tc.interrupted || !reflect.DeepEqual(rep.Retired, tc.retired) {
			t.Errorf("%s: done=%v %+v", tc.name, done, rep)
		}
		v := JudgeApply(rep)
		if v.Reason != tc.reason {
			t.Errorf("%s: reason %s, want %s", tc.name, v.Reason, tc.reason)
		}
		if tc.reason == ConditionApplyInterrupted && (v.Complete == nil || *v.Complete) {
			t.Errorf("%s: an interrupted fleet apply reads as complete", tc.name)
		}
		if v.Success != (tc.reason == ConditionApplySucceeded || tc.reason == ConditionApplyResumed || tc.reason == ConditionNothingToApply || tc.reason == ConditionApplyRefused) {
			t.Errorf("%s: success %v", tc.name, v.Success)
		}
		if len(tc.hosts) == 1 && msg != tc.hosts[0].Apply.Message {
			t.Errorf("%s: a single host's message is not mirrored: %q", tc.name, msg)
		}
	}
	if _, _, done := AggregateApply([]HostShare{applied("A", OutcomeApplied, &yes, "a"), share("B")}); done {
		t.Error("done before every host applied")
	}
	if rep, msg, _ := AggregateApply([]HostShare{applied("A", OutcomeApplied, &yes, "a")}); msg != "msg A" || rep.RetiredCount != 1 {
		t.Errorf("single host: %q %+v", msg, rep)
	}
}

// recovered marks a host plan's report as completed by a takeover.
func recovered(h HostShare) HostShare {
	h.Apply.Recovered = true
	return h
}

// resumed marks a host plan's apply as resumed by a takeover.
func resumed(h HostShare) HostShare {
	h.Apply.Resumed = true
	return h
}

func TestRegistryFingerprintBeforeSiblings(t *testing.T) {
	const ref = "ns/fleet"
	stale := func(name, host string) Row {
		return Row{Name: name, Namespace: "ns", HostID: host, Phase: fleet.Active, OwnershipState: fleet.Stale, LastHeartbeatAt: "2026-12-01T10:00:00Z"}
	}
	retired := func(r Row, by string) Row {
		r.Phase, r.OwnershipState, r.RetiredBy, r.RetiredAt = fleet.Retired, fleet.Historical, by, "2026-12-01T11:00:00Z"
		return r
	}
	planTime := []Row{stale("a-dead", "A"), stale("b-dead", "B"), {Name: "b-live", Namespace: "ns", HostID: "B", Phase: fleet.Active, OwnershipState: fleet.Live}}
	want := RegistryFingerprint(planTime)
	with := func(edit func(rs []Row)) []Row {
		rs := slices.Clone(planTime)
		edit(rs)
		return rs
	}
	cases := []struct {
		name  string
		rows  []Row
		host  string
		match bool
	}{
		{"nothing moved", planTime, "B", true},
		{"the sibling host retired its candidate", with(func(rs []Row) { rs[0] = retired(rs[0], ref) }), "B", true},
		{"a row of this host retired by the same fleet plan", with(func(rs []Row) { rs[1] = retired(rs[1], ref) }), "B", false},
		{"a sibling row retired by another plan", with(func(rs []Row) { rs[0] = retired(rs[0], "ns/other") }), "B", false},
		{"a sibling row that was live at plan time, now retired by the fleet plan", with(func(rs []Row) { rs[2] = retired(rs[2], ref) }), "A", false},
		{"the sibling candidate heartbeat moved before its retirement", with(func(rs []Row) {
			rs[0].LastHeartbeatAt = "2026-12-01T10:30:00Z"
			rs[0] = retired(rs[0], ref)
		}), "B", false},
		{"the sibling retired its row and a live row heartbeat", with(func(rs []Row) {
			rs[0] = retired(rs[0], ref)
			rs[2].LastHeartbeatAt = "2026-12-01T10:31:00Z"
		}), "B", false},
	}
	for _, c := range cases {
		got := RegistryFingerprintBeforeSiblings(c.rows, ref, c.host)
		if (got == want) != c.match {
			t.Errorf("%s: fingerprint matches the plan-time registry = %v, want %v", c.name, got == want, c.match)
		}
	}
	if got := RegistryFingerprintBeforeSiblings(planTime, "", "B"); got != want {
		t.Errorf("without a fleet plan the fingerprint is not the plain registry fingerprint")
	}
	before := slices.Clone(planTime)
	edited := with(func(rs []Row) { rs[0] = retired(rs[0], ref) })
	_ = RegistryFingerprintBeforeSiblings(edited, ref, "B")
	if edited[0].Phase != fleet.Retired || !reflect.DeepEqual(planTime, before) {
		t.Errorf("the rows passed in were changed")
	}
}
