package taskclaim

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// lockLabels are the labels of every claim lock.
func lockLabels() map[string]string { return map[string]string{fleetv1alpha1.ClaimLockLabel: "true"} }

// claim runs the claim step in one direction: reserve, re-read, decide, publish,
// activate. Reserve (takeLock) reads the lock and refuses a claim it shows lost, moves
// the workflow fence, takes the lock by compare-and-swap and then the finalizer. The
// re-read (gatherWith) writes nothing: the worker, the target in Gitea, the capability
// verdict and the worker's other claims, at once. Listed after the finalizer made this
// claim visible, at a list at least as new as that write, the other claims show an
// earlier racing claim of the same worker, so of two at most one goes on to publish.
// The lock's state as read before the swap is the lock's state for the decision. A claim
// the decision refuses holds the lock and the finalizer, and gives both back (reject,
// finish), as does every step that fails after the lock was won.
// model: claim.pml step C3 (revalidate; the Lease must still be at the pinned generation)
func (r *Reconciler) claim(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (ctrl.Result, error) {
	started := r.Clock.Now()
	target := apiconv.Target(tc.Spec.Target)
	// The repository must still be the one the validation read, and fit for claims.
	limit, moved, err := r.stillThere(ctx, tc, true)
	if err != nil || moved != nil {
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.reject(ctx, tc, *moved)
	}
	gitea, err := r.giteaOf(ctx, tc)
	if err != nil {
		return ctrl.Result{}, err
	}
	read, lease, lost, err := r.takeLock(ctx, tc, started)
	if lost != nil {
		countContention(*lost)
		return ctrl.Result{}, r.reject(ctx, tc, *lost)
	}
	if err != nil {
		return ctrl.Result{}, err // a lock already won is this claim's on the retry
	}
	w, err := r.gatherWith(ctx, tc, true, heldLock(read))
	if err != nil {
		return ctrl.Result{}, err
	}
	acq, res := claim.DecideClaim(claim.ClaimInput{
		Worker: w.worker, ClaimID: string(tc.UID), Spec: target, PinnedValue: tc.Spec.Pin,
		Validated: apiconv.Validation(tc), Fresh: w.state, ControllerRepository: tc.Spec.Target.Repository,
		Where: keyOf(repositoryOf(tc)), CapabilityVerdict: w.verdict, Now: started, OtherClaims: w.others,
	})
	if res.Refused() {
		countContention(res)
		return ctrl.Result{}, r.reject(ctx, tc, res)
	}
	// A repository capped at limit active claims: this claim publishes only holding one
	// of its slots (slots.go). Released with the lock when the claim ends.
	if limit > 0 {
		full, err := r.takeSlot(ctx, tc, limit)
		if err != nil {
			return ctrl.Result{}, err // the lock (and a slot already taken) are this claim's on the retry
		}
		if full {
			res := claim.RepositoryAtLimit(target)
			countContention(res)
			return ctrl.Result{}, r.reject(ctx, tc, res)
		}
	}
	// A record of this very claim already in force means an earlier attempt published it
	// (and audited it) and then failed to record the activation: publishing again is a
	// read-back, and the "claimed" comment is not posted twice.
	republished := w.state.ClaimRecord != nil && w.state.ClaimRecord.ClaimID == string(tc.UID) &&
		w.state.ClaimRecord.State == claim.RecordStateActive
	// A lock alone is only a reservation: publish the authoritative record, written over
	// the issue exactly as this claim's own re-read saw it (its content_version guards the
	// write, so anything that changed the body since loses it for this claim). Gitea's
	// answer to that write is the read-back (giteaclaim.Client.Publish says why). The same
	// guarded write assigns the worker's identity, so people see who holds the target.
	// Every refusal from here on goes through finish (the claim holds the finalizer now):
	// whatever may have landed in Gitea is ended and the lock released before the
	// finalizer goes.
	// model: claim.pml steps C6-C8 (Publish: content_version-guarded PATCH, its answer verified)
	published, err := gitea.Publish(ctx, target, r.record(tc, acq, lease, started), r.publishOptions(giteaclaim.Over(w.state))...)
	if err != nil {
		log.FromContext(ctx).Info("Claim publication failed; releasing the lock", "error", err.Error())
		res := claim.PublicationRefusal(giteaclaim.PublishFailureOf(err), target)
		countContention(res)
		return ctrl.Result{}, r.reject(ctx, tc, res)
	}
	// model: claim.pml step C9 (read back record and Lease)
	capability, res := r.readBack(ctx, tc, acq, lease, published)
	if capability == nil {
		countContention(res)
		return ctrl.Result{}, r.reject(ctx, tc, res)
	}
	// model: claim.pml step C10 (activate, status guarded by resourceVersion)
	if err := r.activate(ctx, tc, capability, res, started, republished); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: claim.RecheckAfter(capability.ExpiresAt, r.Clock.Now(), r.ActiveRecheck)}, nil
}

