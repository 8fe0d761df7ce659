// Package taskclaim holds the TaskClaim reconciler: it turns a worker's choice of task
// into one authoritative claim, or a typed refusal.
//
// Every decision is internal/claim's: the next step, the validation, the claim decision,
// the activation, the end of an active capability and how it is recorded. The files here
// hold I/O and ordering only: gather.go reads the world fresh, acquire.go is the claim's
// write sequence (workflow fence, lock, finalizer, publication, read-back, activation),
// end.go ends or refuses a claim, status.go records the answers.
package taskclaim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/nudge"
)

// Finalizer keeps a claim that may hold a Gitea record or a lock until they are released.
const Finalizer = fleetv1alpha1.ClaimFinalizer

// Fence is the workflow fence a claim moves before it takes its lock, so a retirement
// apply running meanwhile stops before its next write.
type Fence interface {
	Bump(ctx context.Context, namespace string) error
}

// Reconciler turns a worker's choice of task into one authoritative claim.
type Reconciler struct {
	client.Client
	// APIReader reads straight from the API server: a claim decision never trusts a cache.
	APIReader client.Reader
	// Repositories finds a claim's repository among the GiteaRepositories of its
	// namespace, and gives the clients of their servers. Nil serves none.
	Repositories Repositories
	// Gitea and Repository are the repository the manager's --gitea-url and --repository
	// flags name ("owner/name"), served in every namespace whose GiteaRepositories do not
	// name it, and the client that publishes and reads claim records there. Nil and ""
	// serve none.
	Gitea      Gitea
	Repository string
	// Verdicts resolves the worker's capability verdict.
	Verdicts VerdictChecker
	// Fence is the workflow fence.
	Fence Fence
	// TTL is the lifetime of an activated capability.
	TTL time.Duration
	// ActiveRecheck is how often an active capability is re-checked against Gitea
	// (claim.DefaultActiveRecheck when zero).
	ActiveRecheck time.Duration
	// Nudges, when set, is how the gateway of this process asks for a claim to be looked
	// at again at once, after it forwarded a write that may complete it; the recheck is
	// the backstop (package nudge).
	Nudges   *nudge.Hub
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	// MaxOpenClaims is how many of one worker's claims may be open before newer ones are
	// refused unread (claim.BeyondOpenClaimLimit); claim.DefaultMaxOpenClaims when zero.
	MaxOpenClaims int
	// MaxConcurrentReconciles is how many claims are reconciled at once (the manager's
	// default when zero). The per-target Lease compare-and-swap keeps each target's claim
	// exclusive however many run.
	MaxConcurrentReconciles int
	// Rules publishes the rule set in the flags' repository and says whether the published
	// copy is in force (one made from Gitea and Repository when nil; SetupWithManager runs
	// it with the manager). A GiteaRepository's check publishes its own.
	Rules *RulePublisher
	// SkipAssignment leaves the Gitea assignees alone. By default the guarded write that
	// publishes a claim's record also assigns the worker's identity to the issue or pull
	// request, and the one that ends the record removes it (giteaclaim.Assigning), so a
	// person sees who holds it at no extra request; the record stays the authority.
	SkipAssignment bool
	// RetryBaseDelay and RetryMaxDelay bound the exponential backoff of a failed reconcile,
	// such as ending a record while Gitea is down (DefaultRetryBaseDelay and
	// DefaultRetryMaxDelay when zero).
	RetryBaseDelay, RetryMaxDelay time.Duration

	rulesInit sync.Once
	// reads shares Gitea reads of one target among the claims deciding on it at once,
	// never handing out a read older than the request (freshReads).
	reads     *freshReads
	readsInit sync.Once
}

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims,verbs=get;list;watch;update;patch;claim-for-any
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// Reconcile validates, claims, or checks an active capability, as claim.NextStep says.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.Nudges.Look(req.NamespacedName)()
	tc := &fleetv1alpha1.TaskClaim{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, tc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	step := claim.NextStep(claim.ClaimView{Phase: tc.Status.Phase, GivenBack: tc.Spec.Release || tc.Spec.CycleComplete,
		Validated: tc.Status.Validation != nil, Pinned: tc.Spec.Pin != "",
		Finalizer:     controllerutil.ContainsFinalizer(tc, fleetv1alpha1.ClaimFinalizer),
		RecordCleared: meta.IsStatusConditionTrue(tc.Status.Conditions, fleetv1alpha1.RecordClearedCondition)})
	switch step {
	case claim.StepFinish:
		// final, but its record or lock may still be held: end them before the finalizer goes.
		// model: claim.pml "final" (StepFinish: E2-E4)
		return ctrl.Result{}, r.finish(ctx, tc)
	case claim.StepNone:
		// final: a refused or ended claim is never retried; only its finalizer may remain.
		// model: claim.pml step E4 (StepNone: only the finalizer is left)
		return ctrl.Result{}, r.dropFinalizer(ctx, tc)
	}
	if tc.DeletionTimestamp != nil {
		// Deleting a claim gives the task back: the record and the lock are released
		// before the object may go.
		if !controllerutil.ContainsFinalizer(tc, fleetv1alpha1.ClaimFinalizer) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.end(ctx, tc, claim.TriggerRelease)
	}
	switch step {
	case claim.StepCheckActive:
		return r.checkActive(ctx, tc)
	case claim.StepGiveBack:
		return ctrl.Result{}, r.end(ctx, tc, claim.TriggerRelease)
	case claim.StepValidate:
		if beyond, err := r.beyondOpenLimit(ctx, tc); beyond || err != nil {
			return ctrl.Result{}, err
		}
		if err := r.validate(ctx, tc); err != nil {
			return ctrl.Result{}, err
		}
		// A pin that arrived with the claim itself would otherwise wait forever: writing
		// status raises no event (only spec changes do), so decide it right away.
		if tc.Spec.Pin != "" && tc.Status.Phase == claim.PhaseValidated {
			return ctrl.Result{RequeueAfter: time.Millisecond}, nil
		}
		return ctrl.Result{}, nil
	case claim.StepClaim:
		return r.claim(ctx, tc)
	}
	return ctrl.Result{}, nil // StepAwaitPin: the worker repeats the pin in spec
}

