package retirementplan

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// fleetSeen is what one pass over a fleet plan that has fanned out read (observe): its
// host plans and what the step it is at needs besides.
type fleetSeen struct {
	// shares and pages are the host plans as the aggregate sees them, in the order of
	// status.hosts; hostPages sums their page counts.
	shares    []retirement.HostShare
	pages     []retirement.HostPages
	hostPages fleetv1alpha1.RetirementPlanPages
	// ownPages counts the fleet plan's own pages (the rows no host plan covers).
	ownPages int32
	// lost are the hosts whose host plan was closed because its agent was lost and that
	// the fleet plan does not list yet, with their rows not retired.
	lost []fleetv1alpha1.HostRowCount
	// approval is the verdict on spec.approval, judged when the plan is planned and not
	// approved at its generation.
	approval *retirement.ApprovalVerdict
	// applied is the fleet's apply report, once every host plan has one.
	applied *fleetApply
	now     time.Time
}

// fleetApply is the fleet's apply report aggregated from its host plans'
// (retirement.AggregateApply), and the registry read after it.
type fleetApply struct {
	report  retirement.ApplyReport
	message string
	post    *fleetv1alpha1.PostApply
}

// fleetStep is what one pass decides: the fleet plan with its next status, and what is
// announced when that status is written.
type fleetStep struct {
	next *fleetv1alpha1.RetirementPlan
	// outcome is the outcome this pass recorded (planned, or the apply's), for plansTotal.
	outcome string
	// approval is the verdict judged this pass, for approvalsTotal and the backoff.
	approval *retirement.ApprovalVerdict
	// event is announced once the status is written; nil for none.
	event *stepEvent
	// again: the plan moved on and the next step can run at once.
	again bool
}

type stepEvent struct {
	kind, reason, action, message string
}

// nextFleetStatus decides a fleet plan's next status from what one pass saw. It is a
// function of the plan and seen alone: the aggregate reads the same whichever agent is the
// coordinator, and a pass retried after a conflict decides the same again.
//
//   - no outcome: the dry run, once every host plan has planned (aggregatePlanned);
//   - planned, with a verdict on the approval: the Approved condition (judgedApproval);
//   - planned and approved: the apply result, once every host plan has one (aggregateApplied).
//
// Whatever the step, the hosts' outcomes and counts, the hosts whose agent was lost and,
// while they are being written, the pages are recorded.
func nextFleetStatus(plan *fleetv1alpha1.RetirementPlan, ph fleetPhase, seen fleetSeen) fleetStep {
	step := fleetStep{next: plan.DeepCopy()}
	s := &step.next.Status
	for _, h := range seen.lost {
		listLostHost(s, h)
	}
	for i := range s.Hosts {
		recordShare(&s.Hosts[i], seen.shares[i])
	}
	var ready *conditions.Readiness
	var conds []conditions.Cond
	switch {
	case ph.outcome == "":
		ready, conds = aggregatePlanned(&step, seen)
	case seen.approval != nil:
		ready, conds = judgedApproval(&step, ph, *seen.approval)
	case seen.applied != nil:
		ready, conds = aggregateApplied(&step, len(seen.shares), *seen.applied, seen.now)
	}
	if s.Outcome != "" && (ph.pagesPending || step.outcome == retirement.OutcomePlanned) {
		conds = append(conds, fleetPagesReady(step.next, ph, seen))
	}
	conditions.Record(&s.Conditions, step.next.Generation, ready, conds...)
	return step
}

// aggregatePlanned is the dry run's step: waiting while a host plan has not planned, then
// the fleet plan's aggregate in the fields a single plan has, in the same shape.
func aggregatePlanned(step *fleetStep, seen fleetSeen) (*conditions.Readiness, []conditions.Cond) {
	plan := step.next
	s := &plan.Status
	f := retirement.AggregatePlan(seen.shares, retirement.Uncovered{
		Listed: apiconv.AssessmentsOf(s.Preserved), Count: int(s.PreservedCount),
		ReasonCounts: intCounts(s.PreservedReasonCounts), HostsWithoutAgent: int(s.HostsWithoutAgentCount),
	})
	if !f.Planned {
		return &conditions.Readiness{Reconciling: true, Reason: fleetv1alpha1.ReasonWaitingForHostPlans, Message: f.Message}, nil
	}
	for _, sh := range seen.shares { // every host plan records the binding it planned with
		if sh.CanonicalRepository != "" {
			s.CanonicalRepository = sh.CanonicalRepository
			break
		}
	}
	s.Outcome = retirement.OutcomePlanned
	s.CandidateFingerprint = f.CandidateFingerprint
	s.CandidateWorkerIdentities = f.CandidateWorkerIdentities
	s.Candidates = apiconv.Assessments(f.Candidates)
	s.Preserved = apiconv.Assessments(f.Preserved)
	s.PreservedReasonCounts = int32Counts(f.PreservedReasonCounts)
	s.AssessedCount, s.CandidateCount, s.PreservedCount = int32(f.AssessedCount), int32(f.CandidateCount), int32(f.PreservedCount)
	s.ProtectedActiveWorkflowOwners = f.ProtectedActiveWorkflowOwners
	s.MutationPerformed = false
	s.ReadOnly = true
	s.Success = ptr.To(true)
	s.PlannedAt = ptr.To(metav1.NewTime(seen.now))
	s.ObservedGeneration = plan.Generation
	s.Message = f.Message
	step.outcome = retirement.OutcomePlanned
	step.again = plan.Spec.Approval != nil
	step.event = &stepEvent{kind: corev1.EventTypeNormal, reason: fleetv1alpha1.ReasonPlanned, action: "Plan",
		message: fmt.Sprintf("Planned over %d host(s): %d candidate(s), %d preserved of %d assessed (%d host(s) without an agent)",
			len(seen.shares), f.CandidateCount, f.PreservedCount, f.AssessedCount, s.HostsWithoutAgentCount)}
	ready := &conditions.Readiness{Ready: true, Reason: fleetv1alpha1.ReasonPlanned, Message: s.Message}
	if plan.Spec.Approval == nil {
		return ready, []conditions.Cond{{Type: fleetv1alpha1.ApprovedCondition, Reason: fleetv1alpha1.ReasonAwaitingApproval, Message: "spec.approval is not set"}}
	}
	return ready, nil
}

