package taskclaim

import (
	"context"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// end ends a claim for trigger. The capability goes first, in one status write: the
// worker is neutral again at once, even while Gitea is down. Then finish ends the Gitea
// record, frees the lock and audits; until that succeeded the claim keeps its finalizer
// and shows RecordCleared=False.
//
// A claim that never showed a capability may still have reached Gitea and the lock: an
// earlier attempt can have won both and then failed to write its status (for example
// because the worker released at that very moment). finish cleans such leftovers up too.
func (r *Reconciler) end(ctx context.Context, tc *fleetv1alpha1.TaskClaim, trigger claim.Trigger) error {
	phase := claim.EndPhase(trigger)
	// model: claim.pml step E1 (status stops showing the capability, first)
	markEnded(tc, phase, trigger, r.Clock.Now())
	holds := controllerutil.ContainsFinalizer(tc, fleetv1alpha1.ClaimFinalizer)
	if holds {
		markClearPending(tc)
	}
	if err := r.writeStatus(ctx, tc); err != nil {
		return err
	}
	r.Recorder.Eventf(tc, nil, "Normal", phase, "Claim", "Claim ended: %s", trigger)
	if !holds {
		return nil
	}
	return r.finish(ctx, tc)
}

// reject records a typed, final refusal. It is never retried. A refusal is a Kubernetes
// Event and a metric, never a Gitea comment: only a claim whose record reached Gitea
// leaves a trace there (finish audits the end of that record).
// model: claim.pml step R1 (final refusal; only a claim holding the finalizer is written again, by finish: E2-E4)
func (r *Reconciler) reject(ctx context.Context, tc *fleetv1alpha1.TaskClaim, res claim.Result) error {
	markRejected(tc, res)
	holds := controllerutil.ContainsFinalizer(tc, fleetv1alpha1.ClaimFinalizer)
	if holds {
		markClearPending(tc)
	}
	if err := r.writeStatus(ctx, tc); err != nil {
		return err
	}
	server, repository := repositoryLabels(tc)
	claimResults.WithLabelValues(string(res.Outcome), string(res.Class), server, repository).Inc()
	r.Recorder.Eventf(tc, nil, "Warning", fleetv1alpha1.ReasonRejected, "Claim", "Refused: %s", rejectionMessage(res))
	if !holds {
		return nil
	}
	return r.finish(ctx, tc)
}

// finish ends what a final claim that won its lock may still hold, in this order: its
// Gitea record (rewritten in its final state; a record that is not this claim's any more
// is left alone), its assignment, and its lock. Only then is RecordCleared set True, the
// end audited (one comment, for a claim that was active or whose record was found), and
// the finalizer dropped. When Gitea fails, RecordCleared=False/GiteaUnavailable carries
// the error and the error is returned, so the workqueue retries with its capped
// exponential backoff (Reconciler.RetryMaxDelay); the finalizer holds meanwhile.
func (r *Reconciler) finish(ctx context.Context, tc *fleetv1alpha1.TaskClaim) error {
	if !controllerutil.ContainsFinalizer(tc, fleetv1alpha1.ClaimFinalizer) {
		return nil
	}
	target := apiconv.Target(tc.Spec.Target)
	ending := claim.EndingFor(tc.Status.Phase, claim.Trigger(tc.Status.EndedReason))
	ours := true
	gitea, err := r.giteaOf(ctx, tc)
	if err != nil {
		return r.clearFailed(ctx, tc, err)
	}
	// The same guarded write that ends the record removes the claim's assignment.
	// model: claim.pml step E2 (record to its final state)
	if _, err := gitea.Clear(ctx, target, string(tc.UID), ending.Record, r.publishOptions()...); err != nil {
		if !giteaclaim.NothingToEnd(err) {
			return r.clearFailed(ctx, tc, fmt.Errorf("ending the claim record in Gitea: %w", err))
		}
		ours = false
	}
	wasActive := meta.IsStatusConditionTrue(tc.Status.Conditions, fleetv1alpha1.ClaimedCondition)
	// A record that is not this claim's any more (rewritten by someone) was not cleared by
	// this claim, so an assignment the claim made may still stand: remove it apart.
	if identity := boundIdentity(tc); identity != "" && !ours && wasActive && !r.SkipAssignment {
		if err := gitea.Unassign(ctx, target, identity); err != nil && !giteaclaim.Unreadable(err) {
			return r.clearFailed(ctx, tc, fmt.Errorf("removing the claim's assignment in Gitea: %w", err))
		}
	}
	// model: claim.pml step E3 (free the Lease)
	if err := r.releaseLease(ctx, tc, lockOf(tc)); err != nil {
		return err
	}
	if err := r.releaseSlot(ctx, tc); err != nil {
		return err
	}
	// model: claim.pml step E4 (RecordCleared, then drop the finalizer)
	setCondition(tc, fleetv1alpha1.RecordClearedCondition, true, fleetv1alpha1.ReasonCleared,
		"The claim's Gitea record is ended and its lock is free")
	if err := r.writeStatus(ctx, tc); err != nil {
		return err
	}
	// Audited once RecordCleared is on record: a retry after this point only drops the
	// finalizer, so the end is never audited twice.
	if ours || wasActive {
		r.auditEnding(ctx, tc, ending)
		server, repository := repositoryLabels(tc)
		claimTransitions.WithLabelValues(string(ending.Event), string(ending.Trigger), server, repository).Inc()
	}
	return r.dropFinalizer(ctx, tc)
}

// clearFailed records that the claim's record could not be ended yet and returns err for
// a retry with backoff. The condition is written only when it changes.
func (r *Reconciler) clearFailed(ctx context.Context, tc *fleetv1alpha1.TaskClaim, err error) error {
	clearFailures.Inc()
	before := meta.FindStatusCondition(tc.Status.Conditions, fleetv1alpha1.RecordClearedCondition)
	msg := "The claim's Gitea record is still in force; retrying with backoff: " + err.Error()
	if before == nil || before.Reason != fleetv1alpha1.ReasonGiteaUnavailable || before.Message != msg {
		setCondition(tc, fleetv1alpha1.RecordClearedCondition, false, fleetv1alpha1.ReasonGiteaUnavailable, msg)
		if werr := r.writeStatus(ctx, tc); werr != nil {
			log.FromContext(ctx).Error(werr, "Recording that the claim record could not be ended failed")
		}
		r.Recorder.Eventf(tc, nil, "Warning", fleetv1alpha1.ReasonGiteaUnavailable, "Clear", "Claim record not ended yet: %s", err.Error())
	}
	return err
}

// lockOf is the claim's per-target lock, or nil when the claim never asked for one.
func lockOf(tc *fleetv1alpha1.TaskClaim) *coordinationv1.Lease {
	if tc.Spec.Pin == "" && tc.Status.Capability == nil {
		return nil
	}
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: repositoryOf(tc).LockName}}
}

