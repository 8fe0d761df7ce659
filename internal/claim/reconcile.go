package claim

import "time"

// Step is what the reconciler does next with a claim that is not being deleted.
type Step string

const (
	// StepNone: the claim is final and holds nothing; only its finalizer, if any, is left
	// to drop.
	StepNone Step = "none"
	// StepFinish: the claim is final but may still hold its Gitea record and its lock:
	// clear the record, free the lock, and only then drop the finalizer.
	StepFinish Step = "finish"
	// StepGiveBack: the worker released or completed before any capability existed;
	// the claim ends Released and the worker stays neutral.
	StepGiveBack Step = "give_back"
	// StepValidate: derive the role and issue a pin, or refuse.
	StepValidate Step = "validate"
	// StepAwaitPin: a pin was issued; wait for the worker to repeat it in spec.pin.
	StepAwaitPin Step = "await_pin"
	// StepClaim: re-read everything, win the lock, publish and activate, or refuse.
	StepClaim Step = "claim"
	// StepCheckActive: re-check an active capability against fresh state.
	StepCheckActive Step = "check_active"
)

// ClaimView is what the next step depends on.
type ClaimView struct {
	// Phase is status.phase.
	Phase string
	// GivenBack is spec.release or spec.cycleComplete.
	GivenBack bool
	// Validated is true once status.validation is set.
	Validated bool
	// Pinned is true once spec.pin is set.
	Pinned bool
	// Finalizer is true while the claim finalizer is on the object: the claim won its lock
	// once, so it may hold the lock and a Gitea record.
	Finalizer bool
	// RecordCleared is true once the claim's Gitea record (if any) was ended and its lock
	// freed (the RecordCleared condition is True).
	RecordCleared bool
}

// NextStep decides what a reconcile does with a claim.
func NextStep(v ClaimView) Step {
	switch {
	case FinalPhase(v.Phase) && v.Finalizer && !v.RecordCleared:
		return StepFinish
	case FinalPhase(v.Phase):
		return StepNone
	case v.Phase == PhaseActive:
		return StepCheckActive
	case v.GivenBack:
		return StepGiveBack
	case !v.Validated:
		return StepValidate
	case !v.Pinned:
		return StepAwaitPin
	}
	return StepClaim
}

// PublishFailure is why publishing the authoritative record failed.
type PublishFailure string

const (
	// PublishConflict: the guarded write lost to a concurrent write (409).
	PublishConflict PublishFailure = "conflict"
	// PublishForeign: the target holds another claim's record in force, or the read-back
	// shows a record other than the one written.
	PublishForeign PublishFailure = "foreign"
	// PublishAssigneeForeign: no other claim's record is in force, but the target is
	// assigned to someone other than the claiming identity.
	PublishAssigneeForeign PublishFailure = "assignee_foreign"
	// PublishUnavailable: anything else (Gitea unavailable, a write that could not be
	// verified): nothing was proven published.
	PublishUnavailable PublishFailure = "unavailable"
)

// PublicationRefusal is the final result of a claim whose publication failed: losing the
// guarded write, finding another claim's record, or finding the target assigned to
// someone else (assignee_foreign, the same rule validation applies) is contention;
// anything else means nothing was published (stale_state), since no other claim won.
func PublicationRefusal(f PublishFailure, target Target) Result {
	switch f {
	case PublishConflict:
		return ContentionLoss(PredicateContentVersionConflict, target)
	case PublishForeign:
		return ContentionLoss(PredicateClaimRecordNotOurs, target)
	case PublishAssigneeForeign:
		return loss(ruleAssigneeForeign, target)
	}
	return PublicationFailed(target)
}

// DefaultActiveRecheck bounds how long a change in Gitea (a block label, a new head, a
// moved base branch) can go unnoticed while a capability is active: Gitea sends no watch
// events, so an active claim is re-read at least this often.
const DefaultActiveRecheck = 30 * time.Second

// RecheckAfter is when an active capability expiring at expires is looked at next: at
// its expiry, but no later than recheck (DefaultActiveRecheck when not positive) and no
// sooner than a second from now.
func RecheckAfter(expires, now time.Time, recheck time.Duration) time.Duration {
	if recheck <= 0 {
		recheck = DefaultActiveRecheck
	}
	return min(max(expires.Sub(now), time.Second), max(recheck, time.Second))
}

// Readiness is how a claim's phase reads as the Ready and Stalled conditions: Ready only
// while the claim stands as asked (active, or given back by its worker), Stalled once it
// is final without that (refused, expired, revoked).
func Readiness(phase string) (ready, stalled bool) {
	switch phase {
	case PhaseActive, PhaseReleased, PhaseCompleted:
		return true, false
	case PhaseRejected, PhaseExpired, PhaseRevoked:
		return false, true
	}
	return false, false
}
