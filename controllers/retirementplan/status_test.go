package retirementplan

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// conditionsOf returns Ready, Stalled and Approved/Applied as "True"/"False"/"" (absent).
func conditionsOf(p *fleetv1alpha1.RetirementPlan, types ...string) []string {
	out := make([]string, 0, len(types))
	for _, typ := range types {
		c := meta.FindStatusCondition(p.Status.Conditions, typ)
		if c == nil {
			out = append(out, "")
			continue
		}
		if c.ObservedGeneration != p.Generation {
			out = append(out, "stale-generation")
			continue
		}
		out = append(out, string(c.Status))
	}
	return out
}

// setPlanStatus records dry run p on plan, planned at at, the way a host plan's step does.
func setPlanStatus(plan *fleetv1alpha1.RetirementPlan, p retirement.Plan, at time.Time) {
	nextHostStatus(plan, hostResult{planned: &world{plan: p, plannedAt: at}}, at)
}

func TestSetPlanStatus(t *testing.T) {
	plan := &fleetv1alpha1.RetirementPlan{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	p := retirement.Plan{Outcome: retirement.OutcomePlanned, RegistryFingerprint: "sha256:r", CandidateFingerprint: "sha256:c",
		CandidateWorkerIdentities: []string{"a"}, CandidateCount: 1, AssessedCount: 2, PreservedCount: 1,
		Candidates:            []retirement.Assessment{{WorkerIdentity: "a", ReasonCode: retirement.ReasonEligibleStaleOrphan}},
		Preserved:             []retirement.Assessment{{WorkerIdentity: "b", ReasonCode: retirement.ReasonWorkerLive}},
		PreservedReasonCounts: map[string]int{retirement.ReasonWorkerLive: 1}}
	setPlanStatus(plan, p, time.Unix(1700000000, 0))
	s := plan.Status
	if s.Outcome != retirement.OutcomePlanned || !s.ReadOnly || s.MutationPerformed || s.ObservedGeneration != 3 ||
		s.CandidateCount != 1 || s.PreservedReasonCounts[retirement.ReasonWorkerLive] != 1 || len(s.Candidates) != 1 {
		t.Fatalf("plan status = %+v", s)
	}
	if got := conditionsOf(plan, fleetv1alpha1.ReadyCondition, fleetv1alpha1.StalledCondition, fleetv1alpha1.ApprovedCondition); got[0] != "True" || got[1] != "" || got[2] != "False" {
		t.Fatalf("Ready, Stalled, Approved = %v, want True, absent, False", got)
	}
}

// judge is the verdict on an approval that passes every check, changed by change.
func judge(change func(*retirement.ApprovalFacts)) retirement.ApprovalVerdict {
	created := time.Unix(1700000000, 0)
	f := retirement.ApprovalFacts{PlanCreated: created, Subject: retirement.SubjectFacts{User: "gitops"}, Authorized: true,
		Guard: retirement.ApprovalGuard{PolicyFound: true, BindingFound: true, LastWritten: created.Add(-time.Hour)}}
	change(&f)
	return retirement.JudgeApproval(f)
}

func TestSetApproval(t *testing.T) {
	tests := []struct {
		name                                 string
		v                                    retirement.ApprovalVerdict
		ready, stalled, reconciling, approve string
	}{
		{"approved: applying until its report", judge(func(*retirement.ApprovalFacts) {}), "False", "", "True", "True"},
		{"mismatch: final", judge(func(f *retirement.ApprovalFacts) { f.Mismatch = "tokens differ" }), "False", "True", "", "False"},
		{"approver not yet authorized: waits, looked at again", judge(func(f *retirement.ApprovalFacts) { f.Authorized, f.AuthorizerWhy = false, "no verb" }), "False", "", "True", "False"},
		{"guarding policy missing: final", judge(func(f *retirement.ApprovalFacts) { f.Guard.PolicyFound = false }), "False", "True", "", "False"},
		{"approver is a worker: final", judge(func(f *retirement.ApprovalFacts) {
			f.Subject = retirement.SubjectFacts{User: "system:serviceaccount:fleet:bot", HasRegistration: true}
		}), "False", "True", "", "False"},
	}
	for _, tt := range tests {
		plan := &fleetv1alpha1.RetirementPlan{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Spec: fleetv1alpha1.RetirementPlanSpec{Approval: &fleetv1alpha1.RetirementApproval{}}}
		setPlanStatus(plan, retirement.Plan{Outcome: retirement.OutcomePlanned}, time.Unix(1700000000, 0))
		plan = approve(plan, tt.v)
		got := conditionsOf(plan, fleetv1alpha1.ReadyCondition, fleetv1alpha1.StalledCondition, fleetv1alpha1.ReconcilingCondition, fleetv1alpha1.ApprovedCondition)
		if got[0] != tt.ready || got[1] != tt.stalled || got[2] != tt.reconciling || got[3] != tt.approve {
			t.Errorf("%s: Ready, Stalled, Reconciling, Approved = %v, want %s, %q, %q, %s", tt.name, got, tt.ready, tt.stalled, tt.reconciling, tt.approve)
		}
	}
}

func TestSetApplyStatus(t *testing.T) {
	tests := []struct {
		name                              string
		rep                               retirement.ApplyReport
		ready, stalled, applied, approved string
		success                           bool
	}{
		{"clean", retirement.ApplyReport{Outcome: retirement.OutcomeApplied, RetiredCount: 1, Retired: []string{"a"}, MutationPerformed: true}, "True", "", "True", "True", true},
		{"partial", retirement.ApplyReport{Outcome: retirement.OutcomeApplied, RetiredCount: 1, Interrupted: true}, "False", "True", "False", "True", false},
		{"registry moved: the approval approves nothing now", retirement.ApplyReport{Outcome: retirement.OutcomeRegistryRevisionMoved}, "False", "True", "False", "False", true},
		{"candidate set moved: the approval approves nothing now", retirement.ApplyReport{Outcome: retirement.OutcomeCandidateSetMoved}, "False", "True", "False", "False", true},
		{"transaction failed", retirement.ApplyReport{Outcome: retirement.OutcomeTransactionFailed}, "False", "True", "False", "True", false},
		{"already retired", retirement.ApplyReport{Outcome: retirement.OutcomeAlreadyRetired}, "True", "", "False", "True", true},
		{"interrupted, completed by a takeover", retirement.ApplyReport{Outcome: retirement.OutcomeApplied, RetiredCount: 2, Retired: []string{"a", "b"},
			MutationPerformed: true, Interrupted: true, Recovered: true}, "False", "True", "False", "True", false},
		{"interrupted before any row, completed by a takeover", retirement.ApplyReport{Outcome: retirement.OutcomeTransactionFailed,
			Interrupted: true, Recovered: true}, "False", "True", "False", "True", false},
	}
	for _, tt := range tests {
		plan := &fleetv1alpha1.RetirementPlan{ObjectMeta: metav1.ObjectMeta{Generation: 4},
			Spec: fleetv1alpha1.RetirementPlanSpec{Approval: &fleetv1alpha1.RetirementApproval{}}}
		setPlanStatus(plan, retirement.Plan{Outcome: retirement.OutcomePlanned}, time.Unix(1700000000, 0))
		plan = approve(plan, judge(func(*retirement.ApprovalFacts) {}))
		nextHostStatus(plan, hostResult{report: &tt.rep}, time.Now())
		got := conditionsOf(plan, fleetv1alpha1.ReadyCondition, fleetv1alpha1.StalledCondition, fleetv1alpha1.AppliedCondition,
			fleetv1alpha1.ApprovedCondition, fleetv1alpha1.ReconcilingCondition)
		if got[0] != tt.ready || got[1] != tt.stalled || got[2] != tt.applied || got[3] != tt.approved || got[4] != "" {
			t.Errorf("%s: Ready, Stalled, Applied, Approved, Reconciling = %v, want %s, %q, %s, %s, \"\"", tt.name, got, tt.ready, tt.stalled, tt.applied, tt.approved)
		}
		s := plan.Status
		if s.Outcome != tt.rep.Outcome || s.Success == nil || *s.Success != tt.success || s.ReadOnly || s.RetiredCount != int32(tt.rep.RetiredCount) || s.AppliedAt == nil {
			t.Errorf("%s: status = %+v", tt.name, s)
		}
	}
}

// approve is a planned fleet plan after the step that records the verdict v on its
// approval, as the fleet reconciler decides it.
func approve(plan *fleetv1alpha1.RetirementPlan, v retirement.ApprovalVerdict) *fleetv1alpha1.RetirementPlan {
	return nextFleetStatus(plan, phaseOf(plan), fleetSeen{approval: &v}).next
}
