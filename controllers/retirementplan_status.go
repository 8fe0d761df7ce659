package controllers

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/fleet"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

const (
	// maxListedAssessments bounds the candidates and preserved entries kept in status.
	maxListedAssessments = 500
	// maxApprovableCandidates is the most identities spec.approval can carry.
	maxApprovableCandidates = 2000
)

// setPlanStatus writes a dry-run plan into status.
func setPlanStatus(plan *fleetv1alpha1.RetirementPlan, p retirement.Plan, now time.Time) {
	s := &plan.Status
	s.Outcome = p.Outcome
	s.CanonicalRepository = p.CanonicalRepository
	s.RegistryFingerprint = p.RegistryFingerprint
	s.CandidateFingerprint = p.CandidateFingerprint
	s.CandidateWorkerIdentities = p.CandidateWorkerIdentities
	// An object must stay well under etcd's size limit: at most maxListedAssessments
	// entries of each list carry their evidence in status; counts are always complete.
	s.Candidates = assessmentsOf(p.Candidates[:min(len(p.Candidates), maxListedAssessments)])
	s.Preserved = assessmentsOf(p.Preserved[:min(len(p.Preserved), maxListedAssessments)])
	s.PreservedReasonCounts = nil
	if len(p.PreservedReasonCounts) > 0 {
		s.PreservedReasonCounts = make(map[string]int32, len(p.PreservedReasonCounts))
		for k, v := range p.PreservedReasonCounts {
			s.PreservedReasonCounts[k] = int32(v)
		}
	}
	s.AssessedCount = int32(p.AssessedCount)
	s.CandidateCount = int32(p.CandidateCount)
	s.PreservedCount = int32(p.PreservedCount)
	s.ProtectedActiveWorkflowOwners = p.ProtectedActiveWorkflowOwners
	s.MutationPerformed = false
	s.ReadOnly = true
	s.Success = ptr.To(true)
	s.PlannedAt = ptr.To(metav1.NewTime(now))
	s.ObservedGeneration = plan.Generation
	s.Message = fmt.Sprintf("Dry run: %d of %d registrations are eligible; approve by copying the tokens and identities into spec.approval", p.CandidateCount, p.AssessedCount)
	if len(p.Candidates) > maxListedAssessments || len(p.Preserved) > maxListedAssessments {
		s.Message += fmt.Sprintf(" (evidence listed for the first %d candidates and preserved rows; counts are complete)", maxListedAssessments)
	}
	if p.CandidateCount > maxApprovableCandidates {
		s.CandidateWorkerIdentities = p.CandidateWorkerIdentities[:maxApprovableCandidates]
		s.Message = fmt.Sprintf("Dry run: %d registrations are eligible, more than the %d one approval can name; candidateWorkerIdentities lists the first %d, which is what an approval of this plan retires", p.CandidateCount, maxApprovableCandidates, maxApprovableCandidates)
	}
	setCondition(plan, fleetv1alpha1.ReadyCondition, true, fleetv1alpha1.ReasonPlanned, s.Message)
	if plan.Spec.Approval == nil {
		setCondition(plan, fleetv1alpha1.ApprovedCondition, false, fleetv1alpha1.ReasonAwaitingApproval, "spec.approval is not set")
	}
}

// approvalMismatch explains how spec.approval differs from the plan in status ("" when it
// repeats it exactly).
func approvalMismatch(plan *fleetv1alpha1.RetirementPlan) string {
	a, s := plan.Spec.Approval, plan.Status
	return retirement.ApprovalMismatch(
		retirement.Approval{RegistryFingerprint: a.RegistryFingerprint, CandidateFingerprint: a.CandidateFingerprint, WorkerIdentities: a.WorkerIdentities},
		s.RegistryFingerprint, s.CandidateFingerprint, s.CandidateWorkerIdentities)
}

func setApprovedCondition(plan *fleetv1alpha1.RetirementPlan, approved bool, reason, msg string) {
	setCondition(plan, fleetv1alpha1.ApprovedCondition, approved, reason, msg)
	plan.Status.ObservedGeneration = plan.Generation
	if !approved {
		setCondition(plan, fleetv1alpha1.ReadyCondition, false, reason, msg)
	}
}

// setApplyStatus records an apply report. A partial apply is never a clean one: Ready and
// Applied say so, applyComplete is false, and applyPreserved names every row not retired.
func setApplyStatus(plan *fleetv1alpha1.RetirementPlan, rep retirement.ApplyReport, post *fleetv1alpha1.PostApply, now metav1.Time) {
	s := &plan.Status
	s.Outcome = rep.Outcome
	s.Success = ptr.To(rep.Outcome != retirement.OutcomeTransactionFailed)
	s.MutationPerformed = rep.MutationPerformed
	s.ReadOnly = false
	s.RetiredCount = int32(rep.RetiredCount)
	s.Retired = rep.Retired
	s.ApplyPreserved = assessmentsOf(rep.Preserved)
	s.AppliedAt = &now
	s.PostApply = post
	s.ObservedGeneration = plan.Generation
	s.ApplyComplete = nil

	reason, ok := fleetv1alpha1.ReasonApplyRefused, false
	switch {
	case rep.Outcome == retirement.OutcomeTransactionFailed:
		reason = fleetv1alpha1.ReasonApplyFailed
		s.Message = "Nothing was retired: " + rep.Detail
	case rep.Outcome == retirement.OutcomeApplied && rep.Interrupted:
		reason = fleetv1alpha1.ReasonApplyPartial
		s.ApplyComplete = ptr.To(false)
		s.Message = fmt.Sprintf("Partial apply: %d row(s) retired before the apply stopped (%s); see applyPreserved for the rest", rep.RetiredCount, rep.Detail)
	case rep.Outcome == retirement.OutcomeApplied:
		reason, ok = fleetv1alpha1.ReasonApplySucceeded, true
		s.ApplyComplete = ptr.To(true)
		s.Message = fmt.Sprintf("Applied: %d row(s) retired, %d requested row(s) preserved", rep.RetiredCount, len(rep.Preserved))
	default:
		s.Message = fmt.Sprintf("Nothing was written (%s): %s", rep.Outcome, rep.Detail)
	}
	setCondition(plan, fleetv1alpha1.AppliedCondition, ok, reason, s.Message)
	setCondition(plan, fleetv1alpha1.ReadyCondition, true, reason, s.Message)
}

func postApplyOf(members []fleet.Member, now time.Time) *fleetv1alpha1.PostApply {
	sum := fleet.Snapshot(members, now)
	out := &fleetv1alpha1.PostApply{
		StaleWorkerCount:      int32(sum.StaleCount),
		LiveWorkerCount:       int32(sum.LiveCount),
		HistoricalWorkerCount: int32(sum.HistoricalCount),
		LiveFleetSafe:         sum.LiveFleetSafe,
	}
	for _, b := range sum.Blockers {
		out.Blockers = append(out.Blockers, fleetv1alpha1.FleetBlocker{Code: b.Code, WorkerIdentity: b.Worker, Detail: b.Detail})
	}
	return out
}

type conditioned interface {
	GetGeneration() int64
}

func setCondition(plan *fleetv1alpha1.RetirementPlan, typ string, status bool, reason, msg string) {
	setConditionOn(&plan.Status.Conditions, plan, typ, status, reason, msg)
}

func setConditionOn(conds *[]metav1.Condition, obj conditioned, typ string, status bool, reason, msg string) {
	st := metav1.ConditionFalse
	if status {
		st = metav1.ConditionTrue
	}
	if len(msg) > 32000 {
		msg = msg[:32000]
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: obj.GetGeneration()})
}
