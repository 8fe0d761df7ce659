package retirementplan

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/fleet"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// world is what one plan or apply reads: the registrations, straight from the API server,
// and the plan computed from them.
type world struct {
	plan  retirement.Plan
	items []fleetv1alpha1.WorkerRegistration
}

// assess reads the registrations and task claims straight from the API server and builds
// the plan from them. A host plan (spec.hostID) is built over every row of the namespace,
// so conflicts across hosts still count and the registry fingerprint stays the
// namespace's, and then narrowed to the rows of its host (retirement.ForHost).
func (r *Reconciler) assess(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (world, error) {
	regs := &fleetv1alpha1.WorkerRegistrationList{}
	if err := r.APIReader.List(ctx, regs, client.InNamespace(plan.Namespace)); err != nil {
		return world{}, fmt.Errorf("listing worker registrations: %w", err)
	}
	claims := &fleetv1alpha1.TaskClaimList{}
	if err := r.APIReader.List(ctx, claims, client.InNamespace(plan.Namespace)); err != nil {
		return world{}, fmt.Errorf("listing task claims (the workflow owners): %w", err)
	}
	rows := apiconv.Rows(regs.Items)
	p := retirement.BuildPlan(retirement.Input{
		Rows:                 rows,
		CanonicalRepository:  retirement.CanonicalRepository(plan.Status.CanonicalRepository, plan.Spec.CanonicalRepository, r.Repository),
		Now:                  r.Clock.Now(),
		Host:                 r.Host,
		Probes:               r.probeAll(ctx, regs.Items, plan.Spec.HostID),
		ActiveWorkflowOwners: claim.WorkflowOwners(apiconv.Holdings(claims.Items)),
	})
	if plan.Spec.HostID != "" {
		p = retirement.ForHost(p, rows, plan.Spec.HostID)
	}
	return world{plan: p, items: regs.Items}, nil
}

// probeAll probes every Active row (of hostID only, when set); without a prober every
// row stays unknown.
func (r *Reconciler) probeAll(ctx context.Context, items []fleetv1alpha1.WorkerRegistration, hostID string) map[string]retirement.Probe {
	out := make(map[string]retirement.Probe, len(items))
	if r.Prober == nil {
		return out
	}
	for i := range items {
		wr := &items[i]
		if wr.Status.Phase == fleetv1alpha1.PhaseRetired || (hostID != "" && wr.Spec.Process.HostID != hostID) {
			continue
		}
		out[wr.Name] = probe(ctx, r.Prober, wr)
	}
	return out
}

func probe(ctx context.Context, p liveness.Prober, wr *fleetv1alpha1.WorkerRegistration) retirement.Probe {
	return apiconv.Probe(p.Probe(ctx, apiconv.ProbeTarget(wr)))
}

// snapshot reports the fleet as it is now (nil when the registrations cannot be read).
func (r *Reconciler) snapshot(ctx context.Context, namespace string) *fleetv1alpha1.PostApply {
	regs := &fleetv1alpha1.WorkerRegistrationList{}
	if err := r.APIReader.List(ctx, regs, client.InNamespace(namespace)); err != nil {
		return nil
	}
	return r.snapshotOf(namespace, regs.Items)
}

// snapshotOf summarises registrations already read, and publishes the figures as the
// namespace's gauges.
func (r *Reconciler) snapshotOf(namespace string, items []fleetv1alpha1.WorkerRegistration) *fleetv1alpha1.PostApply {
	sum := fleet.Snapshot(apiconv.Members(items), r.Clock.Now())
	recordSnapshot(namespace, sum)
	return apiconv.Snapshot(sum)
}

// fanoutReads is what a fleet plan reads when it splits the namespace by host: every
// registration, straight from the API server, and which hosts have an agent now.
type fanoutReads struct {
	items []fleetv1alpha1.WorkerRegistration
	hosts hostagent.Hosts
}

func (r *Reconciler) readFanout(ctx context.Context, namespace string) (fanoutReads, error) {
	regs := &fleetv1alpha1.WorkerRegistrationList{}
	if err := r.APIReader.List(ctx, regs, client.InNamespace(namespace)); err != nil {
		return fanoutReads{}, fmt.Errorf("listing worker registrations: %w", err)
	}
	hosts, err := hostagent.ListHosts(ctx, r.APIReader, r.AgentNamespace, r.Clock.Now())
	if err != nil {
		return fanoutReads{}, err
	}
	return fanoutReads{items: regs.Items, hosts: hosts}, nil
}

// hostPlans lists a fleet plan's host plans straight from the API server, by host id.
// Only host plans the fleet plan controls count.
func (r *Reconciler) hostPlans(ctx context.Context, parent *fleetv1alpha1.RetirementPlan) (map[string]*fleetv1alpha1.RetirementPlan, error) {
	list := &fleetv1alpha1.RetirementPlanList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(parent.Namespace), client.MatchingLabels{LabelFleetPlan: fleetPlanLabelValue(parent.Name)}); err != nil {
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
