package retirementplan

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/fleet"
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
// the plan from them.
func (r *Reconciler) assess(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (world, error) {
	regs := &fleetv1alpha1.WorkerRegistrationList{}
	if err := r.APIReader.List(ctx, regs, client.InNamespace(plan.Namespace)); err != nil {
		return world{}, fmt.Errorf("listing worker registrations: %w", err)
	}
	claims := &fleetv1alpha1.TaskClaimList{}
	if err := r.APIReader.List(ctx, claims, client.InNamespace(plan.Namespace)); err != nil {
		return world{}, fmt.Errorf("listing task claims (the workflow owners): %w", err)
	}
	p := retirement.BuildPlan(retirement.Input{
		Rows:                 apiconv.Rows(regs.Items),
		CanonicalRepository:  retirement.CanonicalRepository(plan.Status.CanonicalRepository, plan.Spec.CanonicalRepository, r.Repository),
		Now:                  r.Clock.Now(),
		Host:                 r.Host,
		Probes:               r.probeAll(ctx, regs.Items),
		ActiveWorkflowOwners: claim.WorkflowOwners(apiconv.Holdings(claims.Items)),
	})
	return world{plan: p, items: regs.Items}, nil
}

// probeAll probes every Active row; without a prober every row stays unknown.
func (r *Reconciler) probeAll(ctx context.Context, items []fleetv1alpha1.WorkerRegistration) map[string]retirement.Probe {
	out := make(map[string]retirement.Probe, len(items))
	if r.Prober == nil {
		return out
	}
	for i := range items {
		wr := &items[i]
		if wr.Status.Phase == fleetv1alpha1.PhaseRetired {
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
