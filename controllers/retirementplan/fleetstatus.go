package retirementplan

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// shareOf is one host's share of a fleet plan.
func shareOf(entry fleetv1alpha1.HostPlanStatus, child *fleetv1alpha1.RetirementPlan) retirement.HostShare {
	return apiconv.HostShare(entry, child)
}

// setFleetPlanStatus writes a fleet plan's aggregated dry run into status, the fields a
// single plan has, in the same shape (setPlanStatus). The registry fingerprint, the
// snapshot and the hosts stay as the fan-out recorded them.
func setFleetPlanStatus(plan *fleetv1alpha1.RetirementPlan, f retirement.FleetPlan, now time.Time) {
	s := &plan.Status
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
	s.PlannedAt = ptr.To(metav1.NewTime(now))
	s.ObservedGeneration = plan.Generation
	s.Message = f.Message
	conditions.SetReadiness(&s.Conditions, plan.Generation, conditions.Readiness{Ready: true, Reason: fleetv1alpha1.ReasonPlanned, Message: s.Message})
	if plan.Spec.Approval == nil {
		conditions.Set(&s.Conditions, plan.Generation, fleetv1alpha1.ApprovedCondition, false, fleetv1alpha1.ReasonAwaitingApproval, "spec.approval is not set")
	}
}

// markHostPlan records on a freshly planned host plan that it is approved through its
// fleet plan, never through its own spec.approval.
func markHostPlan(plan *fleetv1alpha1.RetirementPlan) {
	conditions.Set(&plan.Status.Conditions, plan.Generation, fleetv1alpha1.ApprovedCondition, false, fleetv1alpha1.ReasonAwaitingFleetApproval,
		"A host plan is approved through its fleet plan: approve the fleet plan")
}

// equalStatus says whether two statuses are the same, so that nothing is written when
// nothing changed.
func equalStatus(a, b *fleetv1alpha1.RetirementPlanStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}
