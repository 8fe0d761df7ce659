package retirementplan

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// A RetirementPlan without spec.hostID is a fleet plan: one user action covering every
// host. See docs/retirementplan.md, "Several hosts".

// FleetPlanReconciler drives fleet plans (no spec.hostID): it splits the namespace's rows
// by host, creates one host plan per host that has an agent, judges the approval, and
// aggregates what the host plans report (a host plan closed because its agent was lost
// lists its host among the hosts without an agent). Only the fleet coordinator writes a
// fleet plan (Coordinator); no fleet-plan code writes a host plan.
type FleetPlanReconciler struct {
	*Deps
	// AgentNamespace holds the hosts' coordination Leases, read to learn which hosts have
	// an agent when a fleet plan fans out.
	AgentNamespace string
	// Coordinator is this manager's candidacy for the fleet coordinator Lease: only while
	// it holds that Lease does this reconciler fan out a fleet plan, write its status and
	// pages and create its host plans, so a fleet plan has one
	// writer. Nil: this reconciler drives every fleet plan it sees (a single manager, or a
	// test driving a reconciler by hand).
	Coordinator Coordinator
	// ApproverBackoff is how an approver that is not authorized yet is looked at again
	// (zero: retirement.DefaultApproverBackoff).
	ApproverBackoff retirement.Backoff

	// refusals counts, per plan UID, the consecutive ApproverNotAuthorized verdicts.
	refusals sync.Map
}

// Reconcile drives a fleet plan; it leaves host plans to HostPlanReconciler. Each pass
// reads the plan afresh and takes one step (step); a step that moves the plan on (planned
// with an approval set, approved) is followed at once by the next. Only the fleet
// coordinator writes a fleet plan, but one that just lost its Lease may have written it
// too: a conflict is answered by re-reading and deciding again.
func (r *FleetPlanReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var (
		res ctrl.Result
		err error
	)
	for attempt := 0; attempt < maxFleetAttempts; attempt++ {
		plan := &fleetv1alpha1.RetirementPlan{}
		if err := r.APIReader.Get(ctx, req.NamespacedName, plan); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if plan.Spec.HostID != "" {
			return ctrl.Result{}, nil
		}
		var again bool
		res, again, err = r.step(ctx, plan)
		if apierrors.IsConflict(err) {
			fleetConflicts.Inc()
			continue
		}
		if err != nil || !again {
			return res, err
		}
	}
	return res, err
}

// maxFleetAttempts bounds the passes of one reconcile: the steps that follow each other
// (plan, approval, apply) and the re-reads after conflicting writes; a conflict left then
// is returned, and the work queue backs off.
const maxFleetAttempts = 8

// SetupWithManager registers the reconciler as "retirementplan-fleet".
func (r *FleetPlanReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return r.SetupWithManagerNamed(mgr, "retirementplan-fleet")
}

// SetupWithManagerNamed registers the reconciler under name, for fleet plans that pass
// preds. A fleet plan's own spec changes (generation) enqueue it, and so does any change
// of one of its host plans; when this manager becomes the fleet coordinator, every
// unfinished fleet plan is looked at again.
func (r *FleetPlanReconciler) SetupWithManagerNamed(mgr ctrl.Manager, name string, preds ...predicate.Predicate) error {
	fleetPlans := predicate.NewPredicateFuncs(func(o client.Object) bool { return !isHostPlan(o) })
	b := ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.RetirementPlan{}, builder.WithPredicates(append([]predicate.Predicate{fleetPlans, predicate.GenerationChangedPredicate{}}, preds...)...)).
		Watches(&fleetv1alpha1.RetirementPlan{}, handler.EnqueueRequestsFromMapFunc(fleetPlanOf), builder.WithPredicates(preds...)).
		Named(name).
		// Every manager runs it, and only the coordinator writes (coordinates): a standby
		// keeps its cache and queue warm, so taking over the Lease costs no resync.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)})
	if ch, ok := r.Coordinator.(interface {
		Changes() <-chan event.GenericEvent
	}); ok {
		b = b.WatchesRawSource(source.Channel(ch.Changes(), handler.EnqueueRequestsFromMapFunc(unfinishedPlans(r.Client, isFleetPlan))))
	}
	return b.Complete(r)
}

