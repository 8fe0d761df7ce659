package retirementplan

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// approver is the subject admission saw set the approval: approvedBy with approvedGroups.
func approver(a *fleetv1alpha1.RetirementApproval) authz.Subject {
	return authz.Subject{User: a.ApprovedBy, Groups: a.ApprovedGroups}
}

// judgeApproval gathers what the approval verdict rests on and asks
// retirement.JudgeApproval. The reads stop at the first fact that already refuses. A
// host plan is judged on its fleet plan's approval (see effectiveApproval): the fleet
// plan matched it against its own status, so what is left is the guarding policy, as it
// stood when the fleet plan was created, and the approver.
func (r *Reconciler) judgeApproval(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (retirement.ApprovalVerdict, error) {
	a := plan.Spec.Approval
	facts := retirement.ApprovalFacts{PlanCreated: plan.CreationTimestamp.Time}
	if plan.Spec.HostID == "" {
		facts.Mismatch = approvalMismatch(plan)
	} else {
		var parent *fleetv1alpha1.RetirementPlan
		a, parent, facts.Mismatch = r.hostApproval(ctx, plan)
		if parent != nil {
			facts.PlanCreated = parent.CreationTimestamp.Time
		}
	}
	if facts.Mismatch != "" {
		return retirement.JudgeApproval(facts), nil
	}
	var err error
	if facts.Guard, err = r.Approvers.ApprovalGuard(ctx); err != nil {
		return retirement.ApprovalVerdict{}, err
	}
	if reason, _ := retirement.JudgeGuard(facts.Guard, facts.PlanCreated); reason != "" {
		return retirement.JudgeApproval(facts), nil
	}
	s := approver(a)
	if facts.Subject, err = r.Approvers.WorkerFacts(ctx, s, plan.Namespace); err != nil {
		return retirement.ApprovalVerdict{}, err
	}
	if facts.Authorized, facts.AuthorizerWhy, err = r.Approvers.CanApprove(ctx, s, plan.Namespace); err != nil {
		return retirement.ApprovalVerdict{}, err
	}
	return retirement.JudgeApproval(facts), nil
}

// stillApproved checks the approval again during apply; a read error counts as no.
func (r *Reconciler) stillApproved(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (bool, string) {
	v, err := r.judgeApproval(ctx, plan)
	switch {
	case err != nil:
		return false, err.Error()
	case !v.Approved:
		return false, v.Reason + ": " + v.Message
	}
	return true, ""
}

func (r *Reconciler) approverRecheck() retirement.Recheck {
	if r.ApproverRecheck == (retirement.Recheck{}) {
		return retirement.DefaultApproverRecheck
	}
	return r.ApproverRecheck
}

// nextApproverCheck counts one more ApproverNotAuthorized verdict for the plan and says
// when to look again.
func (r *Reconciler) nextApproverCheck(uid types.UID) time.Duration {
	b := r.ApproverBackoff
	if b == (retirement.Backoff{}) {
		b = retirement.DefaultApproverBackoff
	}
	n := 1
	if v, ok := r.refusals.Load(uid); ok {
		n = v.(int) + 1
	}
	r.refusals.Store(uid, n)
	return b.After(n)
}
