package retirementplan

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// fleetPhase is where a fleet plan stands, read from its status once per pass: every
// step of the pass (split, observe, nextFleetStatus) goes by the same reading.
type fleetPhase struct {
	// outcome is status.outcome: "" until planned.
	outcome string
	// pagesPending: planned, and its pages are still being written.
	pagesPending bool
	// approved: Approved is True at the plan's generation.
	approved bool
	// approvedReason is the Approved condition's reason ("" for none).
	approvedReason string
	// mismatch says how spec.approval differs from the plan in status ("" when it
	// repeats it exactly, or there is none).
	mismatch string
	// label is the plan's name as a label value: its host plans' FleetPlanLabel, its own
	// pages' PlanLabel.
	label string
}

// phaseOf reads a fleet plan's phase.
func phaseOf(plan *fleetv1alpha1.RetirementPlan) fleetPhase {
	ph := fleetPhase{outcome: plan.Status.Outcome, pagesPending: pagesPending(plan), approved: approvedNow(plan),
		approvedReason: approvedReason(plan), label: labelValue(plan.Name)}
	if plan.Spec.Approval != nil {
		ph.mismatch = approvalMismatch(plan)
	}
	return ph
}

// finished: applied, refused or failed, with its pages recorded; nothing is left to do.
func (ph fleetPhase) finished() bool {
	return ph.outcome != "" && ph.outcome != retirement.OutcomePlanned && !ph.pagesPending
}

// pagesPending says whether plan is planned and its pages are still to be written.
func pagesPending(plan *fleetv1alpha1.RetirementPlan) bool {
	c := meta.FindStatusCondition(plan.Status.Conditions, fleetv1alpha1.PagesReadyCondition)
	return c != nil && c.Reason == fleetv1alpha1.ReasonWritingPages
}

// approvedNow says whether the plan's Approved condition is True for its current
// generation: the one test of "this plan is approved" (a fleet plan's verdict, a host
// plan's record of its fleet plan's, and the condition an apply's intent requires).
// Approved is judged once per generation; the apply re-checks the approver as it goes.
func approvedNow(plan *fleetv1alpha1.RetirementPlan) bool {
	c := meta.FindStatusCondition(plan.Status.Conditions, fleetv1alpha1.ApprovedCondition)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == plan.Generation
}

// approvedReason is the reason of the plan's Approved condition ("" when it has none).
func approvedReason(plan *fleetv1alpha1.RetirementPlan) string {
	if c := meta.FindStatusCondition(plan.Status.Conditions, fleetv1alpha1.ApprovedCondition); c != nil {
		return c.Reason
	}
	return ""
}

// approvalMismatch explains how spec.approval differs from the plan in status ("" when it
// repeats it exactly).
func approvalMismatch(plan *fleetv1alpha1.RetirementPlan) string {
	s := plan.Status
	return retirement.ApprovalMismatch(apiconv.Approval(plan.Spec.Approval), s.RegistryFingerprint, s.CandidateFingerprint, s.CandidateWorkerIdentities)
}

// applyInProgress says whether a plan records an apply that has not written its report.
func applyInProgress(plan *fleetv1alpha1.RetirementPlan) bool {
	p := plan.Status.ApplyProgress
	return p != nil && p.State != retirement.ApplyFinished
}

// hostPhase is where a host plan stands, read at the start of each stage of its step:
// the stage's later checks go by the same reading.
type hostPhase struct {
	// unplanned: no dry run is recorded yet.
	unplanned bool
	// pagesPending: planned, and its pages are still being written.
	pagesPending bool
	// awaitingApply: planned, and no apply has started.
	awaitingApply bool
	// applying: an apply recorded its intent and has not written its report.
	applying bool
	// approved: Approved is True at the plan's generation (the fleet plan's approval is
	// recorded on it).
	approved bool
}

// hostPhaseOf reads a host plan's phase.
func hostPhaseOf(plan *fleetv1alpha1.RetirementPlan) hostPhase {
	applying := applyInProgress(plan)
	return hostPhase{unplanned: plan.Status.Outcome == "", pagesPending: pagesPending(plan),
		awaitingApply: plan.Status.Outcome == retirement.OutcomePlanned && !applying, applying: applying, approved: approvedNow(plan)}
}