// takeLock reads the claim's lock and, unless that read already shows the claim lost
// (claim.PrecheckClaim), moves the workflow fence and takes the lock by compare-and-swap
// at the pinned generation (claim.LockPlan), then the finalizer, written through tc. It
// returns the lock as read before the swap, the lock as taken, and the refusal of a claim
// that lost: to a swap before its own, or in its own.
//
// The fence moves before the lock does: a retirement apply running now stops before its
// next write rather than retire this worker on a stale view of the active claims. Moving
// it for a claim the full decision then refuses only makes such an apply stop early.
// model: apply.pml (the claim moves the workflow fence before its Lease)
func (r *Reconciler) takeLock(ctx context.Context, tc *fleetv1alpha1.TaskClaim, now time.Time) (
	read, taken *coordinationv1.Lease, lost *claim.Result, err error) {
	read, err = r.readLock(ctx, tc)
	if err != nil {
		return nil, nil, nil, err
	}
	in := claim.ClaimInput{ClaimID: string(tc.UID), Spec: apiconv.Target(tc.Spec.Target), PinnedValue: tc.Spec.Pin,
		Validated: apiconv.Validation(tc), Now: now}
	if read != nil {
		in.Fresh.LeaseGeneration, in.Fresh.LeaseHolder, in.Fresh.LeaseExpiresAt = lockState(read)
	}
	if res, refused := claim.PrecheckClaim(in); refused {
		return read, nil, &res, nil
	}
	if err := r.Fence.Bump(ctx, tc.Namespace); err != nil {
		return read, nil, nil, err
	}
	taken, swapLost, err := r.lock(ctx, tc, claim.LockPlan(in))
	if swapLost {
		res := claim.ContentionLoss(claim.PredicateLeaseCASConflict, in.Spec)
		return read, nil, &res, nil
	}
	return read, taken, nil, err
}

// lock takes the per-target lock by compare-and-swap against the pinned generation, and
// then the finalizer: from here on the lock (and soon Gitea) holds state for this claim,
// so deleting the claim must release it. Claims that lost the lock never get a finalizer,
// so a lost claim is written exactly once more: its result. lost is true when another
// claim won the swap.
func (r *Reconciler) lock(ctx context.Context, tc *fleetv1alpha1.TaskClaim, acq claim.Acquisition) (*coordinationv1.Lease, bool, error) {
	lease, lost, err := r.acquireLease(ctx, tc, acq)
	if err != nil || lost {
		return nil, lost, err
	}
	// model: claim.pml step C5 (finalizer; on failure the Lease is given back)
	if controllerutil.AddFinalizer(tc, fleetv1alpha1.ClaimFinalizer) {
		if err := r.Update(ctx, tc); err != nil {
			if relErr := r.releaseLease(ctx, tc, lease); relErr != nil {
				return nil, false, relErr
			}
			return nil, false, fmt.Errorf("adding the claim finalizer: %w", err)
		}
	}
	return lease, false, nil
}

// acquireLease writes the lock with the pinned generation as a precondition. While held,
// the lock is owned by the claim that holds it (releaseLease drops the reference): a
// holder removed without its finalizer does not leave the target locked for good.
func (r *Reconciler) acquireLease(ctx context.Context, tc *fleetv1alpha1.TaskClaim, acq claim.Acquisition) (*coordinationv1.Lease, bool, error) {
	now := metav1.NewMicroTime(r.Clock.Now())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace,
		Name: repositoryOf(tc).LockName, Labels: lockLabels()}}
	if acq.AlreadyHeld {
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(lease), lease)
		return lease, false, err
	}
	lease.ResourceVersion = acq.ExpectedGeneration // "" creates: the lock must not exist yet
	lease.OwnerReferences = ownedBy(tc)
	lease.Spec = coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(string(tc.UID)),
		LeaseDurationSeconds: ptr.To(int32(r.TTL / time.Second)),
		AcquireTime:          &now,
		RenewTime:            &now,
	}
	var err error
	if acq.ExpectedGeneration == "" {
		err = r.Create(ctx, lease)
	} else {
		// model: claim.pml step C4 (Lease compare-and-swap on resourceVersion, owned by the claim)
		err = r.Update(ctx, lease) // guarded by the pinned resourceVersion
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	return lease, false, err
}

// kindTaskClaim is the kind a lock's or a slot's ownerReference names.
const kindTaskClaim = "TaskClaim"

// ownedBy is the ownerReference of a lock or a slot tc holds: the sweep keeps what an
// existing claim owns.
func ownedBy(tc *fleetv1alpha1.TaskClaim) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: fleetv1alpha1.GroupVersion.String(), Kind: kindTaskClaim, Name: tc.Name, UID: tc.UID}}
}

