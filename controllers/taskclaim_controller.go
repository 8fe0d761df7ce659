package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// DefaultActiveRecheck bounds how long a change in Gitea (a block label, a new head, a
// moved base branch) can go unnoticed while a capability is active: Gitea sends no
// watch events, so an active claim is re-read at least this often.
const DefaultActiveRecheck = 30 * time.Second

// TaskClaimReconciler turns a worker's choice of task into one authoritative claim.
type TaskClaimReconciler struct {
	client.Client
	// APIReader reads straight from the API server: a claim decision never trusts a cache.
	APIReader client.Reader
	// Gitea publishes and reads the authoritative claim record.
	Gitea ClaimGitea
	// Verdicts resolves the worker's capability verdict.
	Verdicts VerdictChecker
	// Repository is the only repository claims may target.
	Repository string
	// TTL is the lifetime of an activated capability.
	TTL time.Duration
	// ActiveRecheck is how often an active capability is re-checked against Gitea.
	ActiveRecheck time.Duration
	Clock         clock.PassiveClock
	Recorder      events.EventRecorder

	rulesOnce sync.Mutex
	rulesDone bool
}

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims,verbs=get;list;watch;update;patch;claim-for-any
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update

// Reconcile validates, claims, or checks an active capability, depending on the phase.
func (r *TaskClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tc := &fleetv1alpha1.TaskClaim{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, tc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	switch tc.Status.Phase {
	case fleetv1alpha1.ClaimPhaseRejected, fleetv1alpha1.ClaimPhaseReleased, fleetv1alpha1.ClaimPhaseCompleted,
		fleetv1alpha1.ClaimPhaseExpired, fleetv1alpha1.ClaimPhaseRevoked:
		// final: a refused or ended claim is never retried; only its finalizer may remain.
		return ctrl.Result{}, r.dropFinalizer(ctx, tc)
	}
	if tc.DeletionTimestamp != nil {
		// Deleting a claim gives the task back: the record and the lock are released
		// before the object may go.
		if !controllerutil.ContainsFinalizer(tc, ClaimFinalizer) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.finish(ctx, tc, fleetv1alpha1.ClaimPhaseReleased, claim.TriggerRelease, nil)
	}
	if err := r.publishRules(ctx); err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case tc.Status.Phase == fleetv1alpha1.ClaimPhaseActive:
		return r.checkActive(ctx, tc)
	case tc.Spec.Release || tc.Spec.CycleComplete:
		// Given back before any capability existed: the worker simply stays neutral.
		return ctrl.Result{}, r.finish(ctx, tc, fleetv1alpha1.ClaimPhaseReleased, claim.TriggerRelease, nil)
	case tc.Status.Validation == nil:
		if err := r.validate(ctx, tc); err != nil {
			return ctrl.Result{}, err
		}
		// A pin that arrived with the claim itself would otherwise wait forever: writing
		// status raises no event (only spec changes do), so decide it right away.
		if tc.Spec.Pin != "" && tc.Status.Phase == fleetv1alpha1.ClaimPhaseValidated {
			return ctrl.Result{RequeueAfter: time.Millisecond}, nil
		}
		return ctrl.Result{}, nil
	case tc.Spec.Pin == "":
		return ctrl.Result{}, nil // waiting for the worker to repeat the pin
	default:
		return r.claim(ctx, tc)
	}
}

// publishRules publishes the versioned rule set to the repository once per process.
func (r *TaskClaimReconciler) publishRules(ctx context.Context) error {
	r.rulesOnce.Lock()
	defer r.rulesOnce.Unlock()
	if r.rulesDone {
		return nil
	}
	data, _ := claim.RuleSet()
	if _, err := r.Gitea.PublishFile(ctx, r.Repository, claim.RuleSetPath, data, "Publish task-claim rule set "+claim.RuleSetDigest()); err != nil {
		return fmt.Errorf("publishing the claim rule set: %w", err)
	}
	r.rulesDone = true
	return nil
}

