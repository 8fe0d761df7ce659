package retirementplan

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// fanned is a fleet plan fanned out to hosts a and b, at generation 2, in the given
// outcome ("" before the dry run), with or without an approval in its spec.
func fanned(outcome string, approval bool) *fleetv1alpha1.RetirementPlan {
	p := &fleetv1alpha1.RetirementPlan{ObjectMeta: metav1.ObjectMeta{Name: "retire", Namespace: "ns", Generation: 2}}
	p.Status.Outcome = outcome
	p.Status.Hosts = []fleetv1alpha1.HostPlanStatus{{HostID: "a", Plan: "retire-a", Agent: "agent-a"}, {HostID: "b", Plan: "retire-b", Agent: "agent-b"}}
	if approval {
		p.Spec.Approval = &fleetv1alpha1.RetirementApproval{RegistryFingerprint: "sha256:r", CandidateFingerprint: "sha256:c"}
	}
	return p
}

func plannedShare(host string, candidates int) retirement.HostShare {
	ids := make([]string, 0, candidates)
	for i := 0; i < candidates; i++ {
		ids = append(ids, host+"-dead-"+string(rune('0'+i)))
	}
	as := make([]retirement.Assessment, 0, candidates)
	for _, id := range ids {
		as = append(as, retirement.Assessment{WorkerIdentity: id, ReasonCode: retirement.ReasonEligibleStaleOrphan})
	}
	return retirement.HostShare{HostID: host, Plan: "retire-" + host, Agent: "agent-" + host, Outcome: retirement.OutcomePlanned,
		Candidates: as, CandidateIdentities: ids, AssessedCount: candidates + 1, CandidateCount: candidates, PreservedCount: 1,
		PreservedReasonCounts: map[string]int{retirement.ReasonWorkerLive: 1}, CandidateFingerprint: "sha256:" + host}
}

func cond(p *fleetv1alpha1.RetirementPlan, typ string) string {
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	switch {
	case c == nil:
		return ""
	case c.ObservedGeneration != p.Generation:
		return "stale-generation"
	}
	return string(c.Status) + "/" + c.Reason
}