// dropFinalizer removes the claim finalizer once the claim can hold nothing any more.
func (r *Reconciler) dropFinalizer(ctx context.Context, tc *fleetv1alpha1.TaskClaim) error {
	if !controllerutil.RemoveFinalizer(tc, fleetv1alpha1.ClaimFinalizer) {
		return nil
	}
	if err := r.Update(ctx, tc); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// releaseLease frees the lock if this claim still holds it (guarded by its version).
//
// Lock ownership: while held, the lock carries an owner reference to its holder, so a
// holder deleted without its finalizer (force-deleted) takes its lock with it through
// garbage collection, and the sweep removes such a lock where no collector runs. A freed
// lock is owned by nobody and stays, its renew time set to the release: its
// resourceVersion is the target's claim generation, and the sweep deletes it only after
// it was idle for a claim lifetime. Deleting a lock never lets a generation start over,
// because resourceVersions are never reused and every pin names one (the controller
// creates the lock before it validates), so a pin taken before another claim came and
// went cannot match again.
func (r *Reconciler) releaseLease(ctx context.Context, tc *fleetv1alpha1.TaskClaim, lease *coordinationv1.Lease) error {
	if lease == nil {
		return nil
	}
	cur := &coordinationv1.Lease{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(lease), cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ptr.Deref(cur.Spec.HolderIdentity, "") != string(tc.UID) {
		return nil
	}
	now := metav1.NewMicroTime(r.Clock.Now())
	cur.Spec.HolderIdentity = nil
	cur.Spec.AcquireTime = nil
	cur.Spec.RenewTime = &now // when it became free: the sweep's idle clock
	cur.OwnerReferences = slices.DeleteFunc(cur.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == tc.UID })
	if err := r.Update(ctx, cur); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing claim lock %s: %w", cur.Name, err)
	}
	return nil
}

// audit posts a structured transition comment on the target, under the identity the
// validation bound.
func (r *Reconciler) audit(ctx context.Context, tc *fleetv1alpha1.TaskClaim, ev claim.Event, role string) {
	r.auditAs(ctx, tc, giteaclaim.Transition{Event: ev, Identity: boundIdentity(tc), Role: role})
}

// auditEnding audits how a claim that reached Gitea ended.
func (r *Reconciler) auditEnding(ctx context.Context, tc *fleetv1alpha1.TaskClaim, e claim.Ending) {
	role := tc.Status.Role
	if role == "" && tc.Status.Validation != nil {
		role = tc.Status.Validation.Role
	}
	tr := giteaclaim.Transition{Event: e.Event, Trigger: e.Trigger, Identity: boundIdentity(tc), Role: role}
	if e.Event == claim.EventRejected && tc.Status.Result != nil {
		tr.Reason = tc.Status.Result.Class + "/" + tc.Status.Result.FailedPredicate
	}
	r.auditAs(ctx, tc, tr)
}

// auditAs posts tr, completed with the claim's id, worker and time. An audit failure is
// logged and counted, never turned into a different claim decision.
func (r *Reconciler) auditAs(ctx context.Context, tc *fleetv1alpha1.TaskClaim, tr giteaclaim.Transition) {
	tr.ClaimID, tr.Worker, tr.At = string(tc.UID), tc.Spec.Worker, r.Clock.Now()
	gitea, err := r.giteaOf(ctx, tc)
	if err == nil {
		_, err = gitea.RecordTransition(ctx, apiconv.Target(tc.Spec.Target), tr)
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "Recording the claim transition in Gitea failed", "event", tr.Event)
		server, repository := repositoryLabels(tc)
		claimTransitions.WithLabelValues("audit_failed", string(tr.Event), server, repository).Inc()
	}
}

// boundIdentity is the Gitea identity the claim's validation bound ("" before one).
func boundIdentity(tc *fleetv1alpha1.TaskClaim) string {
	if tc.Status.Validation == nil {
		return ""
	}
	return tc.Status.Validation.Identity
}
