package claim

import (
	"strings"
	"time"
)

// ClaimInput is everything DecideClaim decides from. Worker, Fresh and
// CapabilityVerdict must be read inside the claim operation, after the pin
// was presented; nothing read during inspection may be reused.
type ClaimInput struct {
	// Worker is the claiming worker's registration, re-read.
	Worker Worker
	// ClaimID identifies the claim object (its UID); it becomes the Lease
	// holder and the claim record's id.
	ClaimID string
	// Spec is the target named by the claim object.
	Spec Target
	// PinnedValue is the pin the worker presented ("" = none).
	PinnedValue string
	// Validated is the validation the controller issued for this claim.
	Validated Validation
	// Fresh is the target's state re-read inside the claim.
	Fresh TargetState
	// ControllerRepository is the "owner/name" repository the controller serves.
	ControllerRepository string
	// Where is the key of the repository the validation resolved (ValidateInput.Where).
	Where RepositoryKey
	// CapabilityVerdict is the authorization verdict, re-read.
	CapabilityVerdict string
	// Now is the current time.
	Now time.Time
	// OtherClaims counts the other claims the worker or its identity holds or
	// is acquiring, re-read inside the claim (see [OtherClaims]).
	OtherClaims int
}

// Acquisition tells the reconciler how to acquire once DecideClaim has
// cleared the claim.
type Acquisition struct {
	// Validation is the validation recomputed from fresh state; its pin equals
	// the issued pin.
	Validation Validation
	// ExpectedGeneration is the Lease resourceVersion the compare-and-swap
	// must carry; "" means the Lease must be created and must not exist.
	ExpectedGeneration string
	// AlreadyHeld is true when the Lease is already held by this very claim
	// (an earlier attempt won the swap but did not finish); no swap is needed,
	// publication and activation continue.
	AlreadyHeld bool
}

// Predicates the reconciler may report through ContentionLoss.
const (
	// PredicateLeaseCASConflict: the guarded Lease write was refused.
	PredicateLeaseCASConflict = "lease_cas_conflict"
	// PredicateContentVersionConflict: the guarded Gitea body write was refused (409).
	PredicateContentVersionConflict = "content_version_conflict"
	// PredicateClaimCASConflict: any other lost guarded write.
	PredicateClaimCASConflict = "claim_cas_conflict"
	// PredicateClaimGenerationAdvanced: the Lease is no longer at the pinned generation.
	PredicateClaimGenerationAdvanced = "claim_generation_advanced"
	// PredicateClaimRecordNotOurs: the Gitea read-back shows another claim's record.
	PredicateClaimRecordNotOurs = "claim_record_not_ours"
	// PredicateLeaseNotHeld: the Lease read-back shows another holder.
	PredicateLeaseNotHeld = "lease_not_held"
)

// DecideClaim applies the five claim-safety clauses in this order and
// returns the first refusal, always as a final not_acquired result:
//
//	(a) pin required: no pin is a policy refusal; a pin other than the issued
//	    one, or an issued pin that does not match its components, is stale.
//	(d) no substitution: the claimed target must be the validated target in
//	    repository, kind, number and head.
//	(b) revalidation: every pinned component is compared with its fresh value
//	    and the whole validation is run again on fresh state.
//	(c) compare-and-swap: the Lease must still be at the pinned generation.
//	(e) typed contention: every refusal names its predicate and the requested
//	    target only, requires fresh inspection and forbids retry.
//
// On success the Result's outcome is validated and the Acquisition says
// which generation the reconciler's compare-and-swap must carry. The claim
// is acquired only once Activate confirms the Lease and the Gitea record.
func DecideClaim(in ClaimInput) (Acquisition, Result) {
	if id := clausePinRequired(in.PinnedValue, in.Validated); id != "" {
		return Acquisition{}, loss(id, in.Spec)
	}
	if id := clauseNoSubstitution(in.Spec, in.Validated); id != "" {
		return Acquisition{}, loss(id, in.Spec)
	}
	fresh, id := clauseRevalidate(in)
	if id != "" {
		return Acquisition{}, loss(id, in.Spec)
	}
	expected, held, id := clauseCompareAndSwap(in)
	if id != "" {
		return Acquisition{}, loss(id, in.Spec)
	}
	return Acquisition{Validation: fresh, ExpectedGeneration: expected, AlreadyHeld: held},
		success(OutcomeValidated, in.Spec)
}

