package claim

import "sort"

// Phases of a TaskClaim. The API (api/v1alpha1) re-exports them; this is their one
// definition.
const (
	// PhasePending: the claim was created and not yet validated.
	PhasePending = "Pending"
	// PhaseValidated: a pin was issued; the worker copies it into spec.pin to claim.
	PhaseValidated = "Validated"
	// PhaseActive: the claim won, is published in Gitea, and its capability is active.
	PhaseActive = "Active"
	// PhaseRejected: the claim was refused with a typed result; never retried.
	PhaseRejected = "Rejected"
	// PhaseReleased: the worker gave the task back.
	PhaseReleased = "Released"
	// PhaseCompleted: the work cycle finished.
	PhaseCompleted = "Completed"
	// PhaseExpired: the capability ran past its expiry.
	PhaseExpired = "Expired"
	// PhaseRevoked: the capability was taken away (block, failed validation, stale
	// state, ownership loss).
	PhaseRevoked = "Revoked"
)

// Phases are all the phases, in the order a claim goes through them.
var Phases = []string{PhasePending, PhaseValidated, PhaseActive, PhaseRejected, PhaseReleased, PhaseCompleted, PhaseExpired, PhaseRevoked}

// HoldingPhase reports whether a claim in phase p may hold or be acquiring a capability
// (ClaimRef): only a validated or active claim can (the lock and its finalizer are taken
// only from Validated).
func HoldingPhase(p string) bool { return p == PhaseValidated || p == PhaseActive }

// FinalPhase reports whether a claim in phase p is finished: refused or ended. A final
// claim is never reconciled again; it can hold no lock and no record.
func FinalPhase(p string) bool {
	switch p {
	case PhaseRejected, PhaseReleased, PhaseCompleted, PhaseExpired, PhaseRevoked:
		return true
	}
	return false
}

// Holding is one task claim as the workflow-owner rule sees it.
type Holding struct {
	// Worker is the claim's spec.worker.
	Worker string
	// Phase is the claim's phase ("" before the controller first saw it).
	Phase string
	// Deleting is true once the claim has a deletion timestamp.
	Deleting bool
}

// OwnsWork reports whether a claim still owns work, or may yet: anything not provably
// finished counts, so a worker is protected from retirement rather than retired. A claim
// being deleted still releases its record and lock, but it no longer starts work.
func (h Holding) OwnsWork() bool {
	return !FinalPhase(h.Phase) && !h.Deleting
}

// WorkflowOwners returns, sorted and unique, the workers that own work through a claim.
// Retirement preserves them as protected_active_workflow_owner.
func WorkflowOwners(holdings []Holding) []string {
	seen := map[string]bool{}
	var owners []string
	for _, h := range holdings {
		if h.OwnsWork() && !seen[h.Worker] {
			seen[h.Worker] = true
			owners = append(owners, h.Worker)
		}
	}
	sort.Strings(owners)
	return owners
}
