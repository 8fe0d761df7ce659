package retirementplan

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// nextHostStatus writes into a host plan's status what one stage decided (record,
// record.go): a dry run, the approval's record, or an apply's report. The conditions the
// stage sets are recorded by one call, at the end.
func nextHostStatus(plan *fleetv1alpha1.RetirementPlan, st hostResult, now time.Time) {
	var ready *conditions.Readiness
	var conds []conditions.Cond
	switch {
	case st.planned != nil:
		w := st.planned
		ready, conds = planStatus(plan, w.plan, w.plannedAt)
		// Its pages follow this write (writePending): it is planned, and can be
		// approved, before every row is paged.
		conds = append(conds, conditions.Cond{Type: fleetv1alpha1.PagesReadyCondition, Reason: fleetv1alpha1.ReasonWritingPages,
			Message: fmt.Sprintf("Writing the pages of %d candidate(s) and %d preserved row(s)", w.plan.CandidateCount, w.plan.PreservedCount)})
		plan.Status.Pages = nil
		plan.Status.RegistryResourceVersion = w.resourceVersion
		plan.Status.Snapshot = w.snapshot
	case st.approval != nil:
		plan.Status.HostApproval = st.approval
		ready = ptr.To(applyingReadiness("The fleet plan's approval covers this host plan; applying it"))
		conds = []conditions.Cond{{Type: fleetv1alpha1.ApprovedCondition, True: true, Reason: fleetv1alpha1.ReasonApprovedThroughFleetPlan,
			Message: "The fleet plan is Approved and covers this host plan's candidates"}}
	default:
		rep := *st.report
		ready, conds = recordApply(plan, rep, retirement.JudgeApply(rep), nil, metav1.NewTime(now))
		if st.lost != "" {
			conds = append(conds, lostCondition(st.lost))
		}
		if st.hold != nil {
			p := plan.Status.ApplyProgress
			p.State, p.RenewedAt = retirement.ApplyFinished, metav1.NewMicroTime(now)
			p.RetiredSoFar, p.IntendedRows = int32(rep.RetiredCount), nil
			switch {
			case rep.Resumed:
				p.Takeover = retirement.TakeoverResumed
			case rep.Recovered:
				p.Takeover = retirement.TakeoverCompleted
			}
		}
	}
	conditions.Record(&plan.Status.Conditions, plan.Generation, ready, conds...)
}

// planStatus writes a host plan's dry run into status and returns its readiness and the
// conditions it sets: not approved yet, until its fleet plan is.
func planStatus(plan *fleetv1alpha1.RetirementPlan, p retirement.Plan, now time.Time) (*conditions.Readiness, []conditions.Cond) {
	listing := retirement.ListPlan(p)
	s := &plan.Status
	s.Outcome = p.Outcome
	s.CanonicalRepository = p.CanonicalRepository
	s.RegistryFingerprint = p.RegistryFingerprint
	s.CandidateFingerprint = p.CandidateFingerprint
	s.CandidateWorkerIdentities = listing.ApprovableIdentities
	s.Candidates = apiconv.Assessments(listing.Candidates)
	s.Preserved = apiconv.Assessments(listing.Preserved)
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
	s.Message = listing.Message
	// A host plan is approved through its fleet plan, never through its own spec.approval.
	approval := []conditions.Cond{{Type: fleetv1alpha1.ApprovedCondition, Reason: fleetv1alpha1.ReasonAwaitingFleetApproval,
		Message: "A host plan is approved through its fleet plan: approve the fleet plan"}}
	return &conditions.Readiness{Ready: true, Reason: fleetv1alpha1.ReasonPlanned, Message: s.Message}, approval
}

// approvalReadiness is a plan's readiness after the verdict on its approval. An approved
// plan is applying until its report is written: not Ready, Reconciling. One that is not
// approved is not Ready, and stalled when the approval can never match, or Reconciling
// while it is looked at again.
func approvalReadiness(v retirement.ApprovalVerdict) conditions.Readiness {
	if v.Approved {
		return applyingReadiness("The approval matches the plan; applying it")
	}
	return conditions.Readiness{Stalled: v.Final, Reconciling: !v.Final, Reason: v.Reason, Message: v.Message}
}

// applyingReadiness is an approved plan's readiness until its report is written.
func applyingReadiness(message string) conditions.Readiness {
	return conditions.Readiness{Reconciling: true, Reason: fleetv1alpha1.ReasonApplying, Message: message}
}

// recordApply writes an apply report's fields into status and returns the conditions it
// sets. A partial apply is never a clean one: Ready and Applied say so, applyComplete is
// false, and applyPreserved names every row not retired.
func recordApply(plan *fleetv1alpha1.RetirementPlan, rep retirement.ApplyReport, v retirement.ApplyVerdict, post *fleetv1alpha1.PostApply, now metav1.Time) (*conditions.Readiness, []conditions.Cond) {
	s := &plan.Status
	s.Outcome = rep.Outcome
	s.Success = ptr.To(v.Success)
	s.MutationPerformed = rep.MutationPerformed
	s.ReadOnly = false
	s.RetiredCount = int32(rep.RetiredCount)
	s.Retired = rep.Retired
	s.ApplyPreserved = apiconv.Assessments(rep.Preserved)
	s.AppliedAt = &now
	s.PostApply = post
	s.ObservedGeneration = plan.Generation
	s.ApplyComplete = v.Complete
	s.Message = v.Message
	conds := []conditions.Cond{{Type: fleetv1alpha1.AppliedCondition, True: v.Applied, Reason: v.Reason, Message: v.Message}}
	if v.ApprovalOutdated {
		// The approval named a registry or candidate set that is gone: it approves nothing now.
		conds = append(conds, conditions.Cond{Type: fleetv1alpha1.ApprovedCondition, Reason: v.Reason, Message: "The approval no longer matches: " + v.Message})
	}
	// An apply runs once: whatever did not succeed is final.
	return &conditions.Readiness{Ready: v.Succeeded, Stalled: !v.Succeeded, Reason: v.Reason, Message: v.Message}, conds
}
