package retirementplan

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// HostPlanReconciler plans and applies host plans (spec.hostID set): the rows of one
// host, planned and applied only by the agent that holds the host's Lease.
type HostPlanReconciler struct {
	*Deps
	// Prober probes this host's processes while planning; nil leaves every pid unknown.
	Prober liveness.Prober
	// Reprober re-establishes, right before each row's write, that the exact process is
	// gone; nil means apply retires nothing (liveness_reprobe_unavailable).
	Reprober liveness.Prober
	// Agent is this manager's agent for its host: host plans of that host are planned and
	// applied only while it holds the host's Lease. Nil: this manager runs no host plan of
	// its own.
	Agent HostAgent
	// Coordinator is this manager's candidacy for the fleet coordinator Lease: while it
	// holds that Lease, this reconciler stands in for the agents of lost hosts and closes
	// their host plans (hostloss.go). Nil: it always does (a single manager, or a test).
	Coordinator Coordinator
	// AgentNamespace holds the hosts' coordination Leases, read to learn whether a host's
	// agent is lost.
	AgentNamespace string
	// HostAgentGrace is how long a host plan waits for its host's agent beyond the expiry
	// of the host's Lease before the stand-in closes it (zero:
	// retirement.DefaultHostAgentGrace).
	HostAgentGrace time.Duration
	// ApproverRecheck is how often a long apply checks the approval again (zero:
	// retirement.DefaultApproverRecheck).
	ApproverRecheck retirement.Recheck
	// BeforeWrite, when set, runs right before each row's fence check and guarded write.
	// It is a test seam for interleaving concurrent changes.
	BeforeWrite func(ctx context.Context, worker string)

	// The single applier (intent.go).

	// ApplierID names this applier in status.applyProgress (empty: ProcessApplierID, the
	// host name and a random suffix minted once per process).
	ApplierID string
	// TakeoverTimeout is how long an apply's hold lasts without renewal before another
	// reconcile takes it over and completes the report (zero:
	// retirement.DefaultTakeoverTimeout).
	TakeoverTimeout time.Duration
	// RowWrites, when set, paces the row writes of every apply this reconciler runs
	// (--apply-row-writes-per-second): each row waits for its turn before it is checked
	// and written. Nil writes as fast as the API server answers.
	RowWrites *rate.Limiter
	// AfterWrite, when set, runs right after each successful row write. An error abandons
	// the apply at once, writing nothing more (no row, no renewal, no report), as if the
	// process had died there: a test seam for crashes between two row writes.
	AfterWrite func(ctx context.Context, worker string) error

	// pendingPages holds, per host plan, the verdicts of a plan this agent recorded as
	// planned and whose pages it has yet to write (pages.go).
	pendingPages sync.Map
}

