package taskclaim

import (
	"context"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// end ends a claim for trigger: the Gitea record gets its final state, the lock is freed,
// the transition is audited, and the worker is neutral again (no capability).
//
// A claim that never showed a capability may still have reached Gitea and the lock: an
// earlier attempt can have won both and then failed to write its status (for example
// because the worker released at that very moment). Such leftovers are cleaned up too, so
// an ended claim never keeps a target locked or claimed until its expiry.
func (r *Reconciler) end(ctx context.Context, tc *fleetv1alpha1.TaskClaim, trigger claim.Trigger, lease *coordinationv1.Lease) error {
	phase := claim.EndPhase(trigger)
	ending := claim.EndingFor(phase, trigger)
	target := apiconv.Target(tc.Spec.Target)
	held, err := r.holdsRecord(ctx, tc)
	if err != nil {
		return err
	}
	// model: claim.pml step E2 (record to its final state; the model orders E1 first, see docs/protocols.md)
	if held {
		if _, err := r.Gitea.Clear(ctx, target, string(tc.UID), ending.Record); err != nil && !giteaclaim.NothingToEnd(err) {
			return fmt.Errorf("recording the end of the claim in Gitea: %w", err)
		}
	}
	if lease == nil && tc.Spec.Pin != "" {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: claim.LockName(target)}}
	}
	// model: claim.pml step E3 (free the Lease)
	if lease != nil {
		if err := r.releaseLease(ctx, tc, lease); err != nil {
			return err
		}
	}
	if held {
		r.auditEnding(ctx, tc, ending)
		claimTransitions.WithLabelValues(string(ending.Event), string(ending.Trigger)).Inc()
	}
	// model: claim.pml step E1 (status stops showing the capability)
	markEnded(tc, phase, trigger, r.Clock.Now())
	if err := r.writeStatus(ctx, tc); err != nil {
		return err
	}
	r.Recorder.Eventf(tc, nil, "Normal", phase, "Claim", "Claim ended: %s", trigger)
	// model: claim.pml step E4 (drop the finalizer)
	return r.dropFinalizer(ctx, tc)
}

// holdsRecord reports whether this claim may have a record in force in Gitea: it showed a
// capability, or it asked for a claim and Gitea shows a record of its own.
func (r *Reconciler) holdsRecord(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (bool, error) {
	if tc.Status.Capability != nil {
		return true, nil
	}
	if tc.Spec.Pin == "" {
		return false, nil
	}
	rec, _, err := r.Gitea.Read(ctx, apiconv.Target(tc.Spec.Target))
	if err != nil && !giteaclaim.NothingToEnd(err) {
		return false, fmt.Errorf("reading the claim record in Gitea: %w", err)
	}
	return rec != nil && rec.ClaimID == string(tc.UID) && rec.State == claim.RecordStateActive, nil
}

// reject records a typed, final refusal. It is never retried.
func (r *Reconciler) reject(ctx context.Context, tc *fleetv1alpha1.TaskClaim, res claim.Result, w claim.Worker) error {
	// model: claim.pml step R1 (final refusal; never written again)
	markRejected(tc, res)
	if err := r.writeStatus(ctx, tc); err != nil {
		return err
	}
	claimResults.WithLabelValues(string(res.Outcome), string(res.Class)).Inc()
	validated := ""
	if tc.Status.Validation != nil {
		validated = tc.Status.Validation.Identity
	}
	if identity, ok := claim.RefusalAuditIdentity(tc.Spec.Target.Repository, r.Repository, validated, w.Identity); ok {
		r.auditAs(ctx, tc, giteaclaim.Transition{Event: claim.EventRejected, Identity: identity, Reason: string(res.Class) + "/" + res.FailedPredicate})
	}
	r.Recorder.Eventf(tc, nil, "Warning", fleetv1alpha1.ReasonRejected, "Claim", "Refused: %s", rejectionMessage(res))
	return r.dropFinalizer(ctx, tc)
}

// dropFinalizer removes the claim finalizer once the claim can hold nothing any more.
func (r *Reconciler) dropFinalizer(ctx context.Context, tc *fleetv1alpha1.TaskClaim) error {
	if !controllerutil.RemoveFinalizer(tc, Finalizer) {
		return nil
	}
	if err := r.Update(ctx, tc); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// releaseLease frees the lock if this claim still holds it (guarded by its version).
func (r *Reconciler) releaseLease(ctx context.Context, tc *fleetv1alpha1.TaskClaim, lease *coordinationv1.Lease) error {
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
	// A free lock is owned by nobody, so it outlives the claim that last held it: its
	// resourceVersion is the target's claim generation, and deleting it would let that
	// generation start over, so a pin taken before another claim came and went would
	// match again.
	cur.OwnerReferences = slices.DeleteFunc(cur.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == tc.UID })
	if err := r.Update(ctx, cur); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing claim lock %s: %w", cur.Name, err)
	}
	return nil
}

// clearOwnRecord ends this claim's Gitea record, if one is in force, after a failed
// activation. It is best effort: a record that is not this claim's is left alone, and a
// failure is logged (the record then lapses at its expiry; every other claim fails closed
// on it meanwhile).
func (r *Reconciler) clearOwnRecord(ctx context.Context, tc *fleetv1alpha1.TaskClaim, final claim.RecordState) {
	if _, err := r.Gitea.Clear(ctx, apiconv.Target(tc.Spec.Target), string(tc.UID), final); err != nil && !giteaclaim.NothingToEnd(err) {
		log.FromContext(ctx).Error(err, "Ending the record of a claim that did not activate failed")
	}
}

// audit posts a structured transition comment on the target, under the identity the
// validation bound.
func (r *Reconciler) audit(ctx context.Context, tc *fleetv1alpha1.TaskClaim, ev claim.Event, role string) {
	r.auditAs(ctx, tc, giteaclaim.Transition{Event: ev, Identity: boundIdentity(tc), Role: role})
}

// auditEnding audits how an active claim ended.
func (r *Reconciler) auditEnding(ctx context.Context, tc *fleetv1alpha1.TaskClaim, e claim.Ending) {
	r.auditAs(ctx, tc, giteaclaim.Transition{Event: e.Event, Trigger: e.Trigger, Identity: boundIdentity(tc), Role: tc.Status.Role})
}

// auditAs posts tr, completed with the claim's id, worker and time. An audit failure is
// logged and counted, never turned into a different claim decision.
func (r *Reconciler) auditAs(ctx context.Context, tc *fleetv1alpha1.TaskClaim, tr giteaclaim.Transition) {
	tr.ClaimID, tr.Worker, tr.At = string(tc.UID), tc.Spec.Worker, r.Clock.Now()
	if _, err := r.Gitea.RecordTransition(ctx, apiconv.Target(tc.Spec.Target), tr); err != nil {
		log.FromContext(ctx).Error(err, "Recording the claim transition in Gitea failed", "event", tr.Event)
		claimTransitions.WithLabelValues("audit_failed", string(tr.Event)).Inc()
	}
}

// boundIdentity is the Gitea identity the claim's validation bound ("" before one).
func boundIdentity(tc *fleetv1alpha1.TaskClaim) string {
	if tc.Status.Validation == nil {
		return ""
	}
	return tc.Status.Validation.Identity
}
