package retirementplan

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// approver is the subject admission saw set the approval: approvedBy with approvedGroups.
func approver(a *fleetv1alpha1.RetirementApproval) authz.Subject {
	return authz.Subject{User: a.ApprovedBy, Groups: a.ApprovedGroups}
}

// judgeApproval judges a host plan's recorded approval (status.hostApproval) again, as
// the apply does before its first write and then periodically: the fleet plan must still
// be Approved at its current generation with an approval that narrows to the recorded one
// (it matched it against its own status when it judged it), and what is left is the
// guarding policy, as it stood when the fleet plan was created, and the approver.
func (r *HostPlanReconciler) judgeApproval(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (retirement.ApprovalVerdict, error) {
	facts := retirement.ApprovalFacts{PlanCreated: plan.CreationTimestamp.Time}
	a, parent, mismatch := r.hostApproval(ctx, plan)
	recorded := plan.Status.HostApproval
	switch {
	case mismatch != "":
	case recorded == nil:
		mismatch = "the host plan recorded no approval"
	case !equality.Semantic.DeepEqual(a, recorded):
		mismatch = fmt.Sprintf("the fleet plan %s's approval changed after this host plan recorded it", parent.Name)
	}
	facts.Mismatch = mismatch
	if parent != nil {
		facts.PlanCreated = parent.CreationTimestamp.Time
	}
	return r.judge(ctx, plan.Namespace, recorded, facts)
}

// judge completes facts (unless they already refuse) with the guarding policy and the
// approver of a, and asks retirement.JudgeApproval. The reads stop at the first fact
// that already refuses.
func (d *Deps) judge(ctx context.Context, namespace string, a *fleetv1alpha1.RetirementApproval, facts retirement.ApprovalFacts) (retirement.ApprovalVerdict, error) {
	if facts.Mismatch != "" {
		return retirement.JudgeApproval(facts), nil
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

// stillApproved checks the approval again during apply; a read error counts as no.
func (r *HostPlanReconciler) stillApproved(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (bool, string) {
	v, err := r.judgeApproval(ctx, plan)
	switch {
	case err != nil:
		return false, err.Error()
	case !v.Approved:
		return false, v.Reason + ": " + v.Message
	}
	return true, ""
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
