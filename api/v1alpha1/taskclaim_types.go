package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// Target kinds (defined in internal/claim).
const (
	TargetKindIssue       = string(claim.KindIssue)
	TargetKindPullRequest = string(claim.KindPullRequest)
)

// TaskClaim phases. They are defined once, in internal/claim, and re-exported here for
// clients of the API.
const (
	ClaimPhasePending   = claim.PhasePending
	ClaimPhaseValidated = claim.PhaseValidated
	ClaimPhaseActive    = claim.PhaseActive
	ClaimPhaseRejected  = claim.PhaseRejected
	ClaimPhaseReleased  = claim.PhaseReleased
	ClaimPhaseCompleted = claim.PhaseCompleted
	ClaimPhaseExpired   = claim.PhaseExpired
	ClaimPhaseRevoked   = claim.PhaseRevoked
)

// TaskTarget is the one Gitea issue or pull request a worker chose.
// +kubebuilder:validation:XValidation:rule="self.kind != 'PullRequest' || (has(self.headSHA) && size(self.headSHA) > 0)",message="headSHA is required when kind is PullRequest"
type TaskTarget struct {
	// repository is the canonical "owner/name" Gitea repository of the target.
	// +required
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`
	Repository string `json:"repository"`

	// kind is Issue or PullRequest.
	// +required
	// +kubebuilder:validation:Enum=Issue;PullRequest
	Kind string `json:"kind"`

	// number is the issue or pull request number in that repository.
	// +required
	// +kubebuilder:validation:Minimum=1
	Number int64 `json:"number"`

	// headSHA is the pull request head commit the worker inspected. Required for pull
	// requests; a claim never widens to another head.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{7,64}$`
	HeadSHA string `json:"headSHA,omitempty"`
}

// TaskClaimSpec is a worker's choice of one task. The controller derives the role, never
// the worker; the controller never picks a different task.
type TaskClaimSpec struct {
	// worker is the name of the claiming worker's WorkerRegistration in this namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.worker is immutable"
	Worker string `json:"worker"`

	// target is the chosen issue or pull request.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.target is immutable: a different task is a new TaskClaim"
	Target TaskTarget `json:"target"`

	// pin is status.validation.pin copied by the worker to ask for the claim. It can be set
	// once; no claim proceeds without it.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	Pin string `json:"pin,omitempty"`

	// release set to true gives the task back; the capability is revoked at once.
	// +optional
	Release bool `json:"release,omitempty"`

	// cycleComplete set to true reports the work cycle finished; the capability expires.
	// +optional
	CycleComplete bool `json:"cycleComplete,omitempty"`
}

// ClaimValidation is the pinned task state the controller validated.
type ClaimValidation struct {
	// pin is a sha256 fingerprint over every pinned component below. Copy it to spec.pin.
	Pin string `json:"pin"`
	// target is the target that was validated: repository, kind, number and head. At claim
	// time spec.target must be identical to it, or the claim is refused as
	// target_substituted (no substitution between validation and claim). A validation
	// without it (recorded by an older controller) cannot be claimed: validate again.
	// +optional
	Target *TaskTarget `json:"target,omitempty"`
	// role is the temporary role derived from the target's kind and state.
	Role string `json:"role"`
	// operations are the operations the role would permit.
	// +optional
	Operations []string `json:"operations,omitempty"`
	// identity is the worker's Gitea identity at validation time.
	Identity string `json:"identity"`
	// capabilityVerdict is the authorization verdict for the worker at validation time.
	CapabilityVerdict string `json:"capabilityVerdict"`
	// repositoryBinding is the canonical value of the worker's repository binding, the
	// one the pin covers: "gitea:<GiteaServer>/<repository ID>" for a repository of a
	// GiteaRepository (a rename in Gitea does not change it), the lower-cased
	// "owner/name" for the repository of the manager's --repository flag.
	RepositoryBinding string `json:"repositoryBinding"`
	// parityRevision is the head of the target's base branch.
	// +optional
	ParityRevision string `json:"parityRevision,omitempty"`
	// dependencyStates are the dependency edges and their states ("owner/name#N=closed").
	// +optional
	DependencyStates []string `json:"dependencyStates,omitempty"`
	// headSHA is the pull request head (empty for issues).
	// +optional
	HeadSHA string `json:"headSHA,omitempty"`
	// claimGeneration is the resourceVersion of the per-target lock ("" when none existed).
	// +optional
	ClaimGeneration string `json:"claimGeneration,omitempty"`
	// ruleSetDigest is the digest of the rule set the validation ran under.
	RuleSetDigest string `json:"ruleSetDigest"`
	// validatedAt is when the validation ran.
	ValidatedAt metav1.Time `json:"validatedAt"`
}