// TestNextFleetStatus takes nextFleetStatus through each of its branches: waiting for
// host plans, the dry run's aggregate (with and without an approval waiting), the
// approval verdict (approved, refused once, refused again), the apply's aggregate
// (clean and interrupted), and what every step records besides: lost hosts and pages.
func TestNextFleetStatus(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	refused := retirement.ApprovalVerdict{Reason: fleetv1alpha1.ReasonApproverNotAuthorized, Message: "pete may not approve"}
	cases := []struct {
		name string
		plan *fleetv1alpha1.RetirementPlan
		// prepare adjusts the plan before its phase is read.
		prepare func(*fleetv1alpha1.RetirementPlan)
		seen    fleetSeen
		check   func(t *testing.T, step fleetStep)
	}{{
		name: "a host plan has not planned: the plan waits, Reconciling, with no outcome",
		plan: fanned("", false),
		seen: fleetSeen{shares: []retirement.HostShare{plannedShare("a", 2), {HostID: "b", Plan: "retire-b"}}, now: now},
		check: func(t *testing.T, step fleetStep) {
			s := step.next.Status
			if s.Outcome != "" || step.outcome != "" || step.event != nil || step.again {
				t.Errorf("outcome %q/%q, event %v, again %v: want nothing decided", s.Outcome, step.outcome, step.event, step.again)
			}
			if got := cond(step.next, fleetv1alpha1.ReconcilingCondition); got != "True/"+fleetv1alpha1.ReasonWaitingForHostPlans {
				t.Errorf("Reconciling = %s", got)
			}
			if got := cond(step.next, fleetv1alpha1.ReadyCondition); got != "False/"+fleetv1alpha1.ReasonWaitingForHostPlans {
				t.Errorf("Ready = %s", got)
			}
		},
	}, {
		name: "every host plan planned, no approval yet: planned, AwaitingApproval, pages being written",
		plan: fanned("", false),
		seen: fleetSeen{shares: []retirement.HostShare{plannedShare("a", 2), plannedShare("b", 1)},
			pages: []retirement.HostPages{{HostID: "a", State: retirement.ConditionPagesWritten}, {HostID: "b"}}, now: now},
		check: func(t *testing.T, step fleetStep) {
			s := step.next.Status
			if s.Outcome != retirement.OutcomePlanned || step.outcome != retirement.OutcomePlanned || s.CandidateCount != 3 || s.AssessedCount != 5 {
				t.Errorf("outcome %q, candidates %d, assessed %d", s.Outcome, s.CandidateCount, s.AssessedCount)
			}
			if step.again {
				t.Error("with no approval in the spec, nothing follows at once")
			}
			if step.event == nil || step.event.reason != fleetv1alpha1.ReasonPlanned || step.event.kind != corev1.EventTypeNormal {
				t.Errorf("event %+v, want Normal Planned", step.event)
			}
			if got := cond(step.next, fleetv1alpha1.ApprovedCondition); got != "False/"+fleetv1alpha1.ReasonAwaitingApproval {
				t.Errorf("Approved = %s", got)
			}
			if got := cond(step.next, fleetv1alpha1.ReadyCondition); got != "True/"+fleetv1alpha1.ReasonPlanned {
				t.Errorf("Ready = %s", got)
			}
			if got := cond(step.next, fleetv1alpha1.PagesReadyCondition); got != "False/"+retirement.ConditionWritingPages || s.Pages != nil {
				t.Errorf("PagesReady = %s, pages %v: host b's pages are still being written", got, s.Pages)
			}
			if s.Hosts[0].CandidateCount != 2 || s.Hosts[1].CandidateCount != 1 || s.Hosts[0].Outcome != retirement.OutcomePlanned {
				t.Errorf("hosts %+v: each records its share", s.Hosts)
			}
		},
	}, {
		name: "every host plan planned, an approval already set: the approval is judged next, at once",
		plan: fanned("", true),
		seen: fleetSeen{shares: []retirement.HostShare{plannedShare("a", 1), plannedShare("b", 1)}, now: now},
		check: func(t *testing.T, step fleetStep) {
			if !step.again || step.next.Status.Outcome != retirement.OutcomePlanned {
				t.Errorf("again %v, outcome %q", step.again, step.next.Status.Outcome)
			}
			if got := cond(step.next, fleetv1alpha1.ApprovedCondition); got != "" {
				t.Errorf("Approved = %s before any verdict", got)
			}
		},
	}, {
		name: "an approval judged approved: Approved, applying, the apply follows at once, no Event",
		plan: fanned(retirement.OutcomePlanned, true),
		seen: fleetSeen{shares: []retirement.HostShare{plannedShare("a", 1), plannedShare("b", 1)},
			approval: &retirement.ApprovalVerdict{Approved: true, Reason: fleetv1alpha1.ReasonApprovalMatches, Message: "ok"}, now: now},
		check: func(t *testing.T, step fleetStep) {
			if !step.again || step.approval == nil || !step.approval.Approved || step.event != nil {
				t.Errorf("again %v, approval %v, event %v", step.again, step.approval, step.event)
			}
			if got := cond(step.next, fleetv1alpha1.ApprovedCondition); got != "True/"+fleetv1alpha1.ReasonApprovalMatches {
				t.Errorf("Approved = %s", got)
			}
			if got := cond(step.next, fleetv1alpha1.ReadyCondition); got == "" || got[:5] != "False" {
				t.Errorf("Ready = %s: not Ready until the report is written", got)
			}
			if step.next.Status.ObservedGeneration != 2 {
				t.Errorf("observedGeneration %d", step.next.Status.ObservedGeneration)
			}
		},
	}, {
		name: "an approval refused for a new reason: Approved False, one Warning",
		plan: fanned(retirement.OutcomePlanned, true),
		seen: fleetSeen{shares: []retirement.HostShare{plannedShare("a", 1), plannedShare("b", 1)}, approval: &refused, now: now},
		check: func(t *testing.T, step fleetStep) {
			if step.again || step.event == nil || step.event.kind != corev1.EventTypeWarning || step.event.reason != refused.Reason {
				t.Errorf("again %v, event %+v", step.again, step.event)
			}
			if got := cond(step.next, fleetv1alpha1.ApprovedCondition); got != "False/"+refused.Reason {
				t.Errorf("Approved = %s", got)
			}
		},
	}, {
		name: "the same refusal on a recheck: recorded again, announced once only",
		plan: fanned(retirement.OutcomePlanned, true),
		prepare: func(p *fleetv1alpha1.RetirementPlan) {
			meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: fleetv1alpha1.ApprovedCondition, Status: metav1.ConditionFalse,
				Reason: refused.Reason, Message: refused.Message, ObservedGeneration: 2})
		},
		seen: fleetSeen{shares: []retirement.HostShare{plannedShare("a", 1), plannedShare("b", 1)}, approval: &refused, now: now},
		check: func(t *testing.T, step fleetStep) {
			if step.event != nil {
				t.Errorf("event %+v on a recheck with the same reason", step.event)
			}
			if step.approval == nil {
				t.Error("the verdict still counts for the approver backoff")
			}
		},
	}, {
		name: "every host plan applied cleanly: applied, Applied True, Ready, a Normal Event",
		plan: fanned(retirement.OutcomePlanned, true),
		seen: fleetSeen{shares: []retirement.HostShare{plannedShare("a", 1), plannedShare("b", 1)}, now: now,
			applied: &fleetApply{report: retirement.ApplyReport{Outcome: retirement.OutcomeApplied, MutationPerformed: true, RetiredCount: 2,
				Retired: []string{"a-dead-0", "b-dead-0"}}}},
		check: func(t *testing.T, step fleetStep) {
			s := step.next.Status
			if s.Outcome != retirement.OutcomeApplied || step.outcome != retirement.OutcomeApplied || s.RetiredCount != 2 {
				t.Errorf("outcome %q/%q, retired %d", s.Outcome, step.outcome, s.RetiredCount)
			}
			if step.event == nil || step.event.kind != corev1.EventTypeNormal || step.event.action != "Apply" {
				t.Errorf("event %+v", step.event)
			}
			if got := cond(step.next, fleetv1alpha1.AppliedCondition); got == "" || got[:4] != "True" {
				t.Errorf("Applied = %s", got)
			}
			if got := cond(step.next, fleetv1alpha1.ReadyCondition); got == "" || got[:4] != "True" {
				t.Errorf("Ready = %s", got)
			}
		},
	}, {
		name: "an interrupted apply on a host: not applied cleanly, Stalled, a Warning",
		plan: fanned(retirement.OutcomePlanned, true),
		seen: fleetSeen{shares: []retirement.HostShare{plannedShare("a", 1), plannedShare("b", 1)}, now: now,
			applied: &fleetApply{message: "host b stopped", report: retirement.ApplyReport{Outcome: retirement.OutcomeTransactionFailed, Interrupted: true,
				RetiredCount: 1, Retired: []string{"a-dead-0"}, MutationPerformed: true,
				Preserved: []retirement.Assessment{{WorkerIdentity: "b-dead-0", ReasonCode: retirement.OutcomeTransactionFailed}}}}},
		check: func(t *testing.T, step fleetStep) {
			if step.event == nil || step.event.kind != corev1.EventTypeWarning {
				t.Errorf("event %+v", step.event)
			}
			if got := cond(step.next, fleetv1alpha1.StalledCondition); got == "" || got[:4] != "True" {
				t.Errorf("Stalled = %s", got)
			}
			if got := cond(step.next, fleetv1alpha1.ReadyCondition); got == "" || got[:5] != "False" {
				t.Errorf("Ready = %s", got)
			}
			if step.next.Status.Message != "host b stopped" && meta.FindStatusCondition(step.next.Status.Conditions, fleetv1alpha1.ReadyCondition).Message != "host b stopped" {
				t.Errorf("the aggregate's message is not recorded: %q", step.next.Status.Message)
			}
		},
	}, {
		name: "a lost host, whatever the step: listed once among the hosts without an agent, its agent cleared",
		plan: fanned(retirement.OutcomePlanned, false),
		seen: fleetSeen{shares: []retirement.HostShare{plannedShare("a", 1), plannedShare("b", 1)}, now: now,
			lost: []fleetv1alpha1.HostRowCount{{HostID: "b", RowCount: 3}}},
		check: func(t *testing.T, step fleetStep) {
			s := step.next.Status
			if s.HostsWithoutAgentCount != 1 || len(s.HostsWithoutAgent) != 1 || s.HostsWithoutAgent[0].HostID != "b" || s.HostsWithoutAgent[0].RowCount != 3 {
				t.Errorf("hosts without agent %+v (%d)", s.HostsWithoutAgent, s.HostsWithoutAgentCount)
			}
			if s.Hosts[1].Agent != "" || s.Hosts[0].Agent != "agent-a" {
				t.Errorf("hosts %+v: only b's agent is cleared", s.Hosts)
			}
		},
	}, {
		name: "pages pending and every host's written: PagesReady True, status.pages with the selector and the plan's own pages",
		plan: fanned(retirement.OutcomePlanned, false),
		prepare: func(p *fleetv1alpha1.RetirementPlan) {
			meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: fleetv1alpha1.PagesReadyCondition, Status: metav1.ConditionFalse,
				Reason: fleetv1alpha1.ReasonWritingPages, ObservedGeneration: 2})
		},
		seen: fleetSeen{shares: []retirement.HostShare{plannedShare("a", 1), plannedShare("b", 1)}, now: now,
			pages:     []retirement.HostPages{{HostID: "a", State: retirement.ConditionPagesWritten}, {HostID: "b", State: retirement.ConditionPagesWritten}},
			hostPages: fleetv1alpha1.RetirementPlanPages{Candidates: 2, Preserved: 2}, ownPages: 1},
		check: func(t *testing.T, step fleetStep) {
			s := step.next.Status
			if got := cond(step.next, fleetv1alpha1.PagesReadyCondition); got != "True/"+retirement.ConditionPagesWritten {
				t.Errorf("PagesReady = %s", got)
			}
			if s.Pages == nil || s.Pages.Selector != fleetv1alpha1.FleetPlanLabel+"="+labelValue("retire") || s.Pages.Preserved != 3 || s.Pages.Candidates != 2 {
				t.Errorf("pages %+v", s.Pages)
			}
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.prepare != nil {
				c.prepare(c.plan)
			}
			before := c.plan.DeepCopy()
			step := nextFleetStatus(c.plan, phaseOf(c.plan), c.seen)
			c.check(t, step)
			if !equalStatus(&before.Status, &c.plan.Status) {
				t.Error("nextFleetStatus changed the plan it was given; it decides on a copy")
			}
		})
	}
}

// TestSetPlanStatusOfHostPlan: a planned host plan says it is approved through its fleet
// plan, and is Ready, and its pages are being written.
func TestSetPlanStatusOfHostPlan(t *testing.T) {
	p := retirement.Plan{Outcome: retirement.OutcomePlanned, CandidateFingerprint: "sha256:c"}
	host := &fleetv1alpha1.RetirementPlan{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: fleetv1alpha1.RetirementPlanSpec{HostID: "a"}}
	setPlanStatus(host, p, time.Unix(1700000000, 0))
	if got := cond(host, fleetv1alpha1.ApprovedCondition); got != "False/"+fleetv1alpha1.ReasonAwaitingFleetApproval {
		t.Errorf("host plan: Approved = %s", got)
	}
	if got := cond(host, fleetv1alpha1.ReadyCondition); got != "True/"+fleetv1alpha1.ReasonPlanned {
		t.Errorf("host plan: Ready = %s", got)
	}
	if got := cond(host, fleetv1alpha1.PagesReadyCondition); got != "False/"+fleetv1alpha1.ReasonWritingPages {
		t.Errorf("host plan: PagesReady = %s", got)
	}
}
