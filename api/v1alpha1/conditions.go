package v1alpha1

// Condition types shared by the kinds of this group.
const (
	// ReadyCondition is always present once the controller has seen the object. True means
	// the last reconcile reached a final answer for the current generation.
	ReadyCondition = "Ready"
	// StalledCondition is present only while true: the object cannot make progress without
	// a change to its spec (for example an invalid reference).
	StalledCondition = "Stalled"
)

// Reasons for ReadyCondition and StalledCondition.
const (
	// ReasonReconciled is used when a WorkerRegistration was assessed.
	ReasonReconciled = "Reconciled"
	// ReasonProgressing is used while the controller still works toward a final answer.
	ReasonProgressing = "Progressing"
	// ReasonFailed is used when a reconcile failed with a transient error.
	ReasonFailed = "Failed"
	// ReasonInvalidSpec is used when the spec cannot be acted on.
	ReasonInvalidSpec = "InvalidSpec"
)

// RetirementPlan condition types.
const (
	// ApprovedCondition is True only when spec.approval matches the plan exactly and the
	// approver holds the approve verb. It gates apply; nothing else does.
	ApprovedCondition = "Approved"
	// AppliedCondition reports whether an approved plan was applied.
	AppliedCondition = "Applied"
)

// RetirementPlan reasons.
const (
	// ReasonPlanned is used once a dry-run plan is in status.
	ReasonPlanned = "Planned"
	// ReasonAwaitingApproval is used while spec.approval is unset.
	ReasonAwaitingApproval = "AwaitingApproval"
	// ReasonApprovalMatches is used when the approval repeats the plan exactly.
	ReasonApprovalMatches = "ApprovalMatchesPlan"
	// ReasonApprovalMismatch is used when a token or the identity list differs from the plan.
	ReasonApprovalMismatch = "ApprovalMismatch"
	// ReasonApproverNotAuthorized is used when the approver lacks the approve verb.
	ReasonApproverNotAuthorized = "ApproverNotAuthorized"
	// ReasonApplySucceeded is used when every requested row was retired.
	ReasonApplySucceeded = "ApplySucceeded"
	// ReasonApplyPartial is used when the apply stopped part-way; see status.applyPreserved.
	ReasonApplyPartial = "ApplyPartial"
	// ReasonApplyRefused is used when the apply wrote nothing (moved tokens, nothing
	// requested, already retired).
	ReasonApplyRefused = "ApplyRefused"
	// ReasonApplyFailed is used for transaction_failed.
	ReasonApplyFailed = "ApplyFailed"
)

// TaskClaim condition types.
const (
	// ValidatedCondition is True while a pin for the current state is in status.validation.
	ValidatedCondition = "Validated"
	// ClaimedCondition is True once the claim won the lock and was published in Gitea.
	ClaimedCondition = "Claimed"
	// CapabilityActiveCondition is True only while status.capability may be used.
	CapabilityActiveCondition = "CapabilityActive"
)

// TaskClaim reasons.
const (
	// ReasonAwaitingPin is used while the worker has not copied the pin into spec.pin.
	ReasonAwaitingPin = "AwaitingPin"
	// ReasonRejected is used for a typed refusal; see status.result.
	ReasonRejected = "Rejected"
	// ReasonAcquired is used when the claim was won and published.
	ReasonAcquired = "Acquired"
	// ReasonEnded is used when an active capability ended; see status.endedReason.
	ReasonEnded = "Ended"
)
