package retirementplan

import (
	"context"
	"fmt"
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
	"github.com/giteatools/fleet-controller/internal/conditions"
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

// hostStep takes a host plan read from the API server one step on: its pending pages,
// an apply in progress, the dry run, the approval's record, and the apply.
func (r *HostPlanReconciler) hostStep(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("RetirementPlan", klogRef(plan), "host", plan.Spec.HostID)
	ph := hostPhaseOf(plan)
	if ph.pagesPending {
		if err := r.writePending(ctx, plan); err != nil {
			return ctrl.Result{}, err
		}
	}
	var run applyRun
	switch {
	case ph.applying:
		// An apply recorded as in progress: wait for its holder, or take over a lapsed
		// hold and resume the apply on this host (intent.go). Nothing else touches such
		// a plan.
		run = r.settleApply(ctx, plan, true)
	case plan.Status.Outcome != "" && plan.Status.Outcome != retirement.OutcomePlanned:
		return ctrl.Result{}, nil
	default:
		if plan.Status.Outcome == "" {
			if err := r.plan(ctx, plan); err != nil {
				return ctrl.Result{}, err
			}
			logger.Info("Planned host plan", "candidates", plan.Status.CandidateCount, "preserved", plan.Status.PreservedCount)
			if err := r.writePending(ctx, plan); err != nil {
				return ctrl.Result{}, err
			}
		}
		// The host plan records, once, that it is approved and the fleet plan's approval
		// narrowed to this host, before its apply records its intent: the intent is
		// written only on a plan whose stored status says Approved, and the apply decides
		// on the recorded approval.
		if !ph.approved {
			a, _, _ := r.hostApproval(ctx, plan)
			if a == nil {
				return ctrl.Result{}, nil // the fleet plan's change enqueues this host plan again
			}
			plan.Status.HostApproval = a
			conditions.Record(&plan.Status.Conditions, plan.Generation, ptr.To(applyingReadiness("The fleet plan's approval covers this host plan; applying it")),
				conditions.Cond{Type: fleetv1alpha1.ApprovedCondition, True: true, Reason: fleetv1alpha1.ReasonApprovedThroughFleetPlan, Message: "The fleet plan is Approved and covers this host plan's candidates"})
			if err := r.Status().Update(ctx, plan); err != nil {
				return ctrl.Result{}, fmt.Errorf("recording the host plan's approval: %w", err)
			}
		}
		logger.Info("Applying host plan")
		run = r.apply(ctx, plan) // apply.go: decide again, intent, guarded row writes
	}
	return r.finish(ctx, plan, run) // report.go: the report, or standing back
}

func klogRef(p *fleetv1alpha1.RetirementPlan) string { return p.Namespace + "/" + p.Name }

// plan computes the dry-run plan and writes it to status.
func (r *HostPlanReconciler) plan(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) error {
	fresh, err := r.assess(ctx, plan)
	if err != nil {
		return err
	}
	// The snapshot is the last use of the registrations read: they are let go before the
	// pages are written, the plan's largest allocations.
	snapshot := r.snapshotOf(plan.Namespace, fresh.items)
	fresh.items = nil
	// The plan records that its pages follow this write (writePending): it is planned,
	// and can be approved, before every row is paged.
	setPlanStatus(plan, fresh.plan, r.Clock.Now(), conditions.Cond{Type: fleetv1alpha1.PagesReadyCondition, Reason: fleetv1alpha1.ReasonWritingPages,
		Message: fmt.Sprintf("Writing the pages of %d candidate(s) and %d preserved row(s)", fresh.plan.CandidateCount, fresh.plan.PreservedCount)})
	plan.Status.RegistryResourceVersion = fresh.resourceVersion
	plan.Status.Snapshot = snapshot
	r.holdPages(plan, fresh.plan)
	if err := r.Status().Update(ctx, plan); err != nil { // guarded by the resourceVersion read above
		r.forgetPages(client.ObjectKeyFromObject(plan))
		return fmt.Errorf("writing plan status: %w", err)
	}
	p := fresh.plan
	plansTotal.WithLabelValues(retirement.OutcomePlanned).Inc()
	for reason, n := range p.PreservedReasonCounts {
		preservedTotal.WithLabelValues("plan", reason).Add(float64(n))
	}
	r.Recorder.Eventf(plan, nil, "Normal", fleetv1alpha1.ReasonPlanned, "Plan",
		"Planned: %d candidate(s), %d preserved of %d assessed", p.CandidateCount, p.PreservedCount, p.AssessedCount)
	return nil
}
