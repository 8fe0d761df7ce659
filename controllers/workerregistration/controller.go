// Package workerregistration holds the WorkerRegistration reconciler: it computes
// status.ownershipState (live, stale, historical) of registrations and requeues each live
// one at the instant its heartbeat expires.
//
// One writer per row: a row's ownership state is written by its own host's agent (the
// manager whose --host-id is the row's spec.process.hostID, while it holds that host's
// coordination Lease), which alone can probe the process. A row whose host has no agent
// is written by the fleet coordinator (the agent holding the coordinator Lease) from the
// heartbeat alone: a fresh heartbeat stays live, since no probe can withdraw it there.
// No other manager touches a row, so agents never fight over one. A heartbeat changes
// nothing unless the state does: the reconciler writes status only when the ownership
// state or a condition changes, emits events only on transitions, and otherwise only
// asks to look again when the heartbeat expires.
package workerregistration

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
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
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/fleet"
	"github.com/giteatools/fleet-controller/internal/forge"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// Elected is an agent that may or may not hold its Lease right now (internal/hostagent).
type Elected interface {
	Held() bool
}

// HostAgent is this manager's agent for its host.
type HostAgent interface {
	Elected
	ID() string
}

// Reconciler classifies registrations.
type Reconciler struct {
	client.Client
	// Prober probes processes of this host; nil means no probe can withdraw liveness.
	Prober   liveness.Prober
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	// Agent is this manager's host agent: rows of its host are written only while it
	// holds the host's Lease. Nil: this manager writes no host's rows.
	Agent HostAgent
	// Coordinator is the fleet coordinator election: rows of hosts without an agent are
	// written, from the heartbeat alone, only while it is held. Nil: never.
	Coordinator Elected
	// AgentNamespace holds the hosts' coordination Leases.
	AgentNamespace string
	// Repository is the manager's --repository repository ("" without it): a binding
	// that no GiteaRepository of the namespace names may name it.
	Repository string
}

// role is how this manager stands to one row.
type role int

const (
	// notMine: another agent writes the row, or nobody may right now.
	notMine role = iota
	// ownHost: the row is of this manager's host, and it holds the host's Lease.
	ownHost
	// unattended: no agent holds the row's host, and this manager is the coordinator.
	unattended
)

// roleFor says whether, and how, this manager writes wr. recheck is when the answer may
// change without an event (an agent's Lease expiring).
func (r *Reconciler) roleFor(ctx context.Context, wr *fleetv1alpha1.WorkerRegistration, now time.Time) (role, time.Time, error) {
	host := wr.Spec.Process.HostID
	if r.Agent != nil && host != "" && host == r.Agent.ID() {
		if r.Agent.Held() {
			return ownHost, time.Time{}, nil
		}
		return notMine, time.Time{}, nil // standby: the Lease's holder writes it
	}
	if r.Coordinator == nil || !r.Coordinator.Held() {
		return notMine, time.Time{}, nil
	}
	hosts, err := hostagent.ListHosts(ctx, r.Client, r.AgentNamespace, now)
	if err != nil {
		return notMine, time.Time{}, err
	}
	if h, ok := hosts.Agent(host); ok && host != "" {
		return notMine, h.Expires, nil // its host's agent writes it; look again if that Lease lapses
	}
	return unattended, time.Time{}, nil
}

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=workerregistrations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=workerregistrations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=gitearepositories,verbs=get;list;watch