// beyondOpenLimit refuses tc, before anything is read from Gitea, when more of its
// worker's claims than the limit are open ahead of it. The worker's claims come from the
// cache: the limit only bounds the cost of a flood of claims (the single-claim rule,
// decided on fresh reads, is what keeps a worker to one claim), so a cache that lags
// lets a claim through to validation at worst.
func (r *Reconciler) beyondOpenLimit(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (bool, error) {
	maxOpen := r.MaxOpenClaims
	if maxOpen == 0 {
		maxOpen = claim.DefaultMaxOpenClaims
	}
	list := &fleetv1alpha1.TaskClaimList{}
	if err := r.List(ctx, list, client.InNamespace(tc.Namespace)); err != nil {
		return false, fmt.Errorf("listing the worker's claims: %w", err)
	}
	var queued []claim.QueuedClaim
	for i := range list.Items {
		if o := &list.Items[i]; o.Spec.Worker == tc.Spec.Worker {
			queued = append(queued, queuedClaim(o))
		}
	}
	if !claim.BeyondOpenClaimLimit(queuedClaim(tc), queued, maxOpen) {
		return false, nil
	}
	return true, r.reject(ctx, tc, claim.OpenClaimLimit(apiconv.Target(tc.Spec.Target)))
}

func queuedClaim(tc *fleetv1alpha1.TaskClaim) claim.QueuedClaim {
	return claim.QueuedClaim{Name: tc.Name, Created: tc.CreationTimestamp.Time, Phase: tc.Status.Phase}
}

// validate derives the role and pins the state, or refuses.
// model: claim.pml step C1 (validate on fresh state)
func (r *Reconciler) validate(ctx context.Context, tc *fleetv1alpha1.TaskClaim) error {
	// The repository the target is in: every later step works there.
	repo, _, refused, err := r.resolve(ctx, tc, true)
	if err != nil {
		return err
	}
	if refused != nil {
		if refused.NotServed() {
			return r.refuseUnserved(ctx, tc)
		}
		return r.reject(ctx, tc, *refused)
	}
	tc.Status.Repository = repo
	// The lock as ensureLock reads or creates it is the lock's state for the decision;
	// the gather after it only reads.
	lock, err := r.ensureLock(ctx, tc)
	if err != nil {
		return err
	}
	w, err := r.gatherWith(ctx, tc, true, heldLock(lock))
	if err != nil {
		return err
	}
	now := r.Clock.Now()
	// The target's repository is one this controller serves in the namespace: resolve
	// found it.
	v, res := claim.Validate(claim.ValidateInput{
		Worker: w.worker, ClaimID: string(tc.UID), Requested: apiconv.Target(tc.Spec.Target), State: w.state,
		ControllerRepository: tc.Spec.Target.Repository, Where: keyOf(*repo), CapabilityVerdict: w.verdict, Now: now,
		OtherClaims: w.others,
	})
	if res.Refused() {
		return r.reject(ctx, tc, res)
	}
	// model: claim.pml step C2 (pin the Lease generation, status guarded by resourceVersion)
	markValidated(tc, v, res, now)
	if err := r.writeStatus(ctx, tc); err != nil {
		return err
	}
	server, repository := repositoryLabels(tc)
	claimResults.WithLabelValues(string(res.Outcome), "", server, repository).Inc()
	return nil
}

// refuseUnserved refuses a validation in a repository this controller does not serve in
// tc's namespace with the first rule it breaks in the rules' order: a worker that is not
// registered, not live, denied, or bound to another repository is refused for that, as
// in a served repository, and otherwise the repository is not served. Nothing is read
// from Gitea (there is no server to read from) and no lock is made.
func (r *Reconciler) refuseUnserved(ctx context.Context, tc *fleetv1alpha1.TaskClaim) error {
	w := world{worker: claim.Worker{Name: tc.Spec.Worker}}
	g, gctx := errgroup.WithContext(ctx)
	r.readWorker(gctx, g, tc, &w, false)
	if err := g.Wait(); err != nil {
		return err
	}
	return r.reject(ctx, tc, claim.ValidateUnserved(claim.ValidateInput{Worker: w.worker, ClaimID: string(tc.UID),
		Requested: apiconv.Target(tc.Spec.Target), CapabilityVerdict: w.verdict, Now: r.Clock.Now()}))
}

// checkActive ends an active capability as soon as any trigger fires.
// model: claim.pml step C11 (end on release, expiry or ownership loss)
func (r *Reconciler) checkActive(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (ctrl.Result, error) {
	capability := apiconv.Capability(tc)
	if trigger, ends := claim.EndsUnread(tc.Spec.Release, tc.Spec.CycleComplete, capability.ExpiresAt, r.Clock.Now()); ends {
		return ctrl.Result{}, r.end(ctx, tc, trigger)
	}
	// A capability lives no longer than its repository stays fit for claims: a server
	// that went down or refuses the token, a GiteaRepository deleted or replaced, ends it
	// (fail closed; the record is ended once the server answers again).
	if _, gone, err := r.stillThere(ctx, tc, false); err != nil || gone != nil {
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.end(ctx, tc, claim.TriggerOwnershipLoss)
	}
	w, err := r.gather(ctx, tc)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.Clock.Now()
	trigger, ends := claim.CheckActive(claim.ActiveInput{Capability: *capability, Now: now, Fresh: w.state, Worker: w.worker,
		Verdict: w.verdict, Released: tc.Spec.Release, CycleComplete: tc.Spec.CycleComplete})
	if !ends {
		return ctrl.Result{RequeueAfter: claim.RecheckAfter(capability.ExpiresAt, now, r.ActiveRecheck)}, nil
	}
	return ctrl.Result{}, r.end(ctx, tc, trigger)
}

// writeStatus writes status guarded by the resourceVersion read at the start.
func (r *Reconciler) writeStatus(ctx context.Context, tc *fleetv1alpha1.TaskClaim) error {
	tc.Status.ObservedGeneration = tc.Generation
	if err := r.Status().Update(ctx, tc); err != nil {
		return fmt.Errorf("writing claim status: %w", err)
	}
	return nil
}

// Defaults of the reconcile retry backoff.
const (
	DefaultRetryBaseDelay = time.Second
	DefaultRetryMaxDelay  = 2 * time.Minute
)

// SetupWithManager watches claims (spec changes and deletion), their workers'
// registrations when something that matters changed (phase, ownership state, spec,
// deletion; a heartbeat alone does not, so it costs no Gitea request), and the lock Leases
// the claims own (a lock taken away is ownership loss), and takes the gateway's nudges
// (Nudges) after a completing write. Failed reconciles back off exponentially from
// RetryBaseDelay up to RetryMaxDelay.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Gitea != nil {
		if err := mgr.Add(r.rulePublisher()); err != nil {
			return fmt.Errorf("adding the rule set publisher: %w", err)
		}
	}
	base, maxDelay := r.RetryBaseDelay, r.RetryMaxDelay
	if base <= 0 {
		base = DefaultRetryBaseDelay
	}
	if maxDelay <= 0 {
		maxDelay = DefaultRetryMaxDelay
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.TaskClaim{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&fleetv1alpha1.WorkerRegistration{}, handler.EnqueueRequestsFromMapFunc(r.claimsOfWorker),
			builder.WithPredicates(registrationChangeMatters())).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &fleetv1alpha1.TaskClaim{}),
			builder.WithPredicates(lockChangeMatters()))
	if r.Repositories != nil {
		b = b.Watches(&fleetv1alpha1.GiteaRepository{}, handler.EnqueueRequestsFromMapFunc(r.activeClaimsIn))
	}
	if r.Nudges != nil {
		b = b.WatchesRawSource(r.Nudges)
	}
	return b.WithOptions(controller.Options{
		MaxConcurrentReconciles: r.MaxConcurrentReconciles,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](base, maxDelay),
	}).
		Named("taskclaim").
		Complete(r)
}

// activeClaimsIn maps a GiteaRepository to the active claims of its namespace on a
// repository of its owner/name, so a repository that stops being fit for claims ends
// them at once rather than at their next recheck.
func (r *Reconciler) activeClaimsIn(ctx context.Context, o client.Object) []reconcile.Request {
	repo, ok := o.(*fleetv1alpha1.GiteaRepository)
	if !ok {
		return nil
	}
	list := &fleetv1alpha1.TaskClaimList{}
	if err := r.List(ctx, list, client.InNamespace(repo.Namespace)); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		tc := &list.Items[i]
		if tc.Status.Phase == claim.PhaseActive && strings.EqualFold(tc.Spec.Target.Repository, repo.Spec.Owner+"/"+repo.Spec.Name) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tc)})
		}
	}
	return out
}

// claimsOfWorker maps a registration to its worker's active claims.
func (r *Reconciler) claimsOfWorker(ctx context.Context, o client.Object) []reconcile.Request {
	list := &fleetv1alpha1.TaskClaimList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		tc := &list.Items[i]
		if tc.Spec.Worker == o.GetName() && tc.Status.Phase == claim.PhaseActive {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tc)})
		}
	}
	return out
}
