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

// lockLabel marks the per-target lock Leases.
const lockLabel = "fleet.giteatools.dev/claim-lock"

// claim re-reads everything, wins the per-target lock, publishes in Gitea, reads back,
// and only then activates the capability. Each step that fails after the lock was won
// gives the lock (and any record of this claim) back before the refusal is written.
func (r *Reconciler) claim(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (ctrl.Result, error) {
	started := r.Clock.Now()
	w, err := r.gather(ctx, tc)
	if err != nil {
		return ctrl.Result{}, err
	}
	target := apiconv.Target(tc.Spec.Target)
	acq, res := claim.DecideClaim(claim.ClaimInput{
		Worker: w.worker, ClaimID: string(tc.UID), Spec: target, PinnedValue: tc.Spec.Pin,
		Validated: apiconv.Validation(tc), Fresh: w.state, ControllerRepository: r.Repository,
		CapabilityVerdict: w.verdict, Now: started, OtherClaims: w.others,
	})
	if res.Refused() {
		countContention(res)
		return ctrl.Result{}, r.reject(ctx, tc, res, w.worker)
	}
	// Move the workflow fence first: a retirement apply running now stops before its next
	// write rather than retire this worker on a stale view of the active claims.
	if err := r.Fence.Bump(ctx, tc.Namespace); err != nil {
		return ctrl.Result{}, err
	}
	lease, lost, err := r.lock(ctx, tc, acq)
	if err != nil {
		return ctrl.Result{}, err
	}
	if lost {
		res := claim.ContentionLoss(claim.PredicateLeaseCASConflict, target)
		countContention(res)
		return ctrl.Result{}, r.reject(ctx, tc, res, w.worker)
	}
	// The finalizer now shows this claim as acquiring. Look for another claim of the same
	// worker or identity once more: of two racing claims at least one sees the other
	// here, so at most one goes on to publish.
	others, err := r.otherClaims(ctx, tc, w.worker)
	if err != nil {
		return ctrl.Result{}, err // retried: the lock is already this claim's
	}
	if others > 0 {
		return ctrl.Result{}, r.giveUp(ctx, tc, lease, claim.HoldsOtherClaim(target), w.worker)
	}
	// A lock alone is only a reservation: publish the authoritative record, written over
	// the issue exactly as this claim's own re-read saw it (its content_version guards the
	// write, so anything that changed the body since loses it for this claim). Gitea's
	// answer to that write is the read-back (giteaclaim.Client.Publish says why).
	published, err := r.Gitea.Publish(ctx, target, r.record(tc, acq, lease, started), giteaclaim.Over(w.state))
	if err != nil {
		log.FromContext(ctx).Info("Claim publication failed; releasing the lock", "error", err.Error())
		res := claim.PublicationRefusal(giteaclaim.PublishFailureOf(err), target)
		countContention(res)
		return ctrl.Result{}, r.giveUp(ctx, tc, lease, res, w.worker)
	}
	capability, res := r.readBack(ctx, tc, acq, lease, published)
	if capability == nil {
		countContention(res)
		return ctrl.Result{}, r.giveUp(ctx, tc, lease, res, w.worker)
	}
	if err := r.activate(ctx, tc, capability, res, started); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: claim.RecheckAfter(capability.ExpiresAt, r.Clock.Now(), r.ActiveRecheck)}, nil
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
	if controllerutil.AddFinalizer(tc, Finalizer) {
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
		Name: claim.LockName(apiconv.Target(tc.Spec.Target)), Labels: map[string]string{lockLabel: "true"}}}
	if acq.AlreadyHeld {
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(lease), lease)
		return lease, false, err
	}
	lease.ResourceVersion = acq.ExpectedGeneration // "" creates: the lock must not exist yet
	lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: fleetv1alpha1.GroupVersion.String(), Kind: "TaskClaim", Name: tc.Name, UID: tc.UID}}
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
		err = r.Update(ctx, lease) // guarded by the pinned resourceVersion
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	return lease, false, err
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

// activate records the won claim and audits it once. The record is published and
// proven: that is the claim, whatever happens next. The one audit comment is posted once
// the capability is on record, so a status write that fails (and is retried) never
// leaves a trail showing a claim that never became visible, or two of them.
func (r *Reconciler) activate(ctx context.Context, tc *fleetv1alpha1.TaskClaim, c *claim.Capability, res claim.Result, started time.Time) error {
	markActive(tc, c, res)
	if err := r.writeStatus(ctx, tc); err != nil {
		return err
	}
	r.audit(ctx, tc, claim.EventClaimed, string(c.Role))
	claimResults.WithLabelValues(string(res.Outcome), "").Inc()
	claimTransitions.WithLabelValues(string(claim.EventActivated), "").Inc()
	claimLatency.Observe(r.Clock.Since(started).Seconds())
	r.Recorder.Eventf(tc, nil, "Normal", fleetv1alpha1.ReasonAcquired, "Claim", "Claimed %s as %s", apiconv.Target(tc.Spec.Target), c.Role)
	return nil
}

// giveUp refuses a claim that won the lock but did not activate. The write may have landed
// even though the call failed (an unverified write, or a read-back that showed something
// else): no record of this refused claim is left in force, and the lock is released.
func (r *Reconciler) giveUp(ctx context.Context, tc *fleetv1alpha1.TaskClaim, lease *coordinationv1.Lease, res claim.Result, w claim.Worker) error {
	r.clearOwnRecord(ctx, tc, claim.RecordStateRevoked)
	if err := r.releaseLease(ctx, tc, lease); err != nil {
		return err
	}
	return r.reject(ctx, tc, res, w)
}
