package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/fleet"
	"github.com/giteatools/fleet-controller/internal/liveness"
)

// WorkerRegistrationReconciler computes status.ownershipState of every registration and
// requeues each live one at the instant its heartbeat expires.
type WorkerRegistrationReconciler struct {
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
func (r *WorkerRegistrationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wr := &fleetv1alpha1.WorkerRegistration{}
	if err := r.Get(ctx, req.NamespacedName, wr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := log.FromContext(ctx).WithValues("WorkerRegistration", client.ObjectKeyFromObject(wr))
	now := r.Clock.Now()

	pid := fleet.PIDUnknown
	if r.Prober != nil && wr.Status.Phase != fleetv1alpha1.PhaseRetired {
		pid = fleet.PIDState(r.Prober.Probe(ctx, probeTarget(wr)).State).Normalize()
	}
	state, next := fleet.Classify(fleet.ClassifyInput{
		Now:             now,
		Phase:           wr.Status.Phase,
		LastHeartbeatAt: timePtr(wr.Status.LastHeartbeatAt),
		HeartbeatTTL:    time.Duration(wr.Spec.HeartbeatTTLSeconds) * time.Second,
		PID:             pid,
	})

	before := wr.DeepCopy()
	previous := wr.Status.OwnershipState
	if wr.Status.Phase == "" {
		wr.Status.Phase = fleetv1alpha1.PhaseActive
	}
	wr.Status.OwnershipState = state
	wr.Status.ObservedGeneration = wr.Generation
	meta.SetStatusCondition(&wr.Status.Conditions, metav1.Condition{
		Type:               fleetv1alpha1.ReadyCondition,
		Status:             metav1.ConditionTrue,
		Reason:             fleetv1alpha1.ReasonReconciled,
		Message:            fmt.Sprintf("Ownership is %s (process probe: %s)", state, pid),
		ObservedGeneration: wr.Generation,
	})
	if equality.Semantic.DeepEqual(before.Status, wr.Status) {
		return r.requeue(now, next), nil
	}
	if err := r.Status().Patch(ctx, wr, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			// The worker renewed its heartbeat meanwhile; that update triggers a fresh reconcile.
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("writing ownership state: %w", err)
	}
	if previous != state {
		ownershipTransitions.WithLabelValues(previous, state).Inc()
		if previous != "" {
			r.Recorder.Eventf(wr, nil, "Normal", "OwnershipChanged", "Assess", "Ownership changed from %s to %s", previous, state)
		}
		log.V(1).Info("Ownership changed", "from", previous, "to", state)
	}
	return r.requeue(now, next), nil
}

// requeue asks to be called again when a live registration's heartbeat expires.
func (r *WorkerRegistrationReconciler) requeue(now, next time.Time) ctrl.Result {
	if next.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: next.Sub(now)}
}

// SetupWithManager registers the reconciler.
func (r *WorkerRegistrationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.WorkerRegistration{}).
		Named("workerregistration").
		Complete(r)
}

func probeTarget(wr *fleetv1alpha1.WorkerRegistration) liveness.Target {
	p := wr.Spec.Process
	return liveness.Target{HostID: p.HostID, BootID: p.BootID, PID: p.PID, StartTime: p.StartTime}
}

func timePtr(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}
