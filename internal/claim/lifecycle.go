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
	// ExpiryCycleComplete: the worker said the work cycle finished (spec.cycleComplete).
	ExpiryCycleComplete Trigger = "cycle_complete"
	// ExpiryWorkDone: the bound identity's own work for the bound role landed on the
	// bound target (see [WorkDone]); the cycle is complete.
	ExpiryWorkDone Trigger = "work_done"
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
	case ExpiryCycleComplete, ExpiryWorkDone:
		return PhaseCompleted
	case ExpiryExpired:
		return PhaseExpired
	}
	return PhaseRevoked
}

// Event is a claim lifecycle transition, as audited on the target in Gitea.
type Event string

const (
	// EventClaimed: the claim record was published in Gitea, proven, and the capability
	// activated. It is the one audit comment of a won claim's start.
	EventClaimed Event = "claimed"
	// EventActivated: the task capability was activated for the claim. No longer posted
	// (EventClaimed covers it); kept so older audit trails still read.
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

// EndingFor is the Ending of a claim that ends in phase with trigger. A refused claim
// (Rejected) that had published its record ends it as revoked and is audited as a
// rejection. Other phases than Released, Completed and Expired end as a revocation by
// trigger.
func EndingFor(phase string, trigger Trigger) Ending {
	switch phase {
	case PhaseRejected:
		return Ending{Record: RecordStateRevoked, Event: EventRejected}
	case PhaseReleased:
		return Ending{Record: RecordStateReleased, Event: EventReleased}
	case PhaseCompleted:
		return Ending{Record: RecordStateCompleted, Event: EventCompleted}
	case PhaseExpired:
		return Ending{Record: RecordStateExpired, Event: EventExpired}
	}
	return Ending{Record: RecordStateRevoked, Event: EventRevoked, Trigger: trigger}
}

// ActiveInput is everything CheckActive decides from, read fresh by the reconciler.
type ActiveInput struct {
	// Capability is the active capability.
	Capability Capability
	// Now is the current time.
	Now time.Time
	// Fresh is the target's state as just read (with the Lease fields).
	Fresh TargetState
	// Worker is the worker's registration as just read.
	Worker Worker
	// Verdict is the worker's capability verdict as just resolved.
	Verdict string
	// Released is spec.release.
	Released bool
	// CycleComplete is spec.cycleComplete.
	CycleComplete bool
}

// CheckActive decides from fresh state whether an active capability must end
// and why. ends is false (and trigger "") while the capability stands.
// Triggers are checked in this order, the first match winning:
//
//  1. released → release; cycleComplete → cycle_complete; now ≥ ExpiresAt → expired
//  2. ownership_loss: the worker is no longer the bound, active, live
//     registration; the Gitea claim record is missing, another claim's, or
//     not in force; the Lease holder or generation moved; the target was
//     assigned to someone else
//  3. failed_validation (authority): the worker's capability verdict is no
//     longer allowed. The worker lost the authority to act at all, so no
//     work of its is credited: this comes before completion.
//  4. work_done: the bound identity's own work for the role landed on the
//     bound target and head ([WorkDone]) — the claim ends Completed; a merge
//     Gitea has pushed to the base but not yet recorded (the base head's
//     parents include the bound head of a still-open pull request) is waited
//     for: nothing ends until the next re-check
//  5. stale_state: the state read is not the bound item or is incomplete; for
//     pull requests, the head or the base-branch head moved
//  6. block: a dependency edge is not closed, or the blocked label is set
//  7. failed_validation: the role derived now differs from the bound role, or
//     identity independence now fails
//
// Completion comes before the target-side checks because doing the work moves
// the target on (a review makes the role approver, a merge closes the pull
// request and moves the base branch), which would otherwise read as stale
// state or a failed validation. Base-branch movement is not a trigger for
// issue (author) capabilities: an author's work is expected to race a moving
// base.
func CheckActive(in ActiveInput) (trigger Trigger, ends bool) {
	c, now, fresh := in.Capability, in.Now, in.Fresh
	if t, ends := EndsUnread(in.Released, in.CycleComplete, c.ExpiresAt, now); ends {
		return t, true
	}
	switch {
	case ownershipLost(c, now, fresh, in.Worker):
		return TriggerOwnershipLoss, true
	case in.Verdict != VerdictAllowed:
		return TriggerFailedValidation, true
	case WorkDone(c, fresh):
		return ExpiryWorkDone, true
	case mergeLanding(c, fresh):
		// Gitea pushes a merge to the base branch before it records the pull request
		// as merged: look again rather than read the merge as stale state.
		return "", false
	case stateStale(c, fresh):
		return TriggerStaleState, true
	case dependencyGated(fresh.Dependencies) || labelledBlocked(fresh.Labels):
		return TriggerBlock, true
	case DeriveRole(fresh) != c.Role || CheckIndependence(c.Identity, c.Role, fresh) != nil:
		return TriggerFailedValidation, true
	}
	return "", false
}

// EndsUnread reports whether an active capability ends on what the claim itself says,
// with nothing read: the worker released it or completed the cycle, or it expired. These
// are CheckActive's first triggers; the reconciler asks before it reads anything, so a
// release takes the capability away at once even while Gitea cannot be read.
func EndsUnread(released, cycleComplete bool, expires, now time.Time) (Trigger, bool) {
	switch {
	case released:
		return TriggerRelease, true
	case cycleComplete:
		return ExpiryCycleComplete, true
	case expires.IsZero() || !now.Before(expires):
		return ExpiryExpired, true
	}
	return "", false
}

// WorkDone reports whether the bound identity's own work for the bound role has
// landed on the bound target, as fresh (read from Gitea) shows it:
//
//   - reviewer: a submitted non-approving review (comment or request changes) by
//     the identity, made on the bound head;
//   - approver: an approving review by the identity, made on the bound head;
//   - merger: the pull request is merged, by the identity, with the bound head as
//     its head;
//   - author: a pull request in the target's repository, opened by the identity
//     no earlier than the claim (the claim record's claimedAt), that Gitea links
//     to the issue as a cross-reference — its title or body mentions "#N"
//     (for example "Fixes #N").
//
// Dismissed and stale reviews still count: the work was submitted. Work of any
// other identity, on another head, or of another kind (an approval by a
// reviewer, a review by a merger) is not completion.
func WorkDone(c Capability, fresh TargetState) bool {
	if !fresh.Target.SameItem(c.Target) || norm(c.Identity) == "" {
		return false
	}
	switch c.Role {
	case RoleReviewer, RoleApprover:
		for _, r := range fresh.Reviews {
			if !sameIdentity(r.Reviewer, c.Identity) || !sameSHA(r.CommitID, c.Target.HeadSHA) || strings.TrimSpace(r.CommitID) == "" {
				continue
			}
			approving := norm(r.State) == norm(ReviewApproved)
			if approving == (c.Role == RoleApprover) && (approving || isReviewVerdict(r.State)) {
				return true
			}
		}
	case RoleMerger:
		return fresh.Merged && sameIdentity(fresh.MergedBy, c.Identity) &&
			strings.TrimSpace(fresh.Target.HeadSHA) != "" && sameSHA(fresh.Target.HeadSHA, c.Target.HeadSHA)
	case RoleAuthor:
		var since time.Time
		if fresh.ClaimRecord != nil {
			since = fresh.ClaimRecord.ClaimedAt
		}
		for _, p := range fresh.ReferencingPulls {
			if sameIdentity(p.Author, c.Identity) && sameRepository(p.Repository, c.Target.Repository) &&
				p.Number > 0 && p.Number != c.Target.Number && !p.CreatedAt.Before(since) {
				return true
			}
		}
	}
	return false
}

// mergeLanding reports whether a merger's pull request is being merged right now: still
// open and unmerged at the bound head, while the base branch already moved to a merge
// commit with that head as a parent (Gitea writes the merge before it marks the pull
// request merged). The next re-check decides: merged by the bound identity is work_done,
// anything else ends the claim as usual.
func mergeLanding(c Capability, fresh TargetState) bool {
	if c.Role != RoleMerger || norm(fresh.State) != StateOpen || fresh.Merged ||
		!fresh.Target.SameItem(c.Target) || !sameSHA(fresh.Target.HeadSHA, c.Target.HeadSHA) ||
		strings.TrimSpace(c.Target.HeadSHA) == "" || sameSHA(fresh.ParityRevision, c.ParityRevision) {
		return false
	}
	for _, p := range fresh.ParityParents {
		if sameSHA(p, c.Target.HeadSHA) {
			return true
		}
	}
	return false
}

// isReviewVerdict reports whether state is a non-approving submitted review.
func isReviewVerdict(state string) bool {
	s := norm(state)
	return s == norm(ReviewComment) || s == norm(ReviewRequestChanges)
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
