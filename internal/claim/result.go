package claim

// Outcome is the headline of a Result.
type Outcome string

const (
	// OutcomeValidated: every predicate held; for Validate a pin was issued,
	// for DecideClaim the reconciler may perform the compare-and-swap.
	OutcomeValidated Outcome = "validated"
	// OutcomeAcquired: the claim is authoritative and the capability active.
	OutcomeAcquired Outcome = "acquired"
	// OutcomeRejected: validation refused the requested target.
	OutcomeRejected Outcome = "rejected"
	// OutcomeNotAcquired: the claim was not acquired. Final for this claim.
	OutcomeNotAcquired Outcome = "not_acquired"

	// Outcomes of a claim that was acquired and has ended: the phase it ended in.
	// OutcomeReleased: the worker gave the task back.
	OutcomeReleased Outcome = "released"
	// OutcomeCompleted: the work cycle finished.
	OutcomeCompleted Outcome = "completed"
	// OutcomeExpired: the capability ran past its expiry.
	OutcomeExpired Outcome = "expired"
	// OutcomeRevoked: the capability was taken away.
	OutcomeRevoked Outcome = "revoked"
)

// EndResult is the result an ended claim shows: its outcome is the ending (released,
// completed, expired or revoked, as the final phase says), so a reader never sees
// "acquired" on a claim whose capability is gone.
func EndResult(phase string, requested Target) Result {
	outcome := OutcomeRevoked
	switch phase {
	case PhaseReleased:
		outcome = OutcomeReleased
	case PhaseCompleted:
		outcome = OutcomeCompleted
	case PhaseExpired:
		outcome = OutcomeExpired
	}
	return success(outcome, requested)
}

// Class is the failure class of a refusal. The five classes are distinct and
// every refusal has exactly one.
type Class string

const (
	// ClassStaleState: something pinned or requested no longer matches fresh state.
	ClassStaleState Class = "stale_state"
	// ClassContention: another claim holds or won the target. A normal outcome.
	ClassContention Class = "contention"
	// ClassPolicy: the request breaks a protocol rule (binding, shape, missing pin).
	ClassPolicy Class = "policy"
	// ClassEligibility: the target cannot confer a role now (terminal, gated, blocked).
	ClassEligibility Class = "eligibility"
	// ClassAuthority: the worker may not act (registration, verdict, independence).
	ClassAuthority Class = "authority"
)

// Classes lists every failure class.
func Classes() []Class {
	return []Class{ClassStaleState, ClassContention, ClassPolicy, ClassEligibility, ClassAuthority}
}

// Blocker says what about the requested target blocks it. Refusals that are
// not about the target (worker, binding, pin) carry BlockerNone.
type Blocker string

const (
	// BlockerNone: the refusal is not caused by the target.
	BlockerNone Blocker = ""
	// BlockerForeignClaimed: another claim holds the target.
	BlockerForeignClaimed Blocker = "foreign_claimed"
	// BlockerDependencyGated: an unresolved dependency gates the target.
	BlockerDependencyGated Blocker = "dependency_gated"
	// BlockerTerminal: the target is closed or merged.
	BlockerTerminal Blocker = "terminal"
	// BlockerIneligible: the target confers no role this worker may take.
	BlockerIneligible Blocker = "ineligible"
	// BlockerStale: the target's state moved away from what was requested or pinned.
	BlockerStale Blocker = "stale"
)

// Blockers lists every non-empty blocker.
func Blockers() []Blocker {
	return []Blocker{BlockerForeignClaimed, BlockerDependencyGated, BlockerTerminal, BlockerIneligible, BlockerStale}
}

// Result is the typed answer of every decision. It has room for one target
// only, the one that was requested, and its message is the fixed message of
// the rule that refused, so nothing in it can point a worker at another task.
type Result struct {
	// Outcome is validated, acquired, rejected or not_acquired; for an ended claim,
	// released, completed, expired or revoked.
	Outcome Outcome `json:"outcome"`
	// Class is the failure class; empty on success.
	Class Class `json:"class,omitempty"`
	// Blocker is the target blocker; empty on success and for non-target failures.
	Blocker Blocker `json:"blocker,omitempty"`
	// FailedPredicate is the predicate of the refusing rule.
	FailedPredicate string `json:"failedPredicate,omitempty"`
	// RuleID is the id of the refusing rule in the published rule set.
	RuleID string `json:"ruleID,omitempty"`
	// Message is the refusing rule's fixed message.
	Message string `json:"message,omitempty"`
	// Target is the requested target and nothing else.
	Target Target `json:"target"`
	// ContentionIsNormal is true for class contention.
	ContentionIsNormal bool `json:"contentionIsNormal"`
	// ReassessFromFreshState is true for every refusal: the worker must inspect
	// fresh state before choosing again.
	ReassessFromFreshState bool `json:"reassessFromFreshState"`
	// RetryPermitted is always false: no refusal may be retried as the same
	// claim, and the controller never retries one.
	RetryPermitted bool `json:"retryPermitted"`
	// RuleSetDigest is the digest of the rule set the decision ran under.
	RuleSetDigest string `json:"ruleSetDigest"`
}

// Refused reports whether the result is a refusal (not an ending: an ended claim was
// acquired first).
func (r Result) Refused() bool {
	return r.Outcome == OutcomeRejected || r.Outcome == OutcomeNotAcquired
}

// refusal builds the Result for rule id. Class, blocker, predicate and
// message all come from the rule set; only the outcome and the requested
// target vary.
func refusal(id ruleID, outcome Outcome, requested Target) Result {
	rule := ruleFor(id)
	return Result{
		Outcome:                outcome,
		Class:                  rule.Class,
		Blocker:                rule.Blocker,
		FailedPredicate:        rule.Predicate,
		RuleID:                 rule.ID,
		Message:                rule.Message,
		Target:                 requested,
		ContentionIsNormal:     rule.Class == ClassContention,
		ReassessFromFreshState: true,
		RetryPermitted:         false,
		RuleSetDigest:          RuleSetDigest(),
	}
}

// success builds a non-refusal Result.
func success(outcome Outcome, requested Target) Result {
	return Result{Outcome: outcome, Target: requested, RuleSetDigest: RuleSetDigest()}
}
