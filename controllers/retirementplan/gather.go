package retirementplan

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/fleet"
	"github.com/giteatools/fleet-controller/internal/forge"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// world is what one plan or apply reads: the registrations, straight from the API server,
// and the plan computed from them.
type world struct {
	plan  retirement.Plan
	items []fleetv1alpha1.WorkerRegistration
	// rows are items as the retirement package reads them, each with its binding's
	// canonical value in the namespace (boundRows).
	rows []retirement.Row
	// resourceVersion is the view the registrations were read at.
	resourceVersion string
	// snapshot summarises the registrations read, for a dry run (nil for an apply).
	snapshot *fleetv1alpha1.PostApply
	// plannedAt is when a dry run was decided: its status.plannedAt.
	plannedAt time.Time
}

// assess reads the registrations and task claims straight from the API server and builds
// the plan from them. A host plan (spec.hostID) is built over every row of the namespace,
// so conflicts across hosts still count and the registry fingerprint stays the
// namespace's, and then narrowed to the rows of its host (retirement.ForHost).
//
// A host plan's dry run reads the registrations at the resourceVersion its fleet plan's
// fan-out read (planView), so the fleet plan's registry fingerprint and every host plan's
// verdicts rest on one view of the namespace, and summarises them (the plan's snapshot).
// An apply always reads the newest.
func (r *HostPlanReconciler) assess(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (world, error) {
	dryRun := plan.Status.Outcome == ""
	view := ""
	if dryRun {
		view = r.planView(ctx, plan)
	}
	items, rv, err := r.listRegistrationsAt(ctx, plan.Namespace, view)
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		// The agent came too late for the fan-out's view: plan from the newest, which
		// the host plan records as its own.
		log.FromContext(ctx).Info("The fan-out's view of the registrations is compacted; planning from the newest", "resourceVersion", view)
		items, rv, err = r.listRegistrationsAt(ctx, plan.Namespace, "")
	}
	if err != nil {
		return world{}, err
	}
	var snapshot *fleetv1alpha1.PostApply
	if dryRun {
		snapshot = r.snapshotOf(plan.Namespace, items)
	}
	claims := &fleetv1alpha1.TaskClaimList{}
	if err := r.APIReader.List(ctx, claims, client.InNamespace(plan.Namespace)); err != nil {
		return world{}, fmt.Errorf("listing task claims (the workflow owners): %w", err)
	}
	bound, repos, err := r.binding(ctx, plan)
	if err != nil {
		return world{}, err
	}
	probes := r.probeAll(ctx, items, plan.Spec.HostID)
	rows := boundRows(items, r.Repository, repos)
	p := retirement.BuildPlan(retirement.Input{
		Rows:                 rows,
		CanonicalRepository:  bound.Repository,
		CanonicalBinding:     bound.Canonical(),
		RepositoryProblem:    bound.Problem,
		Now:                  r.Clock.Now(),
		Host:                 r.Host,
		Probes:               probes,
		ActiveWorkflowOwners: claim.WorkflowOwners(apiconv.Holdings(claims.Items)),
	})
	if plan.Spec.HostID != "" {
		p = retirement.ForHost(p, rows, plan.Spec.HostID)
	}
	return world{plan: p, items: items, rows: rows, resourceVersion: rv, snapshot: snapshot}, nil
}

// binding is the repository plan is bound to in its namespace (forge.Bind): the one its
// status recorded when it was planned, else the one its spec names, else the default (the
// --repository flag's, or the namespace's only GiteaRepository); and the namespace's
// GiteaRepositories it was resolved among, which the rows' bindings resolve among too
// (boundRows). They are read straight from the API server, as the rows are: an object
// deleted, added or replaced since the plan changes what an apply finds, and a binding
// that names no repository of the namespace any more, or one whose object has not
// resolved a Gitea repository ID (so it has no canonical value), preserves every row.
func (r *Deps) binding(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (forge.Binding, []forge.Candidate, error) {
	list := &fleetv1alpha1.GiteaRepositoryList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(plan.Namespace)); err != nil {
		return forge.Binding{}, nil, fmt.Errorf("listing the GiteaRepositories of %s (the plan's repository binding): %w", plan.Namespace, err)
	}
	cands := make([]forge.Candidate, 0, len(list.Items))
	for i := range list.Items {
		cands = append(cands, apiconv.Candidate(&list.Items[i]))
	}
	requested := plan.Status.CanonicalRepository
	if requested == "" {
		requested = plan.Spec.CanonicalRepository
	}
	b := forge.Bind(requested, r.Repository, cands).Resolved()
	if b.Problem != "" {
		b.Repository = requested // what the plan names, for its status; it binds nothing
	}
	return b, cands, nil
}