// PrecheckClaim decides, from the claim object and a fresh read of the per-target
// Lease alone, whether the claim has already lost, before anything is read from Gitea.
// It applies clause (a) and clause (d), which need no read at all, and then the Lease
// half of clauses (b) and (c): a Lease held by another claim in force is a foreign
// lock (lease_held_foreign, as the revalidation reports it), and a Lease that moved past
// the pinned generation otherwise is a generation advance (claim_generation_advanced).
// Either way another claim's compare-and-swap came first, and nothing a later read
// could show changes that: a generation advance loses deterministically. Only
// in.PinnedValue, in.Validated, in.Spec, in.ClaimID, in.Now and the Lease fields of
// in.Fresh are read. It refuses nothing DecideClaim would let through, and each refusal
// is the one DecideClaim gives for that Lease when nothing else moved; when it lets the
// claim through, DecideClaim must still decide it on state read afresh.
//
// This is what keeps a contended target cheap: of many claims pinned on one free Lease,
// those reconciled after the winner's swap are refused here, each at the cost of one
// Lease read, instead of re-reading the target from Gitea first.
func PrecheckClaim(in ClaimInput) (Result, bool) {
	if id := clausePinRequired(in.PinnedValue, in.Validated); id != "" {
		return loss(id, in.Spec), true
	}
	if id := clauseNoSubstitution(in.Spec, in.Validated); id != "" {
		return loss(id, in.Spec), true
	}
	if foreignLeaseHolder(in.Fresh, in.ClaimID, in.Now) {
		return loss(ruleLeaseHeldForeign, in.Spec), true
	}
	if _, _, id := clauseCompareAndSwap(in); id != "" {
		return loss(id, in.Spec), true
	}
	return Result{}, false
}

// LockPlan is the compare-and-swap a claim that PrecheckClaim let through makes on the
// Lease it read: the generation it must carry ("" creates the Lease), or no swap at all
// when the Lease is already this claim's. It reads what PrecheckClaim reads, and gives
// what DecideClaim's Acquisition gives for the same Lease, so the swap may be made while
// the target is still being re-read; DecideClaim decides the claim afterwards, on that
// re-read and this same Lease read, and a claim it refuses gives the Lease back.
func LockPlan(in ClaimInput) Acquisition {
	expected, held, _ := clauseCompareAndSwap(in)
	return Acquisition{ExpectedGeneration: expected, AlreadyHeld: held}
}

// loss is clause (e): the single way a claim refusal is built. Class,
// blocker and message come from the rule; the only target is the requested
// one; contention is flagged normal; fresh inspection is required and retry
// is never permitted.
func loss(id ruleID, requested Target) Result {
	return refusal(id, OutcomeNotAcquired, requested)
}

// ContentionLoss is the typed result for a compare-and-swap the reconciler
// itself lost (Lease update conflict, Gitea content_version 409, read-back
// showing another holder). predicate is one of the Predicate constants; any
// other value is reported as claim_cas_conflict, so free text from the
// caller never reaches a worker.
func ContentionLoss(predicate string, target Target) Result {
	return contentionLoss(predicate, target)
}

// PublicationFailed is the final result when the authoritative record could not be
// published for a reason other than losing to another claim (Gitea unavailable, a write
// that could not be verified): the lock was only a reservation, so nothing activates.
// It is a stale_state refusal, not contention: no other claim won.
func PublicationFailed(target Target) Result {
	return loss(ruleClaimNotPublished, target)
}

