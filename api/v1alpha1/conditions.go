package v1alpha1

import (
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// Condition types shared by the kinds of this group. They follow Flux and kstatus.
const (
	// ReadyCondition is always present once the controller has seen the object. True means
	// the object reached what its spec asks for: a registration was assessed, a plan was
	// planned or cleanly applied, a claim is active or was given back by its worker. A
	// refusal or a failure is never Ready, so `kubectl wait --for=condition=Ready` does not
	// report success for one.
	ReadyCondition = "Ready"
	// StalledCondition is present only while true: the object is final and did not
	// succeed (a refused claim, an expired or revoked capability, an approval that can
	// never match, an apply that was refused, failed or stopped part-way). Nothing more
	// happens to it; a new attempt is a new object.
	StalledCondition = "Stalled"
	// ReconcilingCondition is present only while true: the controller is still working
	// towards what the spec asks for (a fleet plan waiting for its host plans, an approved
	// plan being applied, an approver looked at again). kstatus reads it as InProgress, so
	// Flux's wait and Argo CD's health (the shipped health check) wait for the end.
	ReconcilingCondition = "Reconciling"
)

// Reasons for ReadyCondition of a WorkerRegistration.
const (
	// ReasonReconciled is used when a WorkerRegistration was assessed.
	ReasonReconciled = "Reconciled"
	// ReasonNoHostAgent is used when no agent holds the registration's host: its ownership
	// state rests on the heartbeat alone (a fresh heartbeat stays live, since no probe can
	// withdraw it), written by the fleet coordinator.
	ReasonNoHostAgent = "NoHostAgent"
)

// RepositoryBoundCondition says whether a WorkerRegistration's spec.repository names a
// repository of its namespace: a GiteaRepository there that names it (exactly one), or
// the manager's --repository repository. A registration bound to nothing here holds no
// claim here: its claims are refused as repositories of no object are.
const RepositoryBoundCondition = "RepositoryBound"

// Reasons for RepositoryBoundCondition.
const (
	// ReasonRepositoryBound: the binding names a repository of the namespace (True).
	ReasonRepositoryBound = "Bound"
	// ReasonRepositoryNotBound: it names none, or which one cannot be told (False; the
	// message says why).
	ReasonRepositoryNotBound = "NotBound"
)

// RetirementPlan condition types.
const (
	// ApprovedCondition is True only when spec.approval matches the plan exactly and the
	// approver holds the approve verb. It gates apply; nothing else does.
	ApprovedCondition = "Approved"
	// AppliedCondition is True only when an approved plan was applied cleanly.
	AppliedCondition = "Applied"
	// PagesReadyCondition is True once every row's verdict is in the plan's pages
	// (status.pages). A plan is planned first, with complete counts and the first rows of
	// each list in status; its pages follow. Approving does not wait for them: apply never
	// reads pages.
	PagesReadyCondition = "PagesReady"
)

// RetirementPlan reasons (for Ready, Stalled, Approved and Applied). They are defined in
// internal/retirement, which decides them.
const (
	// ReasonPlanned is used once a dry-run plan is in status (Ready=True).
	ReasonPlanned = retirement.ConditionPlanned
	// ReasonAwaitingApproval is used while spec.approval is unset (Approved=False).
	ReasonAwaitingApproval = retirement.ConditionAwaitingApproval
	// ReasonApprovalMatches is used when the approval repeats the plan exactly (Approved=True).
	ReasonApprovalMatches = retirement.ConditionApprovalMatches
	// ReasonApprovalMismatch is used when a token or the identity list differs from the
	// plan. spec.approval is set once, so the plan is Stalled.
	ReasonApprovalMismatch = retirement.ConditionApprovalMismatch
	// ReasonApproverNotAuthorized is used when the approver lacks the approve verb; the
	// plan is looked at again, since an operator may bind the approver role later.
	ReasonApproverNotAuthorized = retirement.ConditionApproverNotAuthorized
	// ReasonApprovalPolicyMissing is used when the admission policy that guards approvals
	// (or its binding) is absent, or was not in place unchanged since before the plan was
	// created (Approved=False, final).
	ReasonApprovalPolicyMissing = retirement.ConditionApprovalPolicyMissing
	// ReasonApprovalPolicyAltered is used when that policy or its binding differs from the
	// shipped one (Approved=False, final).
	ReasonApprovalPolicyAltered = retirement.ConditionApprovalPolicyAltered
	// ReasonApproverIsWorker is used when the approver is a worker's ServiceAccount
	// (Approved=False, final).
	ReasonApproverIsWorker = retirement.ConditionApproverIsWorker
	// ReasonApplySucceeded is used when the apply ran to its end (Ready=True, Applied=True).
	ReasonApplySucceeded = retirement.ConditionApplySucceeded
	// ReasonApplying is used while an approved plan is applied (Ready=False and
	// Reconciling=True).
	ReasonApplying = retirement.ConditionApplying
	// ReasonNothingToApply is used when every requested row was already retired, or no
	// row was requested (Ready=True, Applied=False).
	ReasonNothingToApply = retirement.ConditionNothingToApply
	// ReasonApplyPartial is used when the apply stopped part-way; see status.applyPreserved
	// (Ready=False, Stalled=True).
	ReasonApplyPartial = retirement.ConditionApplyPartial
	// ReasonApplyRefused is used when the apply wrote nothing because the registry or the
	// candidate set moved (Ready=False, Stalled=True).
	ReasonApplyRefused = retirement.ConditionApplyRefused
	// ReasonApplyFailed is used for transaction_failed (Ready=False, Stalled=True).
	ReasonApplyFailed = retirement.ConditionApplyFailed
	// ReasonWaitingForHostPlans is used on a fleet plan while the agents of its hosts
	// have not yet planned, or applied, their host plans (Ready=False).
	ReasonWaitingForHostPlans = "WaitingForHostPlans"
	// ReasonApprovedThroughFleetPlan is used on a host plan whose fleet plan is Approved
	// and still covers the host plan's candidates (Approved=True).
	ReasonApprovedThroughFleetPlan = "ApprovedThroughFleetPlan"
	// ReasonAwaitingFleetApproval is used on a host plan while its fleet plan is not
	// Approved (Approved=False).
	ReasonAwaitingFleetApproval = "AwaitingFleetApproval"
	// ReasonPagesWritten is used when every page is written (PagesReady=True).
	ReasonPagesWritten = retirement.ConditionPagesWritten
	// ReasonWritingPages is used while a planned plan's pages are being written
	// (PagesReady=False).
	ReasonWritingPages = retirement.ConditionWritingPages
	// ReasonPagesNotWritten is used when the pages could not be written, or the agent that
	// planned stopped before writing them (PagesReady=False, final). Counts, fingerprints
	// and the status lists stay right; a new plan pages every row.
	ReasonPagesNotWritten = retirement.ConditionPagesNotWritten
)

// TaskClaim condition types.
const (
	// ValidatedCondition is True while a pin for the current state is in status.validation.
	ValidatedCondition = "Validated"
	// ClaimedCondition is True once the claim won the lock and was published in Gitea.
	ClaimedCondition = "Claimed"
	// CapabilityActiveCondition is True only while status.capability may be used.
	CapabilityActiveCondition = "CapabilityActive"
	// RecordClearedCondition is present once a claim that won its lock is final: False
	// while its Gitea record is still to be ended (the finalizer stays), True once the
	// record was ended and the lock freed.
	RecordClearedCondition = "RecordCleared"
)

// TaskClaim reasons. An ended claim's Ready and Stalled carry its final phase as the
// reason (Released, Completed, Expired, Revoked).
const (
	// ReasonAwaitingPin is used while the worker has not copied the pin into spec.pin
	// (Ready=False).
	ReasonAwaitingPin = "AwaitingPin"
	// ReasonRejected is used for a typed refusal; see status.result (Ready=False,
	// Stalled=True).
	ReasonRejected = claim.PhaseRejected
	// ReasonAcquired is used when the claim was won and published (Ready=True).
	ReasonAcquired = "Acquired"
	// ReasonEnded is used on CapabilityActive when an active capability ended; see
	// status.endedReason.
	ReasonEnded = "Ended"
	// ReasonClearPending is used on RecordCleared=False while the record is being ended.
	ReasonClearPending = "ClearPending"
	// ReasonGiteaUnavailable is used on RecordCleared=False when ending the record failed;
	// the message carries the error, and the controller retries with a capped backoff.
	ReasonGiteaUnavailable = "GiteaUnavailable"
	// ReasonCleared is used on RecordCleared=True.
	ReasonCleared = "Cleared"
	// ReasonRepositoryNotReady is the Warning Event of a claim refused, or ended, because
	// its repository's GiteaRepository is not fit for claims (or no longer the one its
	// validation found); the Event says why, the refusal itself stays neutral.
	ReasonRepositoryNotReady = "RepositoryNotReady"
)
