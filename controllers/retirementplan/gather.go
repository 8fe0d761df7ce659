package retirementplan

import (
	"context"
	"fmt"
	"sync"

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
//
// A dry run made in the reconcile that just fanned its fleet plan out (runLocalHostPlans)
// plans from the registrations the fan-out read from the API server moments before,
// instead of listing them again: one authoritative read serves both, so the fleet plan's
// registry fingerprint and its host plans' verdicts rest on the same snapshot. An apply
// always reads afresh.
func (r *HostPlanReconciler) assess(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (world, error) {
	var err error
	regs := &fleetv1alpha1.WorkerRegistrationList{}
	if items, ok := takeFanoutRead(ctx, plan); ok {
		regs.Items = items
	} else if regs.Items, err = r.listRegistrations(ctx, plan.Namespace); err != nil {
		return world{}, err
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
// row stays unknown. A prober that probes in batches (liveness.BatchProber) checks the
// host's boot and process visibility once for all the rows instead of once per row.
func (r *HostPlanReconciler) probeAll(ctx context.Context, items []fleetv1alpha1.WorkerRegistration, hostID string) map[string]retirement.Probe {
	out := make(map[string]retirement.Probe, len(items))
	if r.Prober == nil {
		return out
	}
	var names []string
	var targets []liveness.Target
	for i := range items {
		wr := &items[i]
		if wr.Status.Phase == fleetv1alpha1.PhaseRetired || (hostID != "" && wr.Spec.Process.HostID != hostID) {
			continue
		}
		names = append(names, wr.Name)
		targets = append(targets, apiconv.ProbeTarget(wr))
	}
	batch, ok := r.Prober.(liveness.BatchProber)
	if !ok {
		for i, t := range targets {
			out[names[i]] = apiconv.Probe(r.Prober.Probe(ctx, t))
		}
		return out
	}
	for i, res := range batch.ProbeAll(ctx, targets) {
		out[names[i]] = apiconv.Probe(res)
	}
	return out
}

func probe(ctx context.Context, p liveness.Prober, wr *fleetv1alpha1.WorkerRegistration) retirement.Probe {
	return apiconv.Probe(p.Probe(ctx, apiconv.ProbeTarget(wr)))
}

// snapshot reports the fleet as it is now (nil when the registrations cannot be read).
func (r *Deps) snapshot(ctx context.Context, namespace string) *fleetv1alpha1.PostApply {
	items, err := r.listRegistrations(ctx, namespace)
	if err != nil {
		return nil
	}
	return r.snapshotOf(namespace, items)
}

// listChunk is how many registrations one List request of listRegistrations asks for.
const listChunk = 2000

// listRegistrations reads every registration of namespace straight from the API server,
// in chunks of listChunk: the continue token keeps every chunk on the resourceVersion of
// the first, so the result is the same consistent snapshot one List would give, without
// the manager ever holding the whole namespace's response body at once. The rows'
// managedFields are dropped as they arrive, as the manager's cache drops them.
func (r *Deps) listRegistrations(ctx context.Context, namespace string) ([]fleetv1alpha1.WorkerRegistration, error) {
	if r.Registrations != nil {
		return r.Registrations.List(ctx, namespace)
	}
	var items []fleetv1alpha1.WorkerRegistration
	chunk := &fleetv1alpha1.WorkerRegistrationList{}
	for {
		if err := r.APIReader.List(ctx, chunk, client.InNamespace(namespace), client.Limit(listChunk), client.Continue(chunk.Continue)); err != nil {
			return nil, fmt.Errorf("listing worker registrations: %w", err)
		}
		for i := range chunk.Items {
			chunk.Items[i].ManagedFields = nil // read by nothing here, and a large part of each row
		}
		if items == nil && chunk.Continue == "" {
			return chunk.Items, nil // one chunk held them all
		}
		items = append(items, chunk.Items...)
		if chunk.Continue == "" {
			return items, nil
		}
		chunk.Items = nil
	}
}

// snapshotOf summarises registrations already read, and publishes the figures as the
// namespace's gauges.
func (r *Deps) snapshotOf(namespace string, items []fleetv1alpha1.WorkerRegistration) *fleetv1alpha1.PostApply {
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

func (r *FleetPlanReconciler) readFanout(ctx context.Context, namespace string) (fanoutReads, error) {
	items, err := r.listRegistrations(ctx, namespace)
	if err != nil {
		return fanoutReads{}, err
	}
	hosts, err := hostagent.ListHosts(ctx, r.APIReader, r.AgentNamespace, r.Clock.Now())
	if err != nil {
		return fanoutReads{}, err
	}
	shareFanoutRead(ctx, namespace, items)
	return fanoutReads{items: items, hosts: hosts}, nil
}

// fanoutReadKey keys, in a reconcile's context, the registrations its fan-out read.
type fanoutReadKey struct{}

// fanoutRead holds them until the first dry run of a host plan of that namespace in the
// same reconcile takes them.
type fanoutRead struct {
	mu        sync.Mutex
	namespace string
	items     []fleetv1alpha1.WorkerRegistration
	ok        bool
}

// withFanoutRead gives a reconcile a place for its fan-out's read.
func withFanoutRead(ctx context.Context) context.Context {
	return context.WithValue(ctx, fanoutReadKey{}, &fanoutRead{})
}

func shareFanoutRead(ctx context.Context, namespace string, items []fleetv1alpha1.WorkerRegistration) {
	if h, ok := ctx.Value(fanoutReadKey{}).(*fanoutRead); ok {
		h.mu.Lock()
		h.namespace, h.items, h.ok = namespace, items, true
		h.mu.Unlock()
	}
}

// takeFanoutRead hands the fan-out's read to the dry run of a host plan not planned yet,
// once; an apply, or any later read, lists afresh.
func takeFanoutRead(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) ([]fleetv1alpha1.WorkerRegistration, bool) {
	h, ok := ctx.Value(fanoutReadKey{}).(*fanoutRead)
	if !ok || plan.Spec.HostID == "" || plan.Status.Outcome != "" {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ok || h.namespace != plan.Namespace {
		return nil, false
	}
	items := h.items
	h.items, h.ok = nil, false
	return items, true
}

// hostPlans lists a fleet plan's host plans straight from the API server, by host id.
// Only host plans the fleet plan controls count.
func (r *Deps) hostPlans(ctx context.Context, parent *fleetv1alpha1.RetirementPlan) (map[string]*fleetv1alpha1.RetirementPlan, error) {
	list := &fleetv1alpha1.RetirementPlanList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(parent.Namespace), client.MatchingLabels{fleetv1alpha1.FleetPlanLabel: labelValue(parent.Name)}); err != nil {
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