// fleetPlanOf maps a host plan to its fleet plan.
func fleetPlanOf(_ context.Context, o client.Object) []reconcile.Request {
	plan, ok := o.(*fleetv1alpha1.RetirementPlan)
	if !ok || plan.Spec.HostID == "" {
		return nil
	}
	if ref := metav1.GetControllerOf(plan); ref != nil && ref.Kind == kindRetirementPlan {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: plan.Namespace, Name: ref.Name}}}
	}
	return nil
}

// unfinishedPlans maps any event to the plans that keep are true of and that are not
// finished (no outcome yet, or planned): what a manager looks at again when it gains a
// Lease.
func unfinishedPlans(c client.Reader, keep func(*fleetv1alpha1.RetirementPlan) bool) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := &fleetv1alpha1.RetirementPlanList{}
		if err := c.List(ctx, list); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			p := &list.Items[i]
			if keep(p) && (p.Status.Outcome == "" || p.Status.Outcome == retirement.OutcomePlanned) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
			}
		}
		return out
	}
}

func isFleetPlan(p *fleetv1alpha1.RetirementPlan) bool { return p.Spec.HostID == "" }

// coordinates says whether this reconciler is the one writer of fleet plans now.
func (r *FleetPlanReconciler) coordinates() bool {
	return r.Coordinator == nil || r.Coordinator.Held()
}

// step takes a fleet plan one step on, from its phase (phaseOf): fan out and create its host plans (split), read
// what the step needs (observe), decide its next status (nextFleetStatus, pure) and write
// it (record). Every step is a function of what the API server holds, and only the fleet
// coordinator runs it; the host plans are planned and applied by their hosts' agents
// (HostPlanReconciler), whose every write enqueues the fleet plan again. Should two
// managers run it (a coordinator that lost its Lease mid-reconcile), they converge:
// writes are guarded by resourceVersion, and a conflict is retried from a fresh read.
func (r *FleetPlanReconciler) step(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (ctrl.Result, bool, error) {
	if !r.coordinates() {
		fleetStandbyTotal.Inc()
		return ctrl.Result{}, false, nil
	}
	ph := phaseOf(plan)
	if ph.finished() {
		return ctrl.Result{}, false, nil
	}
	if ph.outcome == "" {
		if err := r.split(ctx, plan, ph); err != nil {
			return ctrl.Result{}, false, err
		}
	}
	seen, err := r.observe(ctx, plan, ph)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	next := nextFleetStatus(plan, ph, seen)
	return r.record(ctx, plan, next)
}

// record writes the status a step decided, when it differs from the plan's, and then
// announces it: the outcome and approval counters, the step's event and, for an approver
// that is not authorized yet, when to look again.
func (r *FleetPlanReconciler) record(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, step fleetStep) (ctrl.Result, bool, error) {
	if !equalStatus(&plan.Status, &step.next.Status) {
		if err := r.Status().Update(ctx, step.next); err != nil {
			return ctrl.Result{}, false, fmt.Errorf("writing the fleet plan's status: %w", err)
		}
	}
	if step.outcome != "" {
		plansTotal.WithLabelValues(step.outcome).Inc()
	}
	if e := step.event; e != nil {
		r.Recorder.Eventf(step.next, nil, e.kind, e.reason, e.action, "%s", e.message)
	}
	if step.outcome == retirement.OutcomePlanned {
		s := step.next.Status
		log.FromContext(ctx).Info("Planned", "hosts", len(s.Hosts), "candidates", s.CandidateCount, "preserved", s.PreservedCount)
	}
	v := step.approval
	if v == nil {
		return ctrl.Result{}, step.again, nil
	}
	approvalsTotal.WithLabelValues(v.Reason).Inc()
	if v.Approved || v.Final {
		r.refusals.Delete(plan.UID)
		return ctrl.Result{}, step.again, nil
	}
	return ctrl.Result{RequeueAfter: r.nextApproverCheck(plan.UID)}, false, nil
}