func contentionLoss(predicate string, target Target) Result {
	id := ruleClaimCASConflict
	switch predicate {
	case PredicateLeaseCASConflict:
		id = ruleLeaseCASConflict
	case PredicateContentVersionConflict:
		id = ruleContentVersionConflict
	case PredicateClaimGenerationAdvanced:
		id = ruleClaimGenerationAdvanced
	case PredicateClaimRecordNotOurs:
		id = ruleClaimRecordNotOurs
	case PredicateLeaseNotHeld:
		id = ruleLeaseNotHeld
	}
	return loss(id, target)
}

// clausePinRequired is clause (a).
func clausePinRequired(pinned string, v Validation) ruleID {
	if strings.TrimSpace(pinned) == "" {
		return rulePinMissing
	}
	if v.Pin == "" || pinned != v.Pin || ComputePin(v.PinComponents) != v.Pin {
		return rulePinMismatch
	}
	return ""
}

// clauseNoSubstitution is clause (d).
func clauseNoSubstitution(spec Target, v Validation) ruleID {
	if !spec.Identical(v.Target) {
		return ruleTargetSubstituted
	}
	return ""
}

// clauseRevalidate is clause (b): compare each pinned component with its
// fresh value, naming the first that moved, then rerun the whole validation
// on fresh state. The Lease generation is left to clause (c).
func clauseRevalidate(in ClaimInput) (Validation, ruleID) {
	v := in.Validated
	switch {
	case v.RuleSetDigest != RuleSetDigest():
		return Validation{}, ruleRuleSetChanged
	case in.Worker.Name != v.Worker:
		return Validation{}, ruleWorkerChanged
	case norm(in.Worker.Identity) != norm(v.Identity):
		return Validation{}, ruleIdentityChanged
	case CanonicalBinding(in.Worker.Repository, in.Where) != norm(v.RepositoryBinding):
		return Validation{}, ruleRepositoryBindingChanged
	case in.CapabilityVerdict != v.CapabilityVerdict:
		return Validation{}, ruleCapabilityVerdictChanged
	case !in.Fresh.Target.SameItem(in.Spec):
		return Validation{}, ruleTargetStateMismatch
	case in.Spec.Kind == KindPullRequest && !sameSHA(in.Fresh.Target.HeadSHA, v.HeadSHA):
		return Validation{}, ruleHeadSHAMoved
	case !sameSHA(in.Fresh.ParityRevision, v.ParityRevision):
		return Validation{}, ruleParityRevisionMoved
	case !sameStrings(DependencyStates(in.Fresh.Dependencies), v.DependencyStates):
		return Validation{}, ruleDependencyStateMoved
	}
	fresh, id := evaluate(ValidateInput{
		Worker:               in.Worker,
		ClaimID:              in.ClaimID,
		Requested:            in.Spec,
		State:                in.Fresh,
		ControllerRepository: in.ControllerRepository,
		Where:                in.Where,
		CapabilityVerdict:    in.CapabilityVerdict,
		Now:                  in.Now,
		OtherClaims:          in.OtherClaims,
	})
	if id != "" {
		return Validation{}, id
	}
	if fresh.Role != v.Role {
		return Validation{}, ruleRoleMoved
	}
	// Every component but the generation was compared above; the full pin
	// over the fresh components (at the pinned generation) must reproduce the
	// issued pin exactly.
	check := fresh.PinComponents
	check.ClaimGeneration = v.ClaimGeneration
	if ComputePin(check) != v.Pin {
		return Validation{}, rulePinMismatch
	}
	return fresh, ""
}

// clauseCompareAndSwap is clause (c): the Lease must be at the pinned
// generation, unless this very claim already holds it.
func clauseCompareAndSwap(in ClaimInput) (expected string, alreadyHeld bool, id ruleID) {
	if in.ClaimID != "" && strings.TrimSpace(in.Fresh.LeaseHolder) == in.ClaimID {
		return in.Fresh.LeaseGeneration, true, ""
	}
	if in.Fresh.LeaseGeneration != in.Validated.ClaimGeneration {
		return "", false, ruleClaimGenerationAdvanced
	}
	return in.Validated.ClaimGeneration, false, ""
}
