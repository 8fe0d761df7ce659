// Package giteaserver holds the GiteaServer reconciler: it checks, at start and then
// periodically, that the controller reaches each server with its token and that the
// server's version is one the gateway relies on, and records the verdict (internal/forge)
// as the server's Ready condition. It also holds the Dialer every user of a GiteaServer
// makes its clients with.
//
// One writer: every manager runs the reconciler, and only the fleet coordinator checks
// and writes; a standby keeps its queue warm.
package giteaserver

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/forge"
)

// DefaultInterval is how often a Ready server is checked again; one that is not Ready is
// checked again after RetryInterval.
const (
	DefaultInterval = 5 * time.Minute
	RetryInterval   = 30 * time.Second
)

// Coordinator is this manager's candidacy for the fleet coordinator Lease.
type Coordinator interface {
	Held() bool
}

// Reconciler checks GiteaServers.
type Reconciler struct {
	Client   client.Client
	Dialer   *Dialer
	Recorder events.EventRecorder
	// Coordinator gates the writes: only its holder checks (nil: always).
	Coordinator Coordinator
	// Interval between checks of a Ready server (DefaultInterval when zero), and Retry
	// between checks of one that is not Ready (RetryInterval when zero).
	Interval, Retry time.Duration
}

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=giteaservers,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=giteaservers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// SetupWithManager registers the reconciler. A spec change is checked at once; the
// periodic checks come from the requeue after each.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.GiteaServer{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("giteaserver").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

// Reconcile checks one server and records its Ready condition when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	srv := &fleetv1alpha1.GiteaServer{}
	if err := r.Client.Get(ctx, req.NamespacedName, srv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.Coordinator != nil && !r.Coordinator.Held() {
		return ctrl.Result{RequeueAfter: Next(false, r.Interval, r.Retry)}, nil
	}
	facts, err := r.check(ctx, srv)
	if err != nil {
		return ctrl.Result{}, err
	}
	v := forge.JudgeServer(facts)
	before := srv.Status.DeepCopy()
	was := Verdict(srv)
	conditions.Set(&srv.Status.Conditions, srv.Generation, fleetv1alpha1.ReadyCondition, v.Ready, v.Reason, v.Message)
	srv.Status.ObservedGeneration = srv.Generation
	srv.Status.Version, srv.Status.Login = facts.Version, facts.Login
	if !equality.Semantic.DeepEqual(before, &srv.Status) {
		if err := r.Client.Status().Update(ctx, srv); err != nil {
			return ctrl.Result{}, err
		}
		if was == nil || was.Ready != v.Ready || was.Reason != v.Reason {
			kind := corev1.EventTypeNormal
			if !v.Ready {
				kind = corev1.EventTypeWarning
			}
			r.Recorder.Eventf(srv, nil, kind, v.Reason, "Check", "%s", v.Message)
		}
		log.FromContext(ctx).Info("Checked Gitea server", "ready", v.Ready, "reason", v.Reason, "version", facts.Version)
	}
	return ctrl.Result{RequeueAfter: Next(v.Ready, r.Interval, r.Retry)}, nil
}

// check reads what JudgeServer decides on.
func (r *Reconciler) check(ctx context.Context, srv *fleetv1alpha1.GiteaServer) (forge.ServerFacts, error) {
	c, facts, err := r.Dialer.Dial(ctx, srv)
	if err != nil || c == nil {
		return facts, err
	}
	return c.ServerFacts(ctx), nil
}

// Next is when to check again: after interval when Ready, else after retry (each its
// default when zero).
func Next(ready bool, interval, retry time.Duration) time.Duration {
	switch {
	case !ready && retry > 0:
		return retry
	case !ready:
		return RetryInterval
	case interval > 0:
		return interval
	}
	return DefaultInterval
}

// Verdict reads a server's recorded Ready condition for its current generation: nil when
// it was not checked since its spec last changed.
func Verdict(srv *fleetv1alpha1.GiteaServer) *forge.Verdict {
	c := meta.FindStatusCondition(srv.Status.Conditions, fleetv1alpha1.ReadyCondition)
	if c == nil || c.ObservedGeneration != srv.Generation {
		return nil
	}
	return &forge.Verdict{Ready: c.Status == "True", Reason: c.Reason, Message: c.Message}
}
