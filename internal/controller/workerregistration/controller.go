// Package workerregistration holds the WorkerRegistration reconciler: it computes
// status.ownershipState (live, stale, historical) of every registration and requeues
// each live one at the instant its heartbeat expires.
package workerregistration

import (
	"context"
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/fleet"
	"github.com/giteatools/fleet-controller/internal/liveness"
)

// Reconciler classifies registrations.
type Reconciler struct {
	client.Client
	// Prober probes processes of this host; nil means no probe can withdraw liveness.
	Prober   liveness.Prober
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=workerregistrations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=workerregistrations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile assesses one registration.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wr := &fleetv1alpha1.WorkerRegistration{}
	if err := r.Get(ctx, req.NamespacedName, wr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	heartbeat := apiconv.TimePtr(wr.Status.LastHeartbeatAt)
	pid := fleet.PIDUnknown
	if r.Prober != nil && wr.Status.Phase != fleetv1alpha1.PhaseRetired {
		target := apiconv.ProbeTarget(wr)
		pid = fleet.PIDState(r.Prober.Probe(ctx, target).State).Normalize()
		pid = applyBootRule(pid, target.BootID, r.Prober.Host(), heartbeat)
	}
	state, next := fleet.Classify(fleet.ClassifyInput{
		Now:             now,
		Phase:           wr.Status.Phase,
		LastHeartbeatAt: heartbeat,
		HeartbeatTTL:    ttlDuration(wr.Spec.HeartbeatTTLSeconds),
		PID:             pid,
	})
	result := requeueAt(now, next)

	before := wr.DeepCopy()
	setOwnership(wr, state, pid)
	if equality.Semantic.DeepEqual(before.Status, wr.Status) {
		return result, nil
	}
	if err := r.Status().Patch(ctx, wr, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			// The worker renewed its heartbeat meanwhile; that update triggers a fresh reconcile.
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("writing ownership state: %w", err)
	}
	if previous := before.Status.OwnershipState; previous != state {
		ownershipTransitions.WithLabelValues(previous, state).Inc()
		if previous != "" {
			r.Recorder.Eventf(wr, nil, "Normal", "OwnershipChanged", "Assess", "Ownership changed from %s to %s", previous, state)
		}
		log.FromContext(ctx).V(1).Info("Ownership changed", "from", previous, "to", state)
	}
	return result, nil
}

// applyBootRule withholds a Gone answer for a process of another boot unless its last
// heartbeat predates the start of this host's current boot: with a machine id cloned
// onto a second machine, the "other boot" may be that machine's, and the worker alive
// there. It is the rule the retirement checks apply (retirement.Host.BootTime), so that
// such a worker is not marked stale here either. Other answers pass unchanged.
func applyBootRule(pid fleet.PIDState, targetBoot string, host liveness.HostFacts, heartbeat *time.Time) fleet.PIDState {
	if pid != fleet.PIDGone || targetBoot == "" || host.BootID == "" || targetBoot == host.BootID {
		return pid
	}
	if host.BootTime.IsZero() || heartbeat == nil || !heartbeat.Before(host.BootTime) {
		return fleet.PIDUnknown
	}
	return pid
}

// maxTTLSeconds is the largest TTL, in seconds, that a time.Duration can hold (about
// 292 years). The schema bounds heartbeatTTLSeconds far below it (30 days), but
// registrations stored before that bound, or written where the schema is not enforced,
// may carry more.
const maxTTLSeconds = math.MaxInt64 / int64(time.Second)

// ttlDuration converts heartbeatTTLSeconds to a Duration without overflowing. A TTL
// too large to represent saturates at the largest Duration (the heartbeat then never
// expires in practice), which is also how the retirement checks read it; multiplying
// blindly would wrap around to a negative or small TTL and turn a live worker stale.
// A TTL below 1 gives 0, which fleet.Classify never counts as fresh.
func ttlDuration(seconds int64) time.Duration {
	switch {
	case seconds <= 0:
		return 0
	case seconds > maxTTLSeconds:
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(seconds) * time.Second
}

// requeueAt asks to be called again when a live registration's heartbeat expires.
func requeueAt(now, next time.Time) ctrl.Result {
	if next.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: next.Sub(now)}
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.WorkerRegistration{}).
		Named("workerregistration").
		Complete(r)
}
