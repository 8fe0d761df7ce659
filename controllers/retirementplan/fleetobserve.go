package retirementplan

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// observe reads, straight from the API server, what the next step of a fleet plan that
// has fanned out is decided on (nextFleetStatus): its host plans always; the rows of hosts
// whose agent was lost; its own pages while they are being recorded; the verdict on its
// approval when it is planned and not approved at its generation; the registry once every
// host plan has applied. It writes nothing.
func (r *FleetPlanReconciler) observe(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, ph fleetPhase) (fleetSeen, error) {
	seen := fleetSeen{now: r.Clock.Now()}
	children, err := r.hostPlans(ctx, plan, ph.label)
	if err != nil {
		return seen, err
	}
	var lost []string
	for _, h := range plan.Status.Hosts {
		c := children[h.HostID]
		sh := apiconv.HostShare(h, c)
		seen.shares = append(seen.shares, sh)
		hp := retirement.HostPages{HostID: h.HostID, AgentLost: h.Agent == ""}
		if c != nil {
			if cond := meta.FindStatusCondition(c.Status.Conditions, fleetv1alpha1.PagesReadyCondition); cond != nil {
				hp.State = cond.Reason
			}
			agentLost := meta.IsStatusConditionTrue(c.Status.Conditions, conditionHostAgentLost)
			hp.AgentLost = hp.AgentLost || agentLost
			if agentLost && !listedWithoutAgent(plan, h.HostID) {
				lost = append(lost, h.HostID)
			}
			if c.Status.Pages != nil {
				seen.hostPages.Candidates += c.Status.Pages.Candidates
				seen.hostPages.Preserved += c.Status.Pages.Preserved
			}
		}
		seen.pages = append(seen.pages, hp)
	}
	if seen.lost, err = r.lostRows(ctx, plan.Namespace, lost); err != nil {
		return seen, err
	}
	if ph.outcome == "" || ph.pagesPending {
		if seen.ownPages, err = r.ownPages(ctx, plan, ph.label); err != nil {
			return seen, err
		}
	}
	switch {
	case ph.outcome != retirement.OutcomePlanned || plan.Spec.Approval == nil:
	case !ph.approved:
		v, err := r.judge(ctx, plan.Namespace, plan.Spec.Approval, retirement.ApprovalFacts{PlanCreated: plan.CreationTimestamp.Time, Mismatch: ph.mismatch})
		if err != nil {
			return seen, err
		}
		seen.approval = &v
	default:
		// Once every host plan has applied, their reports make the fleet's, and the
		// registry after it is read.
		if rep, message, done := retirement.AggregateApply(seen.shares); done {
			seen.applied = &fleetApply{report: rep, message: message, post: r.snapshot(ctx, plan.Namespace)}
		}
	}
	return seen, nil
}

// lostRows counts, for each host whose agent was lost, its rows not retired.
func (r *FleetPlanReconciler) lostRows(ctx context.Context, namespace string, hosts []string) ([]fleetv1alpha1.HostRowCount, error) {
	if len(hosts) == 0 {
		return nil, nil
	}
	items, err := r.listRegistrations(ctx, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]fleetv1alpha1.HostRowCount, 0, len(hosts))
	for _, hostID := range hosts {
		n := 0
		for i := range items {
			if items[i].Spec.Process.HostID == hostID && items[i].Status.Phase != fleetv1alpha1.PhaseRetired {
				n++
			}
		}
		out = append(out, fleetv1alpha1.HostRowCount{HostID: hostID, RowCount: int32(n)})
	}
	return out, nil
}

// ownPages counts the fleet plan's own pages (the rows no host plan covers, written at
// fan-out, all Preserved): their metadata is enough.
func (r *FleetPlanReconciler) ownPages(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, label string) (int32, error) {
	own := &metav1.PartialObjectMetadataList{}
	own.SetGroupVersionKind(fleetv1alpha1.GroupVersion.WithKind("RetirementPlanPageList"))
	if err := r.APIReader.List(ctx, own, client.InNamespace(plan.Namespace), client.MatchingLabels{fleetv1alpha1.PlanLabel: label}); err != nil {
		return 0, fmt.Errorf("listing the fleet plan's own pages: %w", err)
	}
	var n int32
	for i := range own.Items {
		if metav1.IsControlledBy(&own.Items[i], plan) {
			n++
		}
	}
	return n, nil
}

// hostPlans lists a fleet plan's host plans straight from the API server, by host id.
// Only host plans the fleet plan controls count.
func (r *FleetPlanReconciler) hostPlans(ctx context.Context, parent *fleetv1alpha1.RetirementPlan, label string) (map[string]*fleetv1alpha1.RetirementPlan, error) {
	list := &fleetv1alpha1.RetirementPlanList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(parent.Namespace), client.MatchingLabels{fleetv1alpha1.FleetPlanLabel: label}); err != nil {
		return nil, fmt.Errorf("listing the host plans of %s: %w", parent.Name, err)
	}
	out := map[string]*fleetv1alpha1.RetirementPlan{}
	for i := range list.Items {
		c := &list.Items[i]
		if ref := metav1.GetControllerOf(c); ref != nil && ref.UID == parent.UID && c.Spec.HostID != "" {
			out[c.Spec.HostID] = c
		}
	}
	return out, nil
}

// listedWithoutAgent says whether the fleet plan lists hostID among its hosts without an
// agent.
func listedWithoutAgent(plan *fleetv1alpha1.RetirementPlan, hostID string) bool {
	for _, h := range plan.Status.HostsWithoutAgent {
		if h.HostID == hostID {
			return true
		}
	}
	return false
}