// judgedApproval records the verdict on the approval. An approved plan is applying until
// its report is written; a refusal is announced when it is new, not on every recheck.
func judgedApproval(step *fleetStep, ph fleetPhase, v retirement.ApprovalVerdict) (*conditions.Readiness, []conditions.Cond) {
	step.approval, step.again = &v, v.Approved
	step.next.Status.ObservedGeneration = step.next.Generation
	if retirement.ApprovalEventDue(ph.approvedReason, v) {
		step.event = &stepEvent{kind: corev1.EventTypeWarning, reason: v.Reason, action: "Approve", message: "Not approved: " + v.Message}
	}
	return ptr.To(approvalReadiness(v)), []conditions.Cond{{Type: fleetv1alpha1.ApprovedCondition, True: v.Approved, Reason: v.Reason, Message: v.Message}}
}

// aggregateApplied records the fleet's apply report over its hosts.
func aggregateApplied(step *fleetStep, hosts int, a fleetApply, now time.Time) (*conditions.Readiness, []conditions.Cond) {
	rep := a.report
	v := retirement.JudgeApply(rep)
	if a.message != "" {
		v.Message = a.message
	}
	step.outcome = rep.Outcome
	kind := corev1.EventTypeNormal
	if !v.Succeeded {
		kind = corev1.EventTypeWarning
	}
	step.event = &stepEvent{kind: kind, reason: v.Reason, action: "Apply", message: fmt.Sprintf("Fleet apply over %d host(s) finished with outcome %s: %d retired, %d preserved",
		hosts, rep.Outcome, rep.RetiredCount, len(rep.Preserved))}
	return recordApply(step.next, rep, v, a.post, metav1.NewTime(now))
}

// fleetPagesReady is a planned fleet plan's PagesReady, from its host plans', and, once
// every host plan's pages are written, its status.pages: theirs and its own.
func fleetPagesReady(plan *fleetv1alpha1.RetirementPlan, ph fleetPhase, seen fleetSeen) conditions.Cond {
	reason, message := retirement.FleetPages(seen.pages)
	written := reason == fleetv1alpha1.ReasonPagesWritten
	plan.Status.Pages = nil
	if written {
		pages := seen.hostPages
		pages.Selector = fleetv1alpha1.FleetPlanLabel + "=" + ph.label
		pages.Preserved += seen.ownPages
		plan.Status.Pages = &pages
	}
	return conditions.Cond{Type: fleetv1alpha1.PagesReadyCondition, True: written, Reason: reason, Message: message}
}

// listLostHost lists a host whose agent was lost among the hosts without an agent (once:
// observe reports only hosts not listed yet).
func listLostHost(s *fleetv1alpha1.RetirementPlanStatus, h fleetv1alpha1.HostRowCount) {
	if len(s.HostsWithoutAgent) < retirement.MaxFleetHosts {
		s.HostsWithoutAgent = append(s.HostsWithoutAgent, h)
	}
	s.HostsWithoutAgentCount++
	for i := range s.Hosts {
		if s.Hosts[i].HostID == h.HostID {
			s.Hosts[i].Agent = ""
		}
	}
}

// recordShare copies a host plan's outcome and counts into its status.hosts entry.
func recordShare(h *fleetv1alpha1.HostPlanStatus, sh retirement.HostShare) {
	h.Outcome, h.CandidateFingerprint = sh.Outcome, sh.CandidateFingerprint
	h.CandidateCount, h.PreservedCount = int32(sh.CandidateCount), int32(sh.PreservedCount)
	h.RetiredCount = 0
	if sh.Apply != nil {
		h.RetiredCount = int32(sh.Apply.RetiredCount)
	}
}

func int32Counts(m map[string]int) map[string]int32 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int32, len(m))
	for k, v := range m {
		out[k] = int32(v)
	}
	return out
}

func intCounts(m map[string]int32) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = int(v)
	}
	return out
}

// equalStatus says whether two statuses are the same, so that nothing is written when
// nothing changed.
func equalStatus(a, b *fleetv1alpha1.RetirementPlanStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}
