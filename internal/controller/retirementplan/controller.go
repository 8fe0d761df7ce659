// Package retirementplan holds the RetirementPlan reconciler: it plans retirements as a
// dry run, checks the approval, and applies an approved plan exactly once.
//
// Reconcile reads the plan, asks internal/retirement for every decision (the plan, the
// approval verdict, the apply decision, each row's recheck, the report), and writes the
// result: gather.go reads the world, apply.go is the guarded write sequence, status.go
// records the answers.
package retirementplan

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// ApproverChecker answers what an approval verdict needs to know about who approved:
// whether the subject (approvedBy with approvedGroups) may approve in the namespace,
// whether it is a worker, and whether the admission policy that guards approvals is
// installed as shipped.
type ApproverChecker interface {
	CanApprove(ctx context.Context, s authz.Subject, namespace string) (allowed bool, reason string, err error)
	WorkerFacts(ctx context.Context, s authz.Subject, namespace string) (retirement.SubjectFacts, error)
	ApprovalGuard(ctx context.Context) (retirement.ApprovalGuard, error)
}

// Fence is the workflow fence: it moves whenever a task claim is acquired.
type Fence interface {
	Read(ctx context.Context, namespace string) (string, error)
	Moved(ctx context.Context, namespace, since string) (bool, error)
}

// RegistrationLister lists every WorkerRegistration of a namespace straight from the API
// server, as one consistent view, without managedFields.
type RegistrationLister interface {
	List(ctx context.Context, namespace string) ([]fleetv1alpha1.WorkerRegistration, error)
}

// Reconciler plans retirements as a dry run and applies an approved plan.
type Reconciler struct {
	client.Client
	// APIReader reads straight from the API server; apply never trusts the cache.
	APIReader client.Reader
	// Registrations lists a namespace's registrations straight from the API server, the
	// plan's and the apply's authoritative read (reglist.Lister: chunks, each decoded
	// while the next one is asked for). Nil: chunks read one after the other through
	// APIReader.
	Registrations RegistrationLister
	// Prober probes this host's processes while planning; nil leaves every pid unknown.
	Prober liveness.Prober
	// Reprober re-establishes, right before each row's write, that the exact process is
	// gone; nil means apply retires nothing (liveness_reprobe_unavailable).
	Reprober liveness.Prober
	// Host is the machine (and boot) this controller runs on.
	Host retirement.Host
	// Repository is the default canonical repository binding.
	Repository string
	// Approvers checks the approver and the guarding policy when the approval lands,
	// right before the first write, and again during a long apply.
	Approvers ApproverChecker
	// ApproverRecheck is how often a long apply checks the approval again (zero:
	// retirement.DefaultApproverRecheck).
	ApproverRecheck retirement.Recheck
	// ApproverBackoff is how an approver that is not authorized yet is looked at again
	// (zero: retirement.DefaultApproverBackoff).
	ApproverBackoff retirement.Backoff
	// refusals counts, per plan UID, the consecutive ApproverNotAuthorized verdicts.
	refusals sync.Map
	// Fence is the workflow fence, read before the authoritative read and before each row.
	Fence    Fence
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	// PageRows caps the rows of one RetirementPlanPage (zero: retirement.PageMaxRows).
	PageRows int
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
	// AfterWrite, when set, runs right after each successful row write. An error abandons
	// the apply at once, writing nothing more (no row, no renewal, no report), as if the
	// process had died there: a test seam for crashes between two row writes.
	AfterWrite func(ctx context.Context, worker string) error

	// Agent is this manager's agent for its host: host plans of that host are planned and
	// applied only while it holds the host's Lease. Nil: this manager runs no host plan
	// (it still fans out and aggregates fleet plans).
	Agent HostAgent
	// AgentNamespace holds the hosts' coordination Leases, read to learn which hosts have
	// an agent when a fleet plan fans out.
	AgentNamespace string
	// Coordinator is this manager's candidacy for the fleet coordinator Lease: only while
	// it holds that Lease does this reconciler fan out a fleet plan, write its status and
	// pages, create its host plans and close those of lost hosts, so a fleet plan has one
	// writer. Nil: this reconciler drives every fleet plan it sees (a single manager, or a
	// test driving a reconciler by hand).
	Coordinator Coordinator
	// HostAgentGrace is how long a fleet plan waits for a host's agent beyond the expiry
	// of the host's Lease before it closes that host's host plan (zero:
	// retirement.DefaultHostAgentGrace).
	HostAgentGrace time.Duration
	// planLocks serialises the work on one host plan in this process (lockPlan).
	planLocks sync.Map
	// pendingPages holds, per host plan, the verdicts of a plan this agent recorded as
	// planned and whose pages it has yet to write (pages.go).
	pendingPages sync.Map
}

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplans,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplans/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplans/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=workerregistrations,verbs=retire
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update

// Reconcile routes a plan: a host plan (spec.hostID) is planned and applied by its
// host's agent alone; a fleet plan fans out to host plans, judges the approval and
// aggregates (coordinator.go).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	plan := &fleetv1alpha1.RetirementPlan{}
	if err := r.Get(ctx, req.NamespacedName, plan); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetPages(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if plan.Spec.HostID != "" {
		return r.reconcileHost(ctx, req.NamespacedName, plan.Spec.HostID, false)
	}
	// Only the fleet coordinator writes a fleet plan, but one that just lost its Lease may
	// have written it too: each attempt reads it afresh, and a conflict is answered by
	// re-reading and deciding again.
	for attempt := 0; ; attempt++ {
		if err := r.APIReader.Get(ctx, req.NamespacedName, plan); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		// gather.go: this attempt's fan-out read serves its local host plans' dry runs.
		res, err := r.reconcileFleet(withFanoutRead(ctx), plan)
		if !apierrors.IsConflict(err) || attempt == maxFleetAttempts {
			return res, err
		}
		fleetConflicts.Inc()
	}
}