// ClaimResult is the typed result of the last decision. A refusal names only the
// requested target, never another task, and is never retried by the controller.
type ClaimResult struct {
	// outcome is validated (a pin was issued), acquired (the claim is active), rejected or
	// not_acquired (refused, see class), or, once an acquired claim has ended, how it ended:
	// released, completed, expired or revoked (the same as status.phase, see endedReason).
	// +kubebuilder:validation:Enum=validated;acquired;rejected;not_acquired;released;completed;expired;revoked
	Outcome string `json:"outcome"`
	// class is one of stale_state, contention, policy, eligibility, authority (refusals).
	// +optional
	// +kubebuilder:validation:Enum=stale_state;contention;policy;eligibility;authority
	Class string `json:"class,omitempty"`
	// blocker distinguishes foreign_claimed, dependency_gated, terminal, ineligible and stale
	// targets.
	// +optional
	Blocker string `json:"blocker,omitempty"`
	// failedPredicate names the predicate that failed.
	// +optional
	FailedPredicate string `json:"failedPredicate,omitempty"`
	// ruleID is the id of the rule in the published rule set.
	// +optional
	RuleID string `json:"ruleID,omitempty"`
	// message is the rule's fixed message.
	// +optional
	Message string `json:"message,omitempty"`
	// contentionIsNormal is true for contention: losing a race is an expected outcome.
	// +optional
	ContentionIsNormal bool `json:"contentionIsNormal,omitempty"`
	// reassessFromFreshState is true for refusals: inspect fresh state before choosing again.
	// +optional
	ReassessFromFreshState bool `json:"reassessFromFreshState,omitempty"`
	// retryPermitted is always false for refusals: the same claim is never retried.
	RetryPermitted bool `json:"retryPermitted"`
	// ruleSetDigest is the digest of the rule set the decision ran under.
	// +optional
	RuleSetDigest string `json:"ruleSetDigest,omitempty"`
}

// ClaimTargetRef is the bound target of a capability.
type ClaimTargetRef struct {
	// kind is Issue or PullRequest.
	Kind string `json:"kind"`
	// number is the issue or pull request number.
	Number int64 `json:"number"`
	// headSHA is the bound pull request head (empty for issues).
	// +optional
	HeadSHA string `json:"headSHA,omitempty"`
}

// ClaimRepository is the Gitea repository a claim's target was found in when the claim
// was validated. The later steps of the claim work on this repository, and end what the
// claim holds there, whatever the GiteaRepositories of the namespace say by then.
type ClaimRepository struct {
	// server is the GiteaServer the repository is on. Empty for the repository the
	// manager's --gitea-url and --repository flags name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Server string `json:"server,omitempty"`
	// id is the Gitea repository ID: with server, the repository's key, which a rename in
	// Gitea does not change. Zero for the flags' repository, which is known by its name.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ID int64 `json:"id,omitempty"`
	// lockName is the claim's per-target lock, a coordination.k8s.io Lease in the claim's
	// namespace, named after (server, id, kind, number).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	LockName string `json:"lockName"`
}

// TaskCapability is the narrow, expiring capability a won claim activates. It is bound to
// eight dimensions: worker, repository, target, role, operations, pin, claim (lease and
// Gitea record) and expiry.
type TaskCapability struct {
	// worker is the WorkerRegistration name.
	Worker string `json:"worker"`
	// identity is the worker's Gitea identity.
	Identity string `json:"identity"`
	// repository is the bound "owner/name" repository.
	Repository string `json:"repository"`
	// target is the bound issue or pull request.
	Target ClaimTargetRef `json:"target"`
	// role is the derived temporary role.
	Role string `json:"role"`
	// operations are the only operations permitted.
	Operations []string `json:"operations"`
	// pin is the validation pin the claim consumed.
	Pin string `json:"pin"`
	// claimID identifies the authoritative claim record published in Gitea.
	ClaimID string `json:"claimID"`
	// leaseName is the per-target lock (coordination.k8s.io Lease) the claim holds.
	LeaseName string `json:"leaseName"`
	// leaseGeneration is the lock's resourceVersion written by the winning compare-and-swap.
	LeaseGeneration string `json:"leaseGeneration"`
	// expiresAt is when the capability expires on its own.
	ExpiresAt metav1.Time `json:"expiresAt"`
	// workBranch is the branch an author's capability pushes to and opens its pull request
	// from, fleet/<namespace>/<claim>; empty for roles that push nothing. It is shown for
	// the worker: the gateway derives the branch from the claim's name, never from here.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	WorkBranch string `json:"workBranch,omitempty"`
}