// Reconcile plans and applies a host plan; it leaves fleet plans to FleetPlanReconciler.
func (r *HostPlanReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	plan := &fleetv1alpha1.RetirementPlan{}
	if err := r.Get(ctx, req.NamespacedName, plan); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetPages(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	switch {
	case plan.Spec.HostID == "":
		return ctrl.Result{}, nil
	case r.holds(plan.Spec.HostID):
		return r.reconcileHost(ctx, req.NamespacedName)
	case r.standsIn():
		return r.reconcileLost(ctx, req.NamespacedName)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler as "retirementplan-host".
func (r *HostPlanReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return r.SetupWithManagerNamed(mgr, "retirementplan-host")
}

// SetupWithManagerNamed registers the reconciler under name, for host plans that pass
// preds. A host plan's own spec changes (generation) enqueue it, and so does any change
// of its fleet plan (an approval lands there); when this manager's agent gains or loses
// its host's Lease, the host plans of that host are looked at again, and when it becomes
// the fleet coordinator, every unfinished host plan (a lost host's may wait for it).
func (r *HostPlanReconciler) SetupWithManagerNamed(mgr ctrl.Manager, name string, preds ...predicate.Predicate) error {
	hostPlans := predicate.NewPredicateFuncs(func(o client.Object) bool { return isHostPlan(o) })
	b := ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.RetirementPlan{}, builder.WithPredicates(append([]predicate.Predicate{hostPlans, predicate.GenerationChangedPredicate{}}, preds...)...)).
		Watches(&fleetv1alpha1.RetirementPlan{}, handler.EnqueueRequestsFromMapFunc(r.hostPlansOf), builder.WithPredicates(preds...)).
		Named(name).
		// Host-scoped: every manager runs it, and acts only for what its agent holds.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)})
	if ch, ok := r.Agent.(interface {
		Changes() <-chan event.GenericEvent
	}); ok {
		b = b.WatchesRawSource(source.Channel(ch.Changes(), handler.EnqueueRequestsFromMapFunc(unfinishedPlans(r.Client, r.ofOwnHost))))
	}
	if ch, ok := r.Coordinator.(interface {
		Changes() <-chan event.GenericEvent
	}); ok {
		b = b.WatchesRawSource(source.Channel(ch.Changes(), handler.EnqueueRequestsFromMapFunc(unfinishedPlans(r.Client, func(p *fleetv1alpha1.RetirementPlan) bool { return p.Spec.HostID != "" }))))
	}
	return b.Complete(r)
}

// isHostPlan says whether o is a host plan (a RetirementPlan with spec.hostID).
func isHostPlan(o client.Object) bool {
	p, ok := o.(*fleetv1alpha1.RetirementPlan)
	return ok && p.Spec.HostID != ""
}

// hostPlansOf maps a fleet plan to its host plans.
func (r *HostPlanReconciler) hostPlansOf(ctx context.Context, o client.Object) []reconcile.Request {
	plan, ok := o.(*fleetv1alpha1.RetirementPlan)
	if !ok || plan.Spec.HostID != "" {
		return nil
	}
	list := &fleetv1alpha1.RetirementPlanList{}
	if err := r.List(ctx, list, client.InNamespace(plan.Namespace), client.MatchingLabels{fleetv1alpha1.FleetPlanLabel: labelValue(plan.Name)}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// ofOwnHost says whether p is a host plan of this manager's host.
func (r *HostPlanReconciler) ofOwnHost(p *fleetv1alpha1.RetirementPlan) bool {
	return r.Agent != nil && p.Spec.HostID == r.Agent.ID()
}

// holds says whether this manager is the agent of hostID right now.
func (r *HostPlanReconciler) holds(hostID string) bool {
	return r.Agent != nil && hostID != "" && r.Agent.ID() == hostID && r.Agent.Held()
}

// reconcileHost plans and, once its fleet plan is approved, applies a host plan of the
// host this manager's agent holds. A plan's pages are written right after the status
// that records it planned; pages pending from earlier are written before anything else
// is done to the plan.
func (r *HostPlanReconciler) reconcileHost(ctx context.Context, key types.NamespacedName) (ctrl.Result, error) {
	plan := &fleetv1alpha1.RetirementPlan{}
	if err := r.APIReader.Get(ctx, key, plan); err != nil { // the newest state, not the cache's
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return r.hostStep(ctx, plan)
}

// maxHostStages bounds the stages one reconcile takes a host plan through: the dry run,
// its pages, the approval's record and the apply, with room to spare.
const maxHostStages = 6

// hostStep takes a host plan read from the API server through the stages its status
// calls for, one after the other, until one has nothing to record yet (the approval has
// not landed, another applier holds the apply) or the plan is done:
//
//   - its pages, when the plan is planned and they are still to be written (pages.go);
//   - the dry run (dryRun);
//   - the approval's record, then the apply, or the takeover of an apply in progress
//     (apply.go).
//
// Each stage decides, and one status write records what it decided (record, record.go).
func (r *HostPlanReconciler) hostStep(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (ctrl.Result, error) {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("host", plan.Spec.HostID))
	for range maxHostStages {
		ph := hostPhaseOf(plan)
		if ph.pagesPending {
			if err := r.writePending(ctx, plan); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		var st hostResult
		switch {
		case ph.unplanned:
			st = r.dryRun(ctx, plan)
		case ph.awaitingApply, ph.applying:
			st = r.apply(ctx, plan, ph)
		}
		res, more, err := r.record(ctx, plan, st)
		if err != nil || !more {
			return res, err
		}
	}
	return ctrl.Result{RequeueAfter: time.Second}, nil // a stage that kept changing the phase: look again soon
}

// dryRun computes the dry-run plan. Its verdicts are held for the pages, written right
// after the status that records the plan (writePending); the registrations read are let
// go before, as the pages are the plan's largest allocations.
func (r *HostPlanReconciler) dryRun(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) hostResult {
	fresh, err := r.assess(ctx, plan)
	if err != nil {
		return hostResult{halt: err}
	}
	fresh.items = nil
	fresh.plannedAt = r.Clock.Now()
	r.holdPages(plan, fresh.plan, fresh.plannedAt)
	return hostResult{planned: &fresh}
}