// boundRows flattens the registrations into the retirement package's rows, each with the
// canonical value of its own repository binding among the namespace's repositories (flags,
// the --repository one, and repos): what a row is compared with the plan's binding by, and
// what the fingerprints encode in its repository field. A row's binding that names no
// repository there has none.
func boundRows(items []fleetv1alpha1.WorkerRegistration, flags string, repos []forge.Candidate) []retirement.Row {
	rows := apiconv.Rows(items)
	for i := range rows {
		if rows[i].Repository != "" {
			rows[i].Binding = forge.Bind(rows[i].Repository, flags, repos).Canonical()
		}
	}
	return rows
}

// planView is the resourceVersion of the registrations its fleet plan's fan-out read,
// which a host plan plans at ("" when its fleet plan cannot be read or recorded none:
// then the newest).
func (r *HostPlanReconciler) planView(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) string {
	ref := metav1.GetControllerOf(plan)
	if ref == nil || ref.Kind != kindRetirementPlan {
		return ""
	}
	parent := &fleetv1alpha1.RetirementPlan{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: plan.Namespace, Name: ref.Name}, parent); err != nil || parent.UID != ref.UID {
		return ""
	}
	return parent.Status.RegistryResourceVersion
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

// listChunk is how many registrations one List request of listRegistrationsAt asks for.
const listChunk = 2000

// listRegistrations reads every registration of namespace as the API server holds it now.
func (r *Deps) listRegistrations(ctx context.Context, namespace string) ([]fleetv1alpha1.WorkerRegistration, error) {
	items, _, err := r.listRegistrationsAt(ctx, namespace, "")
	return items, err
}

// listRegistrationsAt reads every registration of namespace straight from the API server
// at resourceVersion (the newest when empty, an exact match otherwise), and says which
// resourceVersion the view is. It reads in chunks of listChunk: the continue token keeps
// every chunk on the resourceVersion of the first, so the result is the same consistent
// view one List would give, without the manager ever holding the whole namespace's
// response body at once. The rows' managedFields are dropped as they arrive, as the
// manager's cache drops them. A view this process read at a fan-out moments before is
// answered from memory (views): a view at a resourceVersion never changes.
func (r *Deps) listRegistrationsAt(ctx context.Context, namespace, resourceVersion string) ([]fleetv1alpha1.WorkerRegistration, string, error) {
	if items, ok := r.views.take(namespace, resourceVersion); ok {
		return items, resourceVersion, nil
	}
	if r.Registrations != nil {
		return r.Registrations.ListAt(ctx, namespace, resourceVersion)
	}
	var items []fleetv1alpha1.WorkerRegistration
	chunk := &fleetv1alpha1.WorkerRegistrationList{}
	opts := []client.ListOption{client.InNamespace(namespace), client.Limit(listChunk)}
	if resourceVersion != "" {
		opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: resourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact}})
	}
	for {
		if err := r.APIReader.List(ctx, chunk, opts...); err != nil {
			return nil, "", fmt.Errorf("listing worker registrations: %w", err)
		}
		for i := range chunk.Items {
			chunk.Items[i].ManagedFields = nil // read by nothing here, and a large part of each row
		}
		if items == nil && chunk.Continue == "" {
			return chunk.Items, chunk.ResourceVersion, nil // one chunk held them all
		}
		items = append(items, chunk.Items...)
		if chunk.Continue == "" {
			return items, chunk.ResourceVersion, nil
		}
		// The token carries the view's resourceVersion.
		opts = []client.ListOption{client.InNamespace(namespace), client.Limit(listChunk), client.Continue(chunk.Continue)}
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
