package claim

import (
	"strings"
	"time"
)

// Revocation triggers: an active capability ends at once.
const (
	// TriggerRelease: the worker gave the task back.
	TriggerRelease = "release"
	// TriggerBlock: the target became blocked (an unresolved dependency or the
	// blocked label).
	TriggerBlock = "block"
	// TriggerFailedValidation: the target no longer confers the bound role, or
	// independence no longer holds.
	TriggerFailedValidation = "failed_validation"
	// TriggerStaleState: the bound target, head or base branch moved.
	TriggerStaleState = "stale_state"
	// TriggerOwnershipLoss: the claim record, the Lease, an assignment or the
	// worker's registration no longer backs the capability.
	TriggerOwnershipLoss = "ownership_loss"
)

// Expiry reasons: an active capability ends on its own.
const (
	// ExpiryExpired: ExpiresAt has passed.
	ExpiryExpired = "expired"
	// ExpiryCycleComplete: the work cycle finished.
	ExpiryCycleComplete = "cycle_complete"
)

// IsRevocation reports whether trigger is one of the revocation triggers.
func IsRevocation(trigger string) bool {
	switch trigger {
	case TriggerRelease, TriggerBlock, TriggerFailedValidation, TriggerStaleState, TriggerOwnershipLoss:
		return true
	}
	return false
}

// IsExpiry reports whether trigger is one of the expiry reasons.
func IsExpiry(trigger string) bool {
	return trigger == ExpiryExpired || trigger == ExpiryCycleComplete
}

// CheckActive decides from fresh state whether active capability c must end
// and why. ends is false (and trigger "") while the capability stands.
// Triggers are checked in this order, the first match winning:
//
//  1. released → release; completed → cycle_complete; now ≥ ExpiresAt → expired
//  2. ownership_loss: the worker is no longer the bound, active, live
//     registration; the Gitea claim record is missing, another claim's, or
//     not in force; the Lease holder or generation moved; the target was
//     assigned to someone else
//  3. stale_state: the state read is not the bound item or is incomplete; for
//     pull requests, the head or the base-branch head moved
//  4. block: a dependency edge is not closed, or the blocked label is set
//  5. failed_validation: the role derived now differs from the bound role, or
//     identity independence now fails
//
// Completion is the reconciler's to detect (a submitted review, a merge, an
// opened pull request) and report through completed, because the target's
// own state moving on after the work is done would otherwise read as a
// failed validation. Base-branch movement is not a trigger for issue (author)
// capabilities: an author's work is expected to race a moving base.
func CheckActive(c Capability, now time.Time, fresh TargetState, worker Worker, released, completed bool) (trigger string, ends bool) {
	switch {
	case released:
		return TriggerRelease, true
	case completed:
		return ExpiryCycleComplete, true
	case c.ExpiresAt.IsZero() || !now.Before(c.ExpiresAt):
		return ExpiryExpired, true
	case ownershipLost(c, now, fresh, worker):
		return TriggerOwnershipLoss, true
	case stateStale(c, fresh):
		return TriggerStaleState, true
	case dependencyGated(fresh.Dependencies) || labelledBlocked(fresh.Labels):
		return TriggerBlock, true
	case DeriveRole(fresh) != c.Role || CheckIndependence(c.Identity, c.Role, fresh) != nil:
		return TriggerFailedValidation, true
	}
	return "", false
}

func ownershipLost(c Capability, now time.Time, fresh TargetState, w Worker) bool {
	if w.Name != c.Worker || !sameIdentity(w.Identity, c.Identity) ||
		w.Phase != PhaseActive || w.OwnershipState != OwnershipLive {
		return true
	}
	rec := fresh.ClaimRecord
	if rec == nil || rec.ClaimID != c.ClaimID || rec.Worker != c.Worker ||
		!sameIdentity(rec.Identity, c.Identity) || norm(rec.State) != RecordStateActive || !rec.InForce(now) {
		return true
	}
	if c.ClaimID == "" || strings.TrimSpace(fresh.LeaseHolder) != c.ClaimID || fresh.LeaseGeneration != c.LeaseGeneration {
		return true
	}
	return foreignAssignees(fresh.Assignees, c.Identity)
}

func stateStale(c Capability, fresh TargetState) bool {
	if !fresh.Target.SameItem(c.Target) {
		return true
	}
	switch norm(fresh.State) {
	case StateOpen, StateClosed:
	default:
		return true
	}
	if c.Target.Kind == KindPullRequest {
		return !sameSHA(fresh.Target.HeadSHA, c.Target.HeadSHA) ||
			!sameSHA(fresh.ParityRevision, c.ParityRevision)
	}
	return false
}

// NextDeadline is the time at which c ends on its own if nothing else ends
// it first; the reconciler requeues for it.
func NextDeadline(c Capability) time.Time { return c.ExpiresAt }