// Reconcile assesses one registration.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wr := &fleetv1alpha1.WorkerRegistration{}
	if err := r.Get(ctx, req.NamespacedName, wr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	who, recheck, err := r.roleFor(ctx, wr, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if who == notMine {
		return requeueAt(now, recheck), nil
	}
	heartbeat := apiconv.TimePtr(wr.Status.LastHeartbeatAt)
	pid := fleet.PIDUnknown
	if who == ownHost && r.Prober != nil && wr.Status.Phase != fleetv1alpha1.PhaseRetired {
		target := apiconv.ProbeTarget(wr)
		pid = fleet.PIDState(r.Prober.Probe(ctx, target).State).Normalize()
		pid = applyBootRule(pid, target.BootID, r.Prober.Host(), heartbeat)
	}
	state, next := fleet.Classify(fleet.ClassifyInput{
		Now:             now,
		Phase:           wr.Status.Phase,
		LastHeartbeatAt: heartbeat,
		HeartbeatTTL:    retirement.SecondsDuration(wr.Spec.HeartbeatTTLSeconds),
		PID:             pid,
	})
	result := requeueAt(now, next)

	bound, err := r.binding(ctx, wr)
	if err != nil {
		return ctrl.Result{}, err
	}

	before := wr.DeepCopy()
	if who == ownHost {
		setOwnership(wr, state, pid)
	} else {
		setUnattendedOwnership(wr, state)
	}
	setBinding(wr, bound)
	if equality.Semantic.DeepEqual(before.Status, wr.Status) {
		return result, nil // nothing changed (a heartbeat renewal): nothing to write
	}
	if err := r.Status().Patch(ctx, wr, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			// The worker renewed its heartbeat meanwhile; that update triggers a fresh reconcile.
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("writing ownership state: %w", err)
	}
	statusWrites.WithLabelValues(map[role]string{ownHost: "host_agent", unattended: "coordinator"}[who]).Inc()
	if previous := before.Status.OwnershipState; previous != state {
		ownershipTransitions.WithLabelValues(previous, state).Inc()
		if previous != "" {
			r.Recorder.Eventf(wr, nil, "Normal", "OwnershipChanged", "Assess", "Ownership changed from %s to %s", previous, state)
		}
		log.FromContext(ctx).V(1).Info("Ownership changed", "from", previous, "to", state)
	}
	return result, nil
}

// binding is what wr's spec.repository names among the GiteaRepositories of its
// namespace (the manager's cache) and the --repository repository (forge.Bind).
func (r *Reconciler) binding(ctx context.Context, wr *fleetv1alpha1.WorkerRegistration) (forge.Binding, error) {
	list := &fleetv1alpha1.GiteaRepositoryList{}
	if err := r.List(ctx, list, client.InNamespace(wr.Namespace)); err != nil {
		return forge.Binding{}, fmt.Errorf("listing the GiteaRepositories of %s: %w", wr.Namespace, err)
	}
	cands := make([]forge.Candidate, 0, len(list.Items))
	for i := range list.Items {
		cands = append(cands, apiconv.Candidate(&list.Items[i]))
	}
	return forge.Bind(wr.Spec.Repository, r.Repository, cands), nil
}

// applyBootRule passes a Gone answer through the boot rule (fleet.FreePIDVerdict), the
// one the retirement checks apply too, so that a worker of another boot is not marked
// stale here either. Other answers pass unchanged.
func applyBootRule(pid fleet.PIDState, targetBoot string, host liveness.HostFacts, heartbeat *time.Time) fleet.PIDState {
	if pid != fleet.PIDGone {
		return pid
	}
	verdict, _ := fleet.FreePIDVerdict(targetBoot, host.BootID, host.BootTime, heartbeat)
	return verdict
}

// requeueAt asks to be called again when a live registration's heartbeat expires.
func requeueAt(now, next time.Time) ctrl.Result {
	if next.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: next.Sub(now)}
}

// indexHostID indexes registrations by spec.process.hostID, to find a host's rows.
const indexHostID = "spec.process.hostID"

// SetupWithManager registers the reconciler as "workerregistration".
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return r.SetupWithManagerNamed(mgr, "workerregistration")
}