// validate derives the role and pins the state, or refuses.
func (r *TaskClaimReconciler) validate(ctx context.Context, tc *fleetv1alpha1.TaskClaim) error {
	w, err := r.gather(ctx, tc)
	if err != nil {
		return err
	}
	now := r.Clock.Now()
	v, res := claim.Validate(claim.ValidateInput{
		Worker: w.worker, ClaimID: string(tc.UID), Requested: claimTarget(tc.Spec.Target), State: w.state,
		ControllerRepository: r.Repository, CapabilityVerdict: w.verdict, Now: now,
	})
	if res.Refused() {
		return r.reject(ctx, tc, res, w.worker)
	}
	tc.Status.Phase = fleetv1alpha1.ClaimPhaseValidated
	tc.Status.Validation = validationOf(v, now)
	tc.Status.Result = resultOf(res)
	setClaimCondition(tc, fleetv1alpha1.ValidatedCondition, true, fleetv1alpha1.ReasonAwaitingPin,
		"Validated as "+string(v.Role)+": copy status.validation.pin into spec.pin to claim")
	setClaimCondition(tc, fleetv1alpha1.ReadyCondition, true, fleetv1alpha1.ReasonAwaitingPin, "Waiting for spec.pin")
	if err := r.writeStatus(ctx, tc); err != nil {
		return err
	}
	claimResults.WithLabelValues(string(res.Outcome), "").Inc()
	return nil
}

