package claim

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