// TaskClaimStatus is the observed state of a claim.
type TaskClaimStatus struct {
	// conditions: Ready is True while the claim is Active, and after its worker released
	// or completed it; it is False while the claim waits for its pin. Stalled is present,
	// and True, only when the claim is final without that: refused (see result), expired
	// or revoked (see endedReason). Validated is True once a pin was issued, Claimed once
	// the claim won its lock and was published in Gitea, and CapabilityActive only while
	// status.capability may be used. RecordCleared appears once a claim that won its lock
	// is final: False (reason ClearPending, or GiteaUnavailable with the error) while its
	// Gitea record is still in force, during which the claim keeps its finalizer and the
	// controller retries with a capped exponential backoff; True once the record was ended
	// and the lock freed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase is Pending, Validated, Active, Rejected, Released, Completed, Expired or Revoked.
	// +optional
	// +kubebuilder:validation:Enum=Pending;Validated;Active;Rejected;Released;Completed;Expired;Revoked
	Phase string `json:"phase,omitempty"`
	// role is the derived temporary role (empty while neutral).
	// +optional
	Role string `json:"role,omitempty"`
	// validation is the pinned state the worker copies into spec.pin.
	// +optional
	Validation *ClaimValidation `json:"validation,omitempty"`
	// identityKey is the Gitea identity the validation bound (validation.identity),
	// case-folded as Gitea compares logins. It is a field selector: the one-claim-per-worker
	// check finds every claim of an identity with it, and so can you
	// (kubectl get taskclaims -A --field-selector status.identityKey=NAME).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	IdentityKey string `json:"identityKey,omitempty"`
	// result is the typed result of the last decision.
	// +optional
	Result *ClaimResult `json:"result,omitempty"`
	// repository is the Gitea repository the target was found in at validation.
	// +optional
	Repository *ClaimRepository `json:"repository,omitempty"`
	// capability is present only while the claim is Active.
	// +optional
	Capability *TaskCapability `json:"capability,omitempty"`
	// endedReason is why an active capability ended (release, cycle_complete, expired,
	// block, failed_validation, stale_state, ownership_loss).
	// +optional
	EndedReason string `json:"endedReason,omitempty"`
	// endedAt is when the capability ended.
	// +optional
	EndedAt *metav1.Time `json:"endedAt,omitempty"`
}

// TaskClaim is a worker's request to take one Gitea issue or pull request. The controller
// derives the role, validates and pins the state, then, once the worker repeats the pin,
// publishes one authoritative claim in Gitea and activates a narrow, expiring capability.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tclaim;tc,categories=fleet
// +kubebuilder:selectablefield:JSONPath=`.spec.worker`
// +kubebuilder:selectablefield:JSONPath=`.status.phase`
// +kubebuilder:selectablefield:JSONPath=`.status.identityKey`
// +kubebuilder:printcolumn:name="Worker",type=string,JSONPath=`.spec.worker`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.target.kind`
// +kubebuilder:printcolumn:name="Number",type=integer,JSONPath=`.spec.target.number`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.status.role`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.status.result.class`,priority=1
// +kubebuilder:printcolumn:name="Branch",type=string,JSONPath=`.status.capability.workBranch`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.pin) || (has(self.spec.pin) && self.spec.pin == oldSelf.spec.pin)",message="spec.pin can be set only once"
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.spec.release) && oldSelf.spec.release) || (has(self.spec.release) && self.spec.release)",message="spec.release cannot be undone"
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.spec.cycleComplete) && oldSelf.spec.cycleComplete) || (has(self.spec.cycleComplete) && self.spec.cycleComplete)",message="spec.cycleComplete cannot be undone"
type TaskClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the worker's choice of task.
	// +required
	Spec TaskClaimSpec `json:"spec"`

	// status is the controller's decision and the active capability, if any.
	// +optional
	Status TaskClaimStatus `json:"status,omitempty"`
}

// TaskClaimList is a list of TaskClaim.
//
// +kubebuilder:object:root=true
type TaskClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TaskClaim `json:"items"`
}