// claim re-reads everything, wins the per-target lock, publishes in Gitea, reads back,
// and only then activates the capability.
func (r *TaskClaimReconciler) claim(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (ctrl.Result, error) {
	started := r.Clock.Now()
	w, err := r.gather(ctx, tc)
	if err != nil {
		return ctrl.Result{}, err
	}
	target := claimTarget(tc.Spec.Target)
	acq, res := claim.DecideClaim(claim.ClaimInput{
		Worker: w.worker, ClaimID: string(tc.UID), Spec: target, PinnedValue: tc.Spec.Pin,
		Validated: validationFrom(tc), Fresh: w.state, ControllerRepository: r.Repository,
		CapabilityVerdict: w.verdict, Now: started,
	})
	if res.Refused() {
		return ctrl.Result{}, r.reject(ctx, tc, res, w.worker)
	}

	// Move the workflow fence first: a retirement apply running now stops before its next
	// write rather than retire this worker on a stale view of the active claims.
	if err := BumpWorkflowFence(ctx, r.Client, r.APIReader, tc.Namespace); err != nil {
		return ctrl.Result{}, err
	}
	// Compare-and-swap on the lock, against the generation that was pinned.
	lease, lost, err := r.acquireLease(ctx, tc, acq)
	if err != nil {
		return ctrl.Result{}, err
	}
	if lost {
		return ctrl.Result{}, r.reject(ctx, tc, claim.ContentionLoss(claim.PredicateLeaseCASConflict, target), w.worker)
	}
	// From here on the lock (and soon Gitea) holds state for this claim: a finalizer makes
	// sure deleting the claim releases it instead of leaving it until expiry. Claims that
	// lost the lock never get one, so a lost claim is written exactly once more: its result.
	if controllerutil.AddFinalizer(tc, ClaimFinalizer) {
		if err := r.Update(ctx, tc); err != nil {
			if relErr := r.releaseLease(ctx, tc, lease); relErr != nil {
				return ctrl.Result{}, relErr
			}
			return ctrl.Result{}, fmt.Errorf("adding the claim finalizer: %w", err)
		}
	}

	// Publish the authoritative record; a lock alone is only a reservation.
	gt := giteaTarget(tc.Spec.Target)
	expires := started.Add(r.TTL).Truncate(time.Second)
	rec := giteaclaim.Record{
		ClaimID: string(tc.UID), Worker: tc.Spec.Worker, Identity: acq.Validation.Identity, Role: string(acq.Validation.Role),
		Repository: tc.Spec.Target.Repository, Kind: giteaclaim.Kind(tc.Spec.Target.Kind), Number: tc.Spec.Target.Number,
		HeadSHA: tc.Spec.Target.HeadSHA, Generation: lease.ResourceVersion, Pin: tc.Spec.Pin,
		State: giteaclaim.StateActive, ClaimedAt: started.Truncate(time.Second), ExpiresAt: expires,
	}
	if _, err := r.Gitea.Publish(ctx, gt, rec); err != nil {
		// Losing the guarded write to another claim is contention; anything else (Gitea
		// unavailable, a write that could not be verified) means nothing was published.
		result := claim.PublicationFailed(target)
		switch {
		case errors.Is(err, giteaclaim.ErrConflict):
			result = claim.ContentionLoss(claim.PredicateContentVersionConflict, target)
		case errors.Is(err, giteaclaim.ErrForeignClaim), errors.Is(err, giteaclaim.ErrNotInForce):
			result = claim.ContentionLoss(claim.PredicateClaimRecordNotOurs, target)
		}
		log.FromContext(ctx).Info("Claim publication failed; releasing the lock", "error", err.Error())
		// The write may have landed even though the call failed (an unverified write, or a
		// read-back that showed something else): never leave a record of this refused claim
		// in force. Clear refuses harmlessly when the record is not this claim's.
		r.clearOwnRecord(ctx, tc, giteaclaim.StateRevoked)
		if relErr := r.releaseLease(ctx, tc, lease); relErr != nil {
			return ctrl.Result{}, relErr
		}
		return ctrl.Result{}, r.reject(ctx, tc, result, w.worker)
	}

	// Read both halves back; only a proven claim activates.
	readBack, _, readErr := r.Gitea.Read(ctx, gt)
	held := &coordinationv1.Lease{}
	leaseErr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(lease), held)
	in := claim.ActivateInput{Validation: acq.Validation, ClaimID: string(tc.UID), LeaseName: lease.Name, Now: r.Clock.Now()}
	if leaseErr == nil {
		in.LeaseGeneration = held.ResourceVersion
		in.LeaseHolder = ptr.Deref(held.Spec.HolderIdentity, "")
	}
	if readErr == nil && readBack != nil {
		in.Record = &claim.ClaimRecord{ClaimID: readBack.ClaimID, Worker: readBack.Worker, Identity: readBack.Identity,
			ExpiresAt: readBack.ExpiresAt, State: string(readBack.State)}
	}
	capability, res := claim.Activate(in)
	if capability == nil {
		r.clearOwnRecord(ctx, tc, giteaclaim.StateRevoked)
		if relErr := r.releaseLease(ctx, tc, lease); relErr != nil {
			return ctrl.Result{}, relErr
		}
		return ctrl.Result{}, r.reject(ctx, tc, res, w.worker)
	}

	// The record is published and proven: that is the claim, whatever happens next.
	r.audit(ctx, tc, giteaclaim.EventClaimed, "", string(capability.Role), "")

	tc.Status.Phase = fleetv1alpha1.ClaimPhaseActive
	tc.Status.Role = string(capability.Role)
	tc.Status.Capability = capabilityOf(capability)
	tc.Status.Result = resultOf(res)
	setClaimCondition(tc, fleetv1alpha1.ClaimedCondition, true, fleetv1alpha1.ReasonAcquired, "The claim won the lock and is published in Gitea")
	setClaimCondition(tc, fleetv1alpha1.CapabilityActiveCondition, true, fleetv1alpha1.ReasonAcquired,
		fmt.Sprintf("Capability for %s active until %s", capability.Role, capability.ExpiresAt.UTC().Format(time.RFC3339)))
	setClaimCondition(tc, fleetv1alpha1.ReadyCondition, true, fleetv1alpha1.ReasonAcquired, "Claim acquired")
	if err := r.writeStatus(ctx, tc); err != nil {
		return ctrl.Result{}, err
	}
	// Audited once the capability is on record: a status write that fails is retried, and
	// the trail must not show an activation that never became visible.
	r.audit(ctx, tc, giteaclaim.EventActivated, "", string(capability.Role), "")
	claimResults.WithLabelValues(string(res.Outcome), "").Inc()
	claimTransitions.WithLabelValues(string(giteaclaim.EventActivated), "").Inc()
	claimLatency.Observe(r.Clock.Since(started).Seconds())
	r.Recorder.Eventf(tc, nil, "Normal", fleetv1alpha1.ReasonAcquired, "Claim", "Claimed %s as %s", gt, capability.Role)
	return ctrl.Result{RequeueAfter: r.nextCheck(capability.ExpiresAt)}, nil
}