// SetupWithManagerNamed registers the reconciler under name, for registrations that pass
// preds. Besides each registration's own changes, a host Lease's change enqueues that
// host's rows (an agent came or went), and so does this manager's agent or coordinator
// gaining or losing its Lease.
func (r *Reconciler) SetupWithManagerNamed(mgr ctrl.Manager, name string, preds ...predicate.Predicate) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &fleetv1alpha1.WorkerRegistration{}, indexHostID, func(o client.Object) []string {
		return []string{o.(*fleetv1alpha1.WorkerRegistration).Spec.Process.HostID}
	}); err != nil {
		return err
	}
	hostLeases := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.AgentNamespace && o.GetLabels()[hostagent.LabelRole] == hostagent.RoleHost
	})
	// A renewal changes nothing for the rows; a new holder, or none, does. A holder that
	// vanishes without releasing is caught by the requeue at its Lease's expiry.
	holderChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*coordinationv1.Lease)
		n, ok2 := e.ObjectNew.(*coordinationv1.Lease)
		return !ok1 || !ok2 || ptr.Deref(o.Spec.HolderIdentity, "") != ptr.Deref(n.Spec.HolderIdentity, "")
	}}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.WorkerRegistration{}, builder.WithPredicates(preds...)).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.rowsOfLeaseHost), builder.WithPredicates(hostLeases, holderChanged)).
		Watches(&fleetv1alpha1.GiteaRepository{}, handler.EnqueueRequestsFromMapFunc(r.rowsBoundTo), builder.WithPredicates(repositoryNamed)).
		Named(name).
		// Host-scoped: every manager runs it, and acts only for what its agent holds.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)})
	type changes interface {
		Changes() <-chan event.GenericEvent
	}
	if c, ok := r.Agent.(changes); ok {
		b = b.WatchesRawSource(source.Channel(c.Changes(), handler.EnqueueRequestsFromMapFunc(r.ownRows)))
	}
	if c, ok := r.Coordinator.(changes); ok {
		b = b.WatchesRawSource(source.Channel(c.Changes(), handler.EnqueueRequestsFromMapFunc(r.allRows)))
	}
	return b.Complete(r)
}

// rowsOfLeaseHost lists the registrations of the host a Lease is named after.
func (r *Reconciler) rowsOfLeaseHost(ctx context.Context, o client.Object) []reconcile.Request {
	host := o.GetAnnotations()[hostagent.AnnotationHostID]
	if host == "" {
		return nil
	}
	return r.rows(ctx, client.MatchingFields{indexHostID: host})
}

// repositoryNamed passes a GiteaRepository's creation and deletion, and a change of the
// repository it names: what a registration's binding rests on.
var repositoryNamed = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*fleetv1alpha1.GiteaRepository)
	n, ok2 := e.ObjectNew.(*fleetv1alpha1.GiteaRepository)
	return !ok1 || !ok2 || o.Spec.Owner != n.Spec.Owner || o.Spec.Name != n.Spec.Name
}}

// rowsBoundTo lists the registrations of a GiteaRepository's namespace bound to the
// repository it names: its creation, deletion or rename can change their binding.
func (r *Reconciler) rowsBoundTo(ctx context.Context, o client.Object) []reconcile.Request {
	repo, ok := o.(*fleetv1alpha1.GiteaRepository)
	if !ok {
		return nil
	}
	list := &fleetv1alpha1.WorkerRegistrationList{}
	if err := r.List(ctx, list, client.InNamespace(repo.Namespace)); err != nil {
		log.FromContext(ctx).Error(err, "Listing registrations to look at again")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if strings.EqualFold(list.Items[i].Spec.Repository, repo.Spec.Owner+"/"+repo.Spec.Name) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// ownRows lists the registrations of this manager's host, after its agent gained or
// lost the host's Lease.
func (r *Reconciler) ownRows(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.rows(ctx, client.MatchingFields{indexHostID: r.Agent.ID()})
}

// allRows lists every registration, after this manager became or stopped being the
// fleet coordinator.
func (r *Reconciler) allRows(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.rows(ctx)
}

func (r *Reconciler) rows(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &fleetv1alpha1.WorkerRegistrationList{}
	if err := r.List(ctx, list, opts...); err != nil {
		log.FromContext(ctx).Error(err, "Listing registrations to look at again")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}
