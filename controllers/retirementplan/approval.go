package retirementplan

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// approver is the subject admission saw set the approval: approvedBy with approvedGroups.
func approver(a *fleetv1alpha1.RetirementApproval) authz.Subject {
	return authz.Subject{User: a.ApprovedBy, Groups: a.ApprovedGroups}
}

// judge completes facts (unless they already refuse) with the guarding policy and the
// approver of a, and asks retirement.JudgeApproval. The reads stop at the first fact
// that already refuses.
func (d *Deps) judge(ctx context.Context, namespace string, a *fleetv1alpha1.RetirementApproval, facts retirement.ApprovalFacts) (retirement.ApprovalVerdict, error) {
	if facts.Mismatch != "" {
		return retirement.JudgeApproval(facts), nil
	}
	if a != nil {
		facts.Binding = apiconv.Approval(a).EffectiveBinding()
	}
	var err error
	if facts.Guard, err = d.Approvers.ApprovalGuard(ctx); err != nil {
		return retirement.ApprovalVerdict{}, err
	}
	if reason, _ := retirement.JudgeGuard(facts.Guard, facts.PlanCreated); reason != "" {
		return retirement.JudgeApproval(facts), nil
	}
	s := approver(a)
	if facts.Subject, err = d.Approvers.WorkerFacts(ctx, s, namespace); err != nil {
		return retirement.ApprovalVerdict{}, err
	}
	if facts.Authorized, facts.AuthorizerWhy, err = d.Approvers.CanApprove(ctx, s, namespace); err != nil {
		return retirement.ApprovalVerdict{}, err
	}
	return retirement.JudgeApproval(facts), nil
}

func (r *HostPlanReconciler) approverRecheck() retirement.Recheck {
	if r.ApproverRecheck == (retirement.Recheck{}) {
		return retirement.DefaultApproverRecheck
	}
	return r.ApproverRecheck
}

// nextApproverCheck counts one more ApproverNotAuthorized verdict for the plan and says
// when to look again.
func (r *FleetPlanReconciler) nextApproverCheck(uid types.UID) time.Duration {
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