// maxFleetAttempts bounds the re-reads after conflicting writes of a fleet plan in one
// reconcile; then the error is returned and the work queue backs off.
const maxFleetAttempts = 5

// plan computes the dry-run plan and writes it to status.
func (r *Reconciler) plan(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) error {
	fresh, err := r.assess(ctx, plan)
	if err != nil {
		return err
	}
	// The snapshot is the last use of the registrations read: they are let go before the
	// pages are written, the plan's largest allocations.
	snapshot := r.snapshotOf(plan.Namespace, fresh.items)
	fresh.items = nil
	setPlanStatus(plan, fresh.plan, r.Clock.Now())
	if plan.Spec.HostID != "" {
		markHostPlan(plan)
	}
	plan.Status.Snapshot = snapshot
	// The verdicts are kept for the pages, which follow this write (writePending): the
	// plan is planned, and can be approved, before every row is paged.
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

// checkApproval records the Approved condition: true only when the approval repeats the
// plan exactly, the guarding admission policy vouches for it, and the approver is no
// worker and holds the approve verb. A refusal is announced by a Warning event when it
// is new, not on every recheck.
func (r *Reconciler) checkApproval(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (retirement.ApprovalVerdict, error) {
	previous := ""
	if c := meta.FindStatusCondition(plan.Status.Conditions, fleetv1alpha1.ApprovedCondition); c != nil {
		previous = c.Reason
	}
	verdict, err := r.judgeApproval(ctx, plan)
	if err != nil {
		return retirement.ApprovalVerdict{}, err
	}
	setApproval(plan, verdict)
	if err := r.Status().Update(ctx, plan); err != nil {
		return retirement.ApprovalVerdict{}, fmt.Errorf("writing the Approved condition: %w", err)
	}
	approvalsTotal.WithLabelValues(verdict.Reason).Inc()
	if retirement.ApprovalEventDue(previous, verdict) {
		r.Recorder.Eventf(plan, nil, "Warning", verdict.Reason, "Approve", "Not approved: %s", verdict.Message)
	}
	return verdict, nil
}

// SetupWithManager registers the reconciler as "retirementplan".
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return r.SetupWithManagerNamed(mgr, "retirementplan")
}

// SetupWithManagerNamed registers the reconciler under name, for plans that pass preds.
// A plan's own spec changes (generation) enqueue it; a host plan's change enqueues its
// fleet plan, and a fleet plan's change its host plans; and when this manager's agent
// gains or loses its host's Lease, the host plans of that host are looked at again.
func (r *Reconciler) SetupWithManagerNamed(mgr ctrl.Manager, name string, preds ...predicate.Predicate) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.RetirementPlan{}, builder.WithPredicates(append([]predicate.Predicate{predicate.GenerationChangedPredicate{}}, preds...)...)).
		Watches(&fleetv1alpha1.RetirementPlan{}, handler.EnqueueRequestsFromMapFunc(r.related), builder.WithPredicates(preds...)).
		Named(name).
		// Host-scoped: every manager runs it, and acts only for what its agent holds.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)})
	if ch, ok := r.Agent.(interface {
		Changes() <-chan event.GenericEvent
	}); ok {
		b = b.WatchesRawSource(source.Channel(ch.Changes(), handler.EnqueueRequestsFromMapFunc(r.ownHostPlans)))
	}
	if ch, ok := r.Coordinator.(interface {
		Changes() <-chan event.GenericEvent
	}); ok {
		b = b.WatchesRawSource(source.Channel(ch.Changes(), handler.EnqueueRequestsFromMapFunc(r.openFleetPlans)))
	}
	return b.Complete(r)
}

// related maps a host plan to its fleet plan, and a fleet plan to its host plans.
func (r *Reconciler) related(ctx context.Context, o client.Object) []reconcile.Request {
	plan, ok := o.(*fleetv1alpha1.RetirementPlan)
	if !ok {
		return nil
	}
	if plan.Spec.HostID != "" {
		if ref := metav1.GetControllerOf(plan); ref != nil && ref.Kind == kindRetirementPlan {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: plan.Namespace, Name: ref.Name}}}
		}
		return nil
	}
	list := &fleetv1alpha1.RetirementPlanList{}
	if err := r.List(ctx, list, client.InNamespace(plan.Namespace), client.MatchingLabels{LabelFleetPlan: fleetPlanLabelValue(plan.Name)}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// ownHostPlans lists the unfinished host plans of this manager's host.
func (r *Reconciler) ownHostPlans(ctx context.Context, _ client.Object) []reconcile.Request {
	if r.Agent == nil {
		return nil
	}
	list := &fleetv1alpha1.RetirementPlanList{}
	if err := r.List(ctx, list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.HostID == r.Agent.ID() && (p.Status.Outcome == "" || p.Status.Outcome == retirement.OutcomePlanned) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		}
	}
	return out
}

// openFleetPlans lists the unfinished fleet plans, for a manager that just became the
// fleet coordinator.
func (r *Reconciler) openFleetPlans(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &fleetv1alpha1.RetirementPlanList{}
	if err := r.List(ctx, list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.HostID == "" && (p.Status.Outcome == "" || p.Status.Outcome == retirement.OutcomePlanned) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		}
	}
	return out
}