// acquireLease writes the lock with the pinned generation as a precondition. lost is true
// when another claim won the compare-and-swap.
func (r *TaskClaimReconciler) acquireLease(ctx context.Context, tc *fleetv1alpha1.TaskClaim, acq claim.Acquisition) (*coordinationv1.Lease, bool, error) {
	now := metav1.NewMicroTime(r.Clock.Now())
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(string(tc.UID)),
		LeaseDurationSeconds: ptr.To(int32(r.TTL / time.Second)),
		AcquireTime:          &now,
		RenewTime:            &now,
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: leaseName(tc.Spec.Target),
		Labels: map[string]string{"fleet.giteatools.dev/claim-lock": "true"}}}
	if acq.AlreadyHeld {
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(lease), lease)
		return lease, false, err
	}
	if acq.ExpectedGeneration == "" {
		lease.Spec = spec
		err := r.Create(ctx, lease)
		if apierrors.IsAlreadyExists(err) {
			return nil, true, nil
		}
		return lease, false, err
	}
	lease.ResourceVersion = acq.ExpectedGeneration
	lease.Spec = spec
	err := r.Update(ctx, lease) // guarded by the pinned resourceVersion
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	return lease, false, err
}

// releaseLease frees the lock if this claim still holds it (guarded by its version).
func (r *TaskClaimReconciler) releaseLease(ctx context.Context, tc *fleetv1alpha1.TaskClaim, lease *coordinationv1.Lease) error {
	cur := &coordinationv1.Lease{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(lease), cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ptr.Deref(cur.Spec.HolderIdentity, "") != string(tc.UID) {
		return nil
	}
	cur.Spec.HolderIdentity = nil
	cur.Spec.RenewTime = nil
	cur.Spec.AcquireTime = nil
	if err := r.Update(ctx, cur); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing claim lock %s: %w", cur.Name, err)
	}
	return nil
}

// checkActive ends an active capability as soon as any trigger fires.
func (r *TaskClaimReconciler) checkActive(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (ctrl.Result, error) {
	capability := capabilityFrom(tc)
	w, err := r.gather(ctx, tc)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.Clock.Now()
	trigger, ends := claim.CheckActive(*capability, now, w.state, w.worker, tc.Spec.Release, tc.Spec.CycleComplete)
	if !ends {
		return ctrl.Result{RequeueAfter: r.nextCheck(capability.ExpiresAt)}, nil
	}
	phase := fleetv1alpha1.ClaimPhaseRevoked
	switch trigger {
	case claim.TriggerRelease:
		phase = fleetv1alpha1.ClaimPhaseReleased
	case claim.ExpiryCycleComplete:
		phase = fleetv1alpha1.ClaimPhaseCompleted
	case claim.ExpiryExpired:
		phase = fleetv1alpha1.ClaimPhaseExpired
	}
	return ctrl.Result{}, r.finish(ctx, tc, phase, trigger, w.lease)
}

// finish ends a claim: the Gitea record gets its final state, the lock is freed, the
// transition is audited, and the worker is neutral again (no capability).
//
// A claim that never showed a capability may still have reached Gitea and the lock: an
// earlier attempt can have won both and then failed to write its status (for example
// because the worker released at that very moment). Such leftovers are cleaned up too, so
// an ended claim never keeps a target locked or claimed until its expiry.
func (r *TaskClaimReconciler) finish(ctx context.Context, tc *fleetv1alpha1.TaskClaim, phase, trigger string, lease *coordinationv1.Lease) error {
	final, event, auditTrigger := giteaclaim.StateRevoked, giteaclaim.EventRevoked, giteaclaim.Trigger(trigger)
	switch phase {
	case fleetv1alpha1.ClaimPhaseReleased:
		final, event, auditTrigger = giteaclaim.StateReleased, giteaclaim.EventReleased, ""
	case fleetv1alpha1.ClaimPhaseCompleted:
		final, event, auditTrigger = giteaclaim.StateCompleted, giteaclaim.EventCompleted, ""
	case fleetv1alpha1.ClaimPhaseExpired:
		final, event, auditTrigger = giteaclaim.StateExpired, giteaclaim.EventExpired, ""
	}
	held := tc.Status.Capability != nil
	if !held && tc.Spec.Pin != "" {
		// No capability on record, but a claim was asked for: look for a record of ours.
		rec, _, err := r.Gitea.Read(ctx, giteaTarget(tc.Spec.Target))
		if err != nil && !ignorableOnEnd(err) {
			return fmt.Errorf("reading the claim record in Gitea: %w", err)
		}
		held = rec != nil && rec.ClaimID == string(tc.UID) && rec.State == giteaclaim.StateActive
	}
	if held {
		if _, err := r.Gitea.Clear(ctx, giteaTarget(tc.Spec.Target), string(tc.UID), final); err != nil && !ignorableOnEnd(err) {
			return fmt.Errorf("recording the end of the claim in Gitea: %w", err)
		}
	}
	if lease == nil && tc.Spec.Pin != "" {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: leaseName(tc.Spec.Target)}}
	}
	if lease != nil {
		if err := r.releaseLease(ctx, tc, lease); err != nil {
			return err
		}
	}
	if held {
		r.audit(ctx, tc, event, auditTrigger, tc.Status.Role, "")
		claimTransitions.WithLabelValues(string(event), string(auditTrigger)).Inc()
	}
	tc.Status.Phase = phase
	tc.Status.Capability = nil
	tc.Status.EndedReason = trigger
	tc.Status.EndedAt = ptr.To(metaTime(r.Clock.Now()))
	setClaimCondition(tc, fleetv1alpha1.CapabilityActiveCondition, false, fleetv1alpha1.ReasonEnded, "Capability ended: "+trigger)
	setClaimCondition(tc, fleetv1alpha1.ReadyCondition, true, fleetv1alpha1.ReasonEnded, "Claim ended ("+trigger+"); the worker is neutral")
	if err := r.writeStatus(ctx, tc); err != nil {
		return err
	}
	r.Recorder.Eventf(tc, nil, "Normal", phase, "Claim", "Claim ended: %s", trigger)
	return r.dropFinalizer(ctx, tc)
}

