// Package workerregistration holds the WorkerRegistration reconciler: it computes
// status.ownershipState (live, stale, historical) of every registration and requeues
// each live one at the instant its heartbeat expires.
package workerregistration

import (
	"context"
	"fmt"
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
	pid := fleet.PIDUnknown
	if r.Prober != nil && wr.Status.Phase != fleetv1alpha1.PhaseRetired {
		pid = fleet.PIDState(r.Prober.Probe(ctx, apiconv.ProbeTarget(wr)).State).Normalize()
	}
	state, next := fleet.Classify(fleet.ClassifyInput{
		Now:             now,
		Phase:           wr.Status.Phase,
		LastHeartbeatAt: apiconv.TimePtr(wr.Status.LastHeartbeatAt),
		HeartbeatTTL:    time.Duration(wr.Spec.HeartbeatTTLSeconds) * time.Second,
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
