package retirementplan

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// A host plan's approval: its fleet plan's, narrowed to this host and recorded once in
// status.hostApproval, and judged again as the apply goes.

// stillApproved reads the fleet plan and judges the approval recorded on the host plan
// again (judgeApproval), as the apply does before its first write and then periodically;
// a read error counts as no. It also returns the fleet plan's approval narrowed to this
// host as it reads now (nil when there is none for this host plan), which a host plan
// that has not recorded one yet records.
func (r *HostPlanReconciler) stillApproved(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (*fleetv1alpha1.RetirementApproval, bool, string) {
	v, a, err := r.judgeApproval(ctx, plan)
	switch {
	case err != nil:
		return a, false, err.Error()
	case !v.Approved:
		return a, false, v.Reason + ": " + v.Message
	}
	return a, true, ""
}

// judgeApproval judges a host plan's recorded approval (status.hostApproval) again: the
// fleet plan must still be Approved at its current generation with an approval that
// narrows to the recorded one (it matched it against its own status when it judged it),
// and what is left is the guarding policy, as it stood when the fleet plan was created,
// and the approver. It returns the narrowed approval it compared.
func (r *HostPlanReconciler) judgeApproval(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (retirement.ApprovalVerdict, *fleetv1alpha1.RetirementApproval, error) {
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
	v, err := r.judge(ctx, plan.Namespace, recorded, facts)
	return v, a, err
}

// hostApproval is the approval a host plan applies with: its fleet plan's, narrowed to
// this host: the same binding, approver and registry fingerprint (the whole namespace's),
// the host plan's own candidate fingerprint, and the approved identities that are this
// host plan's candidates. It is nil (nothing may be applied) unless the fleet plan is
// Approved at its current generation and its hosts entry still carries this host plan's
// candidate fingerprint; then the reason says why. The fleet plan is returned when it
// could be read.
func (r *HostPlanReconciler) hostApproval(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (*fleetv1alpha1.RetirementApproval, *fleetv1alpha1.RetirementPlan, string) {
	ref := metav1.GetControllerOf(plan)
	if ref == nil || ref.Kind != kindRetirementPlan {
		return nil, nil, "the host plan belongs to no fleet plan"
	}
	parent := &fleetv1alpha1.RetirementPlan{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: plan.Namespace, Name: ref.Name}, parent); err != nil {
		return nil, nil, fmt.Sprintf("the fleet plan %s cannot be read: %v", ref.Name, err)
	}
	if parent.UID != ref.UID || parent.Spec.HostID != "" {
		return nil, nil, fmt.Sprintf("%s is not the fleet plan this host plan was made for", ref.Name)
	}
	a := parent.Spec.Approval
	if a == nil || !approvedNow(parent) {
		return nil, parent, fmt.Sprintf("the fleet plan %s is not Approved at its current generation", parent.Name)
	}
	var entry *fleetv1alpha1.HostPlanStatus
	for i := range parent.Status.Hosts {
		if parent.Status.Hosts[i].HostID == plan.Spec.HostID {
			entry = &parent.Status.Hosts[i]
		}
	}
	if entry == nil || entry.Plan != plan.Name || entry.CandidateFingerprint == "" || entry.CandidateFingerprint != plan.Status.CandidateFingerprint {
		return nil, parent, fmt.Sprintf("the fleet plan %s does not carry this host plan's candidate fingerprint for host %q", parent.Name, plan.Spec.HostID)
	}
	return &fleetv1alpha1.RetirementApproval{
		Binding:              a.Binding,
		RegistryFingerprint:  a.RegistryFingerprint,
		CandidateFingerprint: plan.Status.CandidateFingerprint,
		WorkerIdentities:     retirement.HostIdentities(a.WorkerIdentities, plan.Status.CandidateWorkerIdentities),
		ApprovedBy:           a.ApprovedBy,
		ApprovedGroups:       a.ApprovedGroups,
	}, parent, ""
}
