package claim

import "time"

// ClaimRef is one TaskClaim as the one-claim-per-worker rule sees it.
type ClaimRef struct {
	// ClaimID is the claim's UID.
	ClaimID string
	// Namespace is the claim's namespace.
	Namespace string
	// Worker is spec.worker (a registration name in Namespace).
	Worker string
	// Identity is the Gitea identity the claim's validation bound ("" before one).
	Identity string
	// Phase is status.phase.
	Phase string
	// Acquiring is true while the claim carries the release finalizer: it won (or is
	// winning) its lock and may be publishing or already holds a capability.
	Acquiring bool
}

// holds reports whether the claim holds a capability or may be about to: active, or
// validated and past the lock. The finalizer is put on only in the claim step, which
// starts from Validated, so a finalizer on a claim in any other phase was put there by
// hand and holds nothing. Only claims in a HoldingPhase hold: the controller lists the
// other claims of a worker by that phase.
func (c ClaimRef) holds() bool {
	return c.Phase == PhaseActive || (c.Acquiring && HoldingPhase(c.Phase))
}

// OtherClaims counts the claims among all, other than self, that hold or are acquiring a
// capability for the same worker: the same registration (namespace and name) or the
// same Gitea identity (identity is the worker's, compared without regard to case). A
// worker holds at most one claim at a time, and the rule is by identity as well, so a
// second registration of the same identity gains nothing.
func OtherClaims(self ClaimRef, identity string, all []ClaimRef) int {
	n := 0
	for _, c := range all {
		if c.ClaimID == self.ClaimID || !c.holds() {
			continue
		}
		sameWorker := c.Namespace == self.Namespace && c.Worker == self.Worker
		if sameWorker || sameIdentity(c.Identity, identity) {
			n++
		}
	}
	return n
}

// DefaultMaxOpenClaims is how many of one worker's claims may be open (neither refused
// nor ended) before the controller refuses the newer ones unread. A worker holds at most
// one claim, and a well-behaved one has one open and perhaps one it is giving back, so
// the limit only bounds what a flood of claim objects costs: each claim beyond it is
// refused without a single Gitea read.
const DefaultMaxOpenClaims = 4

// QueuedClaim is one of a worker's claims as the open-claim limit sees it.
type QueuedClaim struct {
	// Name is the claim's name; it orders claims created in the same second.
	Name string
	// Created is the claim's creation time.
	Created time.Time
	// Phase is status.phase.
	Phase string
}

// before reports whether q was created before o (by time, then by name).
func (q QueuedClaim) before(o QueuedClaim) bool {
	if !q.Created.Equal(o.Created) {
		return q.Created.Before(o.Created)
	}
	return q.Name < o.Name
}

// BeyondOpenClaimLimit reports whether self comes after max or more of its worker's open
// claims: those in others (the worker's claims, self among them or not) that are not
// final and were created before self. With max below one nothing is beyond the limit.
func BeyondOpenClaimLimit(self QueuedClaim, others []QueuedClaim, maxOpen int) bool {
	if maxOpen < 1 {
		return false
	}
	ahead := 0
	for _, o := range others {
		if o.Name == self.Name || FinalPhase(o.Phase) || !o.before(self) {
			continue
		}
		ahead++
	}
	return ahead >= maxOpen
}

// OpenClaimLimit is the refusal of a claim beyond its worker's limit of open claims
// (BeyondOpenClaimLimit). It names no other claim.
func OpenClaimLimit(requested Target) Result {
	return refusal(ruleWorkerClaimLimit, OutcomeRejected, requested)
}
