package claim

import (
	"strings"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// Trigger is why an active capability ends: a revocation trigger or an expiry reason.
type Trigger string

// Revocation triggers: an active capability ends at once.
const (
	// TriggerRelease: the worker gave the task back.
	TriggerRelease Trigger = "release"
	// TriggerBlock: the target became blocked (an unresolved dependency or the
	// blocked label).
	TriggerBlock Trigger = "block"
	// TriggerFailedValidation: the target no longer confers the bound role, or
	// independence no longer holds.
	TriggerFailedValidation Trigger = "failed_validation"
	// TriggerStaleState: the bound target, head or base branch moved.
	TriggerStaleState Trigger = "stale_state"
	// TriggerOwnershipLoss: the claim record, the Lease, an assignment or the
	// worker's registration no longer backs the capability.
	TriggerOwnershipLoss Trigger = "ownership_loss"
)

// Expiry reasons: an active capability ends on its own.
const (
	// ExpiryExpired: ExpiresAt has passed.
	ExpiryExpired Trigger = "expired"
	// ExpiryCycleComplete: the work cycle finished.
	ExpiryCycleComplete Trigger = "cycle_complete"
)

// Revocation reports whether t is one of the revocation triggers.
func (t Trigger) Revocation() bool {
	switch t {
	case TriggerRelease, TriggerBlock, TriggerFailedValidation, TriggerStaleState, TriggerOwnershipLoss:
		return true
	}
	return false
}

// EndPhase is the final phase a claim ends in for trigger t: a release ends it Released,
// cycle completion Completed, expiry Expired, and every other revocation Revoked.
func EndPhase(t Trigger) string {
	switch t {
	case TriggerRelease:
		return PhaseReleased
	case ExpiryCycleComplete:
		return PhaseCompleted
	case ExpiryExpired:
		return PhaseExpired
	}
	return PhaseRevoked
}

// Event is a claim lifecycle transition, as audited on the target in Gitea.
type Event string

const (
	// EventClaimed: the claim record was published in Gitea.
	EventClaimed Event = "claimed"
	// EventActivated: the task capability was activated for the claim.
	EventActivated Event = "activated"
	// EventReleased: the holder released the claim.
	EventReleased Event = "released"
	// EventCompleted: the work cycle finished and the capability expired.
	EventCompleted Event = "completed"
	// EventExpired: the claim ran past its expiry.
	EventExpired Event = "expired"
	// EventRevoked: the capability was taken away; the trigger says why.
	EventRevoked Event = "revoked"
	// EventRejected: a claim attempt was refused.
	EventRejected Event = "rejected"
)

// Valid reports whether e is a known event.
func (e Event) Valid() bool {
	switch e {
	case EventClaimed, EventActivated, EventReleased, EventCompleted, EventExpired, EventRevoked, EventRejected:
		return true
	}
	return false
}

// Ending is how a claim that ends in a final phase is recorded: the state its Gitea
// record ends in, the audited event, and the trigger the audit names (only a revocation
// names one).
type Ending struct {
	// Record is the final state of the Gitea record.
	Record RecordState
	// Event is the audited transition.
	Event Event
	// Trigger is the revocation trigger the audit names; "" for other events.
	Trigger Trigger
}

// EndingFor is the Ending of a claim that ends in phase with trigger. Phases other than
// Released, Completed and Expired end as a revocation by trigger.
func EndingFor(phase string, trigger Trigger) Ending {
	switch phase {
	case PhaseReleased:
		return Ending{Record: RecordStateReleased, Event: EventReleased}
	case PhaseCompleted:
		return Ending{Record: RecordStateCompleted, Event: EventCompleted}
	case PhaseExpired:
		return Ending{Record: RecordStateExpired, Event: EventExpired}
	}
	return Ending{Record: RecordStateRevoked, Event: EventRevoked, Trigger: trigger}
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
func CheckActive(c Capability, now time.Time, fresh TargetState, worker Worker, released, completed bool) (trigger Trigger, ends bool) {
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
		w.Phase != fleet.Active || w.OwnershipState != fleet.Live {
		return true
	}
	rec := fresh.ClaimRecord
	if rec == nil || rec.ClaimID != c.ClaimID || rec.Worker != c.Worker ||
		!sameIdentity(rec.Identity, c.Identity) || RecordState(norm(string(rec.State))) != RecordStateActive || !rec.InForce(now) {
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