// ClaimFinalizer keeps a claim that may hold a Gitea record or a lock until they are
// released.
const ClaimFinalizer = "fleet.giteatools.dev/release-claim"

// dropFinalizer removes the claim finalizer once the claim can hold nothing any more.
func (r *TaskClaimReconciler) dropFinalizer(ctx context.Context, tc *fleetv1alpha1.TaskClaim) error {
	if !controllerutil.RemoveFinalizer(tc, ClaimFinalizer) {
		return nil
	}
	if err := r.Update(ctx, tc); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// ignorableOnEnd reports whether a Gitea failure while ending a claim means there is no
// record of this claim left to end: another claim's record, an ended one, an unreadable
// block, or a target that no longer exists. Ending must not hang on those, or a revoked
// capability would stay in status forever.
func ignorableOnEnd(err error) bool {
	return errors.Is(err, giteaclaim.ErrNotInForce) || errors.Is(err, giteaclaim.ErrMalformedRecord) ||
		errors.Is(err, giteaclaim.ErrNotFound) || errors.Is(err, giteaclaim.ErrKindMismatch)
}

// clearOwnRecord ends this claim's Gitea record, if one is in force, after a failed
// activation. It is best effort: a record that is not this claim's is left alone, and a
// failure is logged (the record then lapses at its expiry; every other claim fails closed
// on it meanwhile).
func (r *TaskClaimReconciler) clearOwnRecord(ctx context.Context, tc *fleetv1alpha1.TaskClaim, final giteaclaim.State) {
	if _, err := r.Gitea.Clear(ctx, giteaTarget(tc.Spec.Target), string(tc.UID), final); err != nil && !ignorableOnEnd(err) {
		log.FromContext(ctx).Error(err, "Ending the record of a claim that did not activate failed")
	}
}

// reject records a typed, final refusal. It is never retried.
func (r *TaskClaimReconciler) reject(ctx context.Context, tc *fleetv1alpha1.TaskClaim, res claim.Result, w claim.Worker) error {
	tc.Status.Phase = fleetv1alpha1.ClaimPhaseRejected
	tc.Status.Result = resultOf(res)
	tc.Status.Capability = nil
	msg := fmt.Sprintf("%s (%s): %s", res.FailedPredicate, res.Class, res.Message)
	setClaimCondition(tc, fleetv1alpha1.ReadyCondition, true, fleetv1alpha1.ReasonRejected, msg)
	setClaimCondition(tc, fleetv1alpha1.CapabilityActiveCondition, false, fleetv1alpha1.ReasonRejected, "No capability: the claim was refused")
	if err := r.writeStatus(ctx, tc); err != nil {
		return err
	}
	claimResults.WithLabelValues(string(res.Outcome), string(res.Class)).Inc()
	// A refusal is audited on the target when it is in this controller's repository and
	// the worker has a known identity (the transition names who was refused). Refusals of
	// targets elsewhere or of unknown workers leave Gitea untouched.
	if sameRepo(tc.Spec.Target.Repository, r.Repository) {
		identity := w.Identity
		if tc.Status.Validation != nil && tc.Status.Validation.Identity != "" {
			identity = tc.Status.Validation.Identity
		}
		if identity != "" {
			r.auditAs(ctx, tc, identity, giteaclaim.EventRejected, "", "", string(res.Class)+"/"+res.FailedPredicate)
		}
	}
	r.Recorder.Eventf(tc, nil, "Warning", fleetv1alpha1.ReasonRejected, "Claim", "Refused: %s", msg)
	return r.dropFinalizer(ctx, tc)
}

// audit posts a structured transition comment on the target. An audit failure is logged
// and counted, never turned into a different claim decision.
func (r *TaskClaimReconciler) audit(ctx context.Context, tc *fleetv1alpha1.TaskClaim, ev giteaclaim.Event, trig giteaclaim.Trigger, role, reason string) {
	identity := ""
	if tc.Status.Validation != nil {
		identity = tc.Status.Validation.Identity
	}
	r.auditAs(ctx, tc, identity, ev, trig, role, reason)
}

// auditAs is audit with the worker identity given explicitly.
func (r *TaskClaimReconciler) auditAs(ctx context.Context, tc *fleetv1alpha1.TaskClaim, identity string, ev giteaclaim.Event, trig giteaclaim.Trigger, role, reason string) {
	_, err := r.Gitea.RecordTransition(ctx, giteaTarget(tc.Spec.Target), giteaclaim.Transition{
		Event: ev, Trigger: trig, ClaimID: string(tc.UID), Worker: tc.Spec.Worker, Identity: identity,
		Role: role, Reason: reason, At: r.Clock.Now(),
	})
	if err != nil {
		log.FromContext(ctx).Error(err, "Recording the claim transition in Gitea failed", "event", ev)
		claimTransitions.WithLabelValues("audit_failed", string(ev)).Inc()
	}
}

// writeStatus writes status guarded by the resourceVersion read at the start.
func (r *TaskClaimReconciler) writeStatus(ctx context.Context, tc *fleetv1alpha1.TaskClaim) error {
	tc.Status.ObservedGeneration = tc.Generation
	if err := r.Status().Update(ctx, tc); err != nil {
		return fmt.Errorf("writing claim status: %w", err)
	}
	return nil
}

func (r *TaskClaimReconciler) nextCheck(expires time.Time) time.Duration {
	d := expires.Sub(r.Clock.Now())
	recheck := r.ActiveRecheck
	if recheck <= 0 {
		recheck = DefaultActiveRecheck
	}
	if d > recheck {
		d = recheck
	}
	if d < time.Second {
		d = time.Second
	}
	return d
}

// SetupWithManager watches claims (spec changes), their workers' registrations
// (retirement or lost liveness is ownership loss) and the claim locks.
func (r *TaskClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.TaskClaim{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&fleetv1alpha1.WorkerRegistration{}, handler.EnqueueRequestsFromMapFunc(r.claimsOfWorker)).
		Named("taskclaim").
		Complete(r)
}

func (r *TaskClaimReconciler) claimsOfWorker(ctx context.Context, o client.Object) []reconcile.Request {
	list := &fleetv1alpha1.TaskClaimList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		tc := &list.Items[i]
		if tc.Spec.Worker == o.GetName() && tc.Status.Phase == fleetv1alpha1.ClaimPhaseActive {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: tc.Namespace, Name: tc.Name}})
		}
	}
	return out
}

func setClaimCondition(tc *fleetv1alpha1.TaskClaim, typ string, status bool, reason, msg string) {
	setConditionOn(&tc.Status.Conditions, tc, typ, status, reason, msg)
}

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t) }