// record is the authoritative claim record this claim publishes.
func (r *Reconciler) record(tc *fleetv1alpha1.TaskClaim, acq claim.Acquisition, lease *coordinationv1.Lease, started time.Time) claim.Record {
	t := tc.Spec.Target
	return claim.Record{
		ClaimID: string(tc.UID), Worker: tc.Spec.Worker, Identity: acq.Validation.Identity, Role: string(acq.Validation.Role),
		Repository: t.Repository, Kind: claim.Kind(t.Kind), Number: t.Number, HeadSHA: t.HeadSHA,
		Generation: lease.ResourceVersion, Pin: tc.Spec.Pin, State: claim.RecordStateActive,
		ClaimedAt: started.Truncate(time.Second), ExpiresAt: started.Add(r.TTL).Truncate(time.Second),
		RuleSet: claim.RuleSetDigest(),
	}
}

// readBack proves both halves of the claim: the record as Gitea answered the guarded
// write (published), and the Lease read back from the API server. Only a proven claim
// activates.
func (r *Reconciler) readBack(ctx context.Context, tc *fleetv1alpha1.TaskClaim, acq claim.Acquisition, lease *coordinationv1.Lease,
	published giteaclaim.Published) (*claim.Capability, claim.Result) {
	held := &coordinationv1.Lease{}
	leaseErr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(lease), held)
	rec := published.Record
	in := claim.ActivateInput{Validation: acq.Validation, ClaimID: string(tc.UID), LeaseName: lease.Name, Now: r.Clock.Now(), Record: &rec}
	if leaseErr == nil {
		in.LeaseGeneration, in.LeaseHolder, _ = lockState(held)
	}
	return claim.Activate(in)
}

// activate records and audits the won claim. The record is published and proven: that
// is the claim, whatever happens next, so it is audited now, with one "claimed" comment
// (unless an earlier attempt already published and audited this very record and then
// failed to write the status). The status write goes first, so the worker sees its
// capability without waiting for the comment, and the comment is posted exactly once
// whether or not the status write succeeds.
func (r *Reconciler) activate(ctx context.Context, tc *fleetv1alpha1.TaskClaim, c *claim.Capability, res claim.Result, started time.Time, republished bool) error {
	// The audit reads the claim's identity and id as validated: it gets its own copy, as
	// the status write changes tc.
	snapshot := tc.DeepCopy()
	server, repository := repositoryLabels(tc)
	markActive(tc, c, res)
	err := r.writeStatus(ctx, tc)
	if !republished {
		r.audit(ctx, snapshot, claim.EventClaimed, string(c.Role))
		claimTransitions.WithLabelValues(string(claim.EventClaimed), "", server, repository).Inc()
	}
	if err != nil {
		return err
	}
	claimResults.WithLabelValues(string(res.Outcome), "", server, repository).Inc()
	claimLatency.Observe(r.Clock.Since(started).Seconds())
	r.Recorder.Eventf(tc, nil, "Normal", fleetv1alpha1.ReasonAcquired, "Claim", "Claimed %s as %s", apiconv.Target(tc.Spec.Target), c.Role)
	return nil
}

// ensureLock creates the target's lock, free and owned by nobody, if it does not exist
// yet, so every validation pins a real generation (a resourceVersion, never reused) and
// no pin can ever mean "no lock". That is what makes deleting a lock safe: a pin of a
// deleted lock's generation can match no later lock. The lock is the one of the
// repository resolve recorded in tc's status (claim.LockName). It returns the lock as
// just read from the API server, or as the API server answered its creation.
func (r *Reconciler) ensureLock(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (*coordinationv1.Lease, error) {
	key := client.ObjectKey{Namespace: tc.Namespace, Name: repositoryOf(tc).LockName}
	cur := &coordinationv1.Lease{}
	err := r.APIReader.Get(ctx, key, cur)
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return nil, fmt.Errorf("reading claim lock: %w", err)
		}
		return cur, nil
	}
	now := metav1.NewMicroTime(r.Clock.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: lockLabels()},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &now, LeaseDurationSeconds: ptr.To(int32(r.TTL / time.Second))},
	}
	switch err := r.Create(ctx, lease); {
	case err == nil:
		return lease, nil
	case apierrors.IsAlreadyExists(err):
		// Another validation created it a moment ago: read what it made.
		return r.readLock(ctx, tc)
	default:
		return nil, fmt.Errorf("creating claim lock %s: %w", key.Name, err)
	}
}

// publishOptions are the options of the claim's guarded Gitea writes: the worker's
// identity is assigned with the record and unassigned with its end, unless
// SkipAssignment.
func (r *Reconciler) publishOptions(opts ...giteaclaim.PublishOption) []giteaclaim.PublishOption {
	if !r.SkipAssignment {
		opts = append(opts, giteaclaim.Assigning())
	}
	return opts
}
