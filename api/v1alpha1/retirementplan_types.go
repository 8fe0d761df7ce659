package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/giteatools/fleet-controller/internal/retirement"
)

// Outcome values of a RetirementPlan (the specification's outcome strings, defined in
// internal/retirement).
const (
	OutcomePlanned               = retirement.OutcomePlanned
	OutcomeApplied               = retirement.OutcomeApplied
	OutcomeRegistryRevisionMoved = retirement.OutcomeRegistryRevisionMoved
	OutcomeCandidateSetMoved     = retirement.OutcomeCandidateSetMoved
	OutcomeAlreadyRetired        = retirement.OutcomeAlreadyRetired
	OutcomeNothingRequested      = retirement.OutcomeNothingRequested
	OutcomeTransactionFailed     = retirement.OutcomeTransactionFailed
)

// Approval bindings (spec.approval.binding), defined in internal/retirement.
const (
	ApprovalBindingRegistry     = retirement.BindingRegistry
	ApprovalBindingCandidateSet = retirement.BindingCandidateSet
)

// RetirementApproval is the reviewer's approval of one exact plan, committed to Git and
// applied by the GitOps tool. It must repeat the plan's tokens and identities exactly.
// +kubebuilder:validation:XValidation:rule="!has(self.binding) || self.binding != 'Registry' || has(self.registryFingerprint)",message="spec.approval.registryFingerprint is required when binding is Registry: copy status.registryFingerprint, or leave binding out (or set CandidateSet) to bind the candidate set alone"
// +kubebuilder:validation:XValidation:rule="!has(self.registryFingerprint) || !has(self.binding) || self.binding != 'CandidateSet'",message="spec.approval.registryFingerprint must be absent when binding is CandidateSet: that approval binds the candidate set alone (candidateFingerprint and workerIdentities)"
type RetirementApproval struct {
	// binding says what the approval binds, and so what must not have changed between
	// the plan and the apply. Left out, it is CandidateSet, unless the approval carries a
	// registryFingerprint: then it is Registry, since an approval is never held to less
	// than the tokens it names. kubectl fleet approve writes the same default.
	//
	// Registry binds the whole registry of the namespace: registryFingerprint is
	// required, and the apply goes ahead only if no registration in the namespace changed
	// since the plan; otherwise it ends registry_revision_moved and writes nothing. Any
	// heartbeat of any worker counts, so in a namespace with live workers only a prompt
	// approval can pass. Choose it for a namespace whose workers are all gone.
	//
	// CandidateSet (the default) binds the candidate set alone: candidateFingerprint and
	// workerIdentities; registryFingerprint must be absent. At apply the controller plans
	// afresh and applies that fresh plan at once: it ends candidate_set_moved, writing
	// nothing, unless the fresh candidates are exactly the approved ones with every
	// fingerprinted field unchanged (a heartbeat, a phase, a pid, a session of any
	// approved row counts). Other rows, such as live workers renewing their heartbeats,
	// may change. Each row is still written only if its resourceVersion is the one just
	// read, after the workflow fence and a liveness re-probe of its process.
	// +optional
	// +kubebuilder:validation:Enum=Registry;CandidateSet
	Binding string `json:"binding,omitempty"`

	// registryFingerprint is the plan's status.registryFingerprint, copied verbatim.
	// Required when binding is Registry, and naming it with binding left out makes the
	// binding Registry; must be absent when binding is CandidateSet.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	RegistryFingerprint string `json:"registryFingerprint,omitempty"`

	// candidateFingerprint is the plan's status.candidateFingerprint, copied verbatim.
	// +required
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	CandidateFingerprint string `json:"candidateFingerprint"`

	// workerIdentities are the plan's status.candidateWorkerIdentities, copied verbatim.
	// An empty list requests nothing.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=2000
	// +kubebuilder:validation:items:MaxLength=253
	WorkerIdentities []string `json:"workerIdentities,omitempty"`

	// approvedBy is the Kubernetes user that applied the approval. Admission (the
	// fleet-retirementplan-approval policy) requires it to equal the requesting user, and
	// the controller checks with a SubjectAccessReview that this user, with
	// approvedGroups, holds the "approve" verb on retirementplans before the first write
	// and again during the apply. The controller honours no approval while that policy
	// or its binding is missing or altered, and never one by a worker's ServiceAccount.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ApprovedBy string `json:"approvedBy"`

	// approvedGroups are the groups of the user that applied the approval, exactly as the
	// API server authenticated them (order aside; see `kubectl auth whoami`). Admission
	// requires them to equal the requesting user's groups, and the controller checks the
	// approve verb for approvedBy with these groups, so a role bound to a group counts.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=512
	ApprovedGroups []string `json:"approvedGroups,omitempty"`
}

// RetirementPlanSpec asks the controller to plan (and, once approved, apply) the
// retirement of stale worker registrations in the plan's namespace.
// +kubebuilder:validation:XValidation:rule="self.remote == oldSelf.remote && has(self.host) == has(oldSelf.host) && has(self.org) == has(oldSelf.org) && has(self.repo) == has(oldSelf.repo) && has(self.canonicalRepository) == has(oldSelf.canonicalRepository)",message="the plan's scope is immutable: create a new RetirementPlan instead"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.approval) || has(self.approval)",message="spec.approval cannot be changed or removed once set: create a new RetirementPlan instead"
// +kubebuilder:validation:XValidation:rule="has(self.hostID) == has(oldSelf.hostID)",message="spec.hostID is immutable: a host plan stays one host's, a fleet plan stays the fleet's"
type RetirementPlanSpec struct {
	// remote names the Gitea remote whose registry is planned (for example "origin").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Remote string `json:"remote"`

	// host is optional audit context: the Gitea host.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the plan's scope is immutable: create a new RetirementPlan instead"
	Host string `json:"host,omitempty"`

	// org is optional audit context: the Gitea organisation.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the plan's scope is immutable: create a new RetirementPlan instead"
	Org string `json:"org,omitempty"`

	// repo is optional audit context: the Gitea repository name.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the plan's scope is immutable: create a new RetirementPlan instead"
	Repo string `json:"repo,omitempty"`

	// canonicalRepository is the "owner/name" binding every retired row must carry. It
	// names a GiteaRepository of the plan's namespace (exactly one object may name it), or
	// the manager's --repository repository when none does. Unset: the --repository
	// repository, else the namespace's only GiteaRepository. A binding that names no
	// repository of the namespace (or an object that has not resolved its Gitea
	// repository ID) retires nothing: every row is preserved as
	// repository_binding_ambiguous, saying why. Rows are compared with it, and
	// fingerprinted, by what their names resolve to (a GiteaRepository's server and
	// repository ID), not by spelling.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="the plan's scope is immutable: create a new RetirementPlan instead"
	CanonicalRepository string `json:"canonicalRepository,omitempty"`

	// hostID makes this a host plan: it covers only the Active registrations whose
	// spec.process.hostID is this machine id, and only the agent holding that host's
	// coordination Lease plans and applies it. Leave it unset: a plan without hostID is a
	// fleet plan, which creates one host plan per host that runs an agent (named
	// <fleet plan>-h<hash>, owned by the fleet plan) and reports their aggregate. Host
	// plans are created by the controller; a host plan is approved through its fleet
	// plan, never by its own spec.approval.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.hostID is immutable: a host plan stays one host's, a fleet plan stays the fleet's"
	HostID string `json:"hostID,omitempty"`

	// approval approves the plan's current tokens and identities. Once set it can be
	// neither changed nor removed.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.approval cannot be changed or removed once set: create a new RetirementPlan instead"
	Approval *RetirementApproval `json:"approval,omitempty"`
}

// WorkerAssessment is the verdict on one registration.
type WorkerAssessment struct {
	// workerIdentity is the registration's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	WorkerIdentity string `json:"workerIdentity"`

	// reasonCode is eligible_stale_orphan for candidates, or the first requirement the row
	// failed for preserved rows.
	// +required
	// +kubebuilder:validation:MaxLength=64
	ReasonCode string `json:"reasonCode"`

	// detail explains the verdict in one sentence.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Detail string `json:"detail,omitempty"`

	// evidence holds the observations behind the verdict (probe state, heartbeat expiry,
	// host and boot on both sides, ...).
	// +optional
	Evidence map[string]string `json:"evidence,omitempty"`
}

// PostApply is a fleet snapshot: at plan time (status.snapshot) and after an apply
// (status.postApply). Retiring stale rows does not make a fleet
// with live legacy workers safe; this block says so.
type PostApply struct {
	// staleWorkerCount is the number of Active rows that are not live.
	StaleWorkerCount int32 `json:"staleWorkerCount"`
	// liveWorkerCount is the number of live rows.
	LiveWorkerCount int32 `json:"liveWorkerCount"`
	// historicalWorkerCount is the number of Retired rows.
	HistoricalWorkerCount int32 `json:"historicalWorkerCount"`
	// liveFleetSafe is false while any blocker remains.
	LiveFleetSafe bool `json:"liveFleetSafe"`
	// blockerCount is the number of blockers, always complete.
	// +optional
	BlockerCount int32 `json:"blockerCount,omitempty"`
	// blockers are the fleet blockers (for example legacy_incomplete_identity): the first
	// 500, sorted as the snapshot orders them.
	// +optional
	// +kubebuilder:validation:MaxItems=500
	Blockers []FleetBlocker `json:"blockers,omitempty"`
}

// FleetBlocker is one reason the live fleet is not safe.
type FleetBlocker struct {
	// code is the blocker code, for example legacy_incomplete_identity.
	Code string `json:"code"`
	// workerIdentity is the registration the blocker is about.
	WorkerIdentity string `json:"workerIdentity"`
	// detail explains the blocker.
	// +optional
	Detail string `json:"detail,omitempty"`
}

// HostPlanStatus is one host's share of a fleet plan.
type HostPlanStatus struct {
	// hostID is the machine id (spec.process.hostID of the host's registrations).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	HostID string `json:"hostID"`
	// plan is the name of the host plan (a RetirementPlan in the same namespace).
	// +required
	// +kubebuilder:validation:MaxLength=253
	Plan string `json:"plan"`
	// agent is the agent instance that held the host's coordination Lease when the fleet
	// plan fanned out.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Agent string `json:"agent,omitempty"`
	// outcome is the host plan's outcome; empty until its agent has planned it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Outcome string `json:"outcome,omitempty"`
	// candidateCount is the host plan's number of candidates.
	// +optional
	CandidateCount int32 `json:"candidateCount"`
	// preservedCount is the host plan's number of preserved rows.
	// +optional
	PreservedCount int32 `json:"preservedCount"`
	// retiredCount is the number of rows the host plan's apply retired.
	// +optional
	RetiredCount int32 `json:"retiredCount"`
	// candidateFingerprint is the host plan's candidate fingerprint. A host's agent
	// applies its host plan only while this still equals the host plan's own.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	CandidateFingerprint string `json:"candidateFingerprint,omitempty"`
}

// HostRowCount is a host and how many Active registrations it has.
type HostRowCount struct {
	// hostID is the machine id.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	HostID string `json:"hostID"`
	// rowCount is the number of Active registrations of the host.
	// +required
	RowCount int32 `json:"rowCount"`
}

// RetirementPlanStatus is the plan, and after an approved apply, its result.
type RetirementPlanStatus struct {
	// conditions: Ready is True once the dry-run plan is in status and after an apply that
	// ran to its end (or found nothing to write); it is False while an approval is
	// refused, and after an apply that was refused, failed or stopped part-way. Stalled is
	// present, and True, only when the plan is final without success: an approval that
	// does not match (spec.approval is set once) or an apply that did not succeed; a new
	// attempt is a new plan. Approved is True only when the approval matches the plan and
	// the approver holds the approve verb. Applied is True only after a clean apply.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// outcome is the result of the last step.
	// +optional
	// +kubebuilder:validation:Enum=planned;applied;registry_revision_moved;candidate_set_moved;already_retired;nothing_requested;transaction_failed
	Outcome string `json:"outcome,omitempty"`

	// success is false when the apply failed (transaction_failed) or stopped part-way
	// (applyComplete false), and true otherwise.
	// +optional
	Success *bool `json:"success,omitempty"`

	// canonicalRepository is the repository binding the plan used.
	// +optional
	CanonicalRepository string `json:"canonicalRepository,omitempty"`

	// registryFingerprint is a stable token over the retirement-relevant content of every
	// registration in the namespace; copy it into spec.approval to approve.
	// +optional
	RegistryFingerprint string `json:"registryFingerprint,omitempty"`

	// registryResourceVersion is the resourceVersion of the registrations list the plan
	// was read from. A fleet plan's host plans plan their rows from the list at exactly
	// this resourceVersion, so the fleet plan's registry fingerprint and every host
	// plan's verdicts rest on one view of the namespace; a host plan whose agent comes
	// too late for it (the API server has compacted that revision) reads the newest list
	// and records its own.
	// +optional
	RegistryResourceVersion string `json:"registryResourceVersion,omitempty"`

	// candidateFingerprint is a stable token over the candidate rows; copy it into
	// spec.approval to approve.
	// +optional
	CandidateFingerprint string `json:"candidateFingerprint,omitempty"`

	// candidateWorkerIdentities are the names of the registrations the plan would retire:
	// what an approval names. One approval names at most 2000; when more rows are
	// eligible, the first 2000 (sorted) are listed and candidateCount says how many.
	// +optional
	// +kubebuilder:validation:MaxItems=2000
	CandidateWorkerIdentities []string `json:"candidateWorkerIdentities,omitempty"`

	// candidates are the rows eligible for retirement, each with its evidence: the first
	// 100, sorted by name (candidateCount is always complete; status.pages lists the
	// pages that hold every row).
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Candidates []WorkerAssessment `json:"candidates,omitempty"`

	// preserved are the rows kept, each with the reason code of the requirement it failed:
	// the first 100, sorted by name (preservedCount and preservedReasonCounts are always
	// complete).
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Preserved []WorkerAssessment `json:"preserved,omitempty"`

	// preservedReasonCounts counts preserved rows by reason code.
	// +optional
	PreservedReasonCounts map[string]int32 `json:"preservedReasonCounts,omitempty"`

	// assessedCount is the number of registrations assessed.
	// +optional
	AssessedCount int32 `json:"assessedCount"`
	// candidateCount is the number of candidates.
	// +optional
	CandidateCount int32 `json:"candidateCount"`
	// preservedCount is the number of preserved rows.
	// +optional
	PreservedCount int32 `json:"preservedCount"`

	// protectedActiveWorkflowOwners are registrations preserved because they hold an
	// active TaskClaim.
	// +optional
	// +kubebuilder:validation:MaxItems=10000
	ProtectedActiveWorkflowOwners []string `json:"protectedActiveWorkflowOwners,omitempty"`

	// mutationPerformed is true only when the apply retired at least one row.
	// +optional
	MutationPerformed bool `json:"mutationPerformed"`

	// readOnly is true for a dry-run plan.
	// +optional
	ReadOnly bool `json:"readOnly"`

	// plannedAt is when the plan was computed.
	// +optional
	PlannedAt *metav1.Time `json:"plannedAt,omitempty"`

	// appliedAt is when the apply finished.
	// +optional
	AppliedAt *metav1.Time `json:"appliedAt,omitempty"`

	// retiredCount is the number of rows the apply retired.
	// +optional
	RetiredCount int32 `json:"retiredCount,omitempty"`

	// retired names the rows the apply retired, sorted (at most the 2000 an approval names).
	// +optional
	// +kubebuilder:validation:MaxItems=2000
	Retired []string `json:"retired,omitempty"`

	// applyPreserved are requested rows the apply did not retire, each with the reason
	// (row_changed_since_plan, liveness_reprobe_unavailable, external_fence_moved, ...).
	// +optional
	// +kubebuilder:validation:MaxItems=2000
	ApplyPreserved []WorkerAssessment `json:"applyPreserved,omitempty"`

	// applyComplete is false when the apply stopped part-way (the external fence moved
	// after some rows were written). Kubernetes has no multi-object transaction, so rows
	// already retired stay retired and the rest are listed in applyPreserved.
	// +optional
	ApplyComplete *bool `json:"applyComplete,omitempty"`

	// message explains the outcome in one sentence.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`

	// hostApproval is, on a host plan, its fleet plan's approval narrowed to this host,
	// recorded once, in the same write as the Approved condition, when the host plan's
	// agent first saw the fleet plan Approved: the fleet plan's binding, approver and
	// registry fingerprint, this host plan's candidate fingerprint, and the approved
	// identities that are this host plan's candidates. The apply decides on it, and
	// before its first write (and during a long apply) checks that the fleet plan still
	// narrows to it.
	// +optional
	HostApproval *RetirementApproval `json:"hostApproval,omitempty"`

	// hosts is, for a fleet plan (no spec.hostID), one entry per host whose agent plans
	// and applies that host's rows through a host plan: the host plan's name, the agent
	// that held the host when the fleet plan fanned out, and that host plan's outcome,
	// counts and candidate fingerprint. The fleet plan's candidateFingerprint is computed
	// over these entries (see docs/retirementplan.md, "Several hosts"). Sorted by hostID;
	// at most 256 hosts.
	// +optional
	// +listType=map
	// +listMapKey=hostID
	// +kubebuilder:validation:MaxItems=256
	Hosts []HostPlanStatus `json:"hosts,omitempty"`

	// hostsWithoutAgent lists, for a fleet plan, the hosts with Active registrations but
	// no agent holding their coordination Lease when the plan fanned out: their rows are
	// never candidates and are preserved as host_binding_unproven. Sorted by hostID; at
	// most 256 hosts (hostsWithoutAgentCount is always complete).
	// +optional
	// +listType=map
	// +listMapKey=hostID
	// +kubebuilder:validation:MaxItems=256
	HostsWithoutAgent []HostRowCount `json:"hostsWithoutAgent,omitempty"`

	// hostsWithoutAgentCount is the number of hosts without an agent, always complete.
	// +optional
	HostsWithoutAgentCount int32 `json:"hostsWithoutAgentCount,omitempty"`

	// snapshot is the fleet snapshot at plan time, read with the plan: stale, live and
	// historical counts, liveFleetSafe and the blockers. postApply is the same view after
	// the apply.
	// +optional
	Snapshot *PostApply `json:"snapshot,omitempty"`

	// postApply reports the fleet after the apply.
	// +optional
	PostApply *PostApply `json:"postApply,omitempty"`

	// pages says where the full candidates and preserved lists are: RetirementPlanPage
	// objects owned by this plan. The lists in this status stop at 100 rows each; the
	// pages hold every row with its reason, detail and evidence. The pages are written
	// right after the plan is planned: pages is set, and the PagesReady condition True,
	// once they hold every row.
	// +optional
	Pages *RetirementPlanPages `json:"pages,omitempty"`

	// applyProgress records the apply while it runs, so that exactly one applier writes
	// rows and a crash, a failover or a lost final status write cannot lose the report.
	// Before its first row write the applier records here, in one compare-and-swap write,
	// that the apply started, who runs it and which rows it will write, with the
	// resourceVersion and fingerprint each row was read at; only that writer writes
	// rows, renewing renewedAt as it goes. A hold not renewed for the takeover timeout
	// (60 s by default) is taken over by another reconcile. On the row's own host the
	// taker resumes the apply: it checks the approval again, reads the workflow fence and
	// the rows afresh, and writes each remaining row only if its fingerprint is unchanged
	// (else row_changed_since_plan), it is still a candidate and a new liveness probe
	// shows it gone, guarded by compare-and-swap (reason ApplyResumed). Where it cannot resume (the
	// stand-in of a lost host, an approval no longer honoured) it writes no row and
	// completes the report from what the rows show (reason ApplyInterrupted, rows not
	// retired preserved as apply_interrupted). Absent until an approved apply starts.
	// +optional
	ApplyProgress *ApplyProgress `json:"applyProgress,omitempty"`
}

// Apply states (status.applyProgress.state), defined in internal/retirement.
const (
	ApplyStateInProgress = retirement.ApplyInProgress
	ApplyStateFinished   = retirement.ApplyFinished
)

// ReasonApplyInterrupted is used when the applier stopped before writing its report and a
// takeover completed the report from the rows (Ready=False, Stalled=True, Applied=False).
const ReasonApplyInterrupted = retirement.ConditionApplyInterrupted

// ReasonApplyResumed is used when the applier stopped and a takeover on the rows' host
// resumed the apply and went through every remaining row (Ready=True, Applied=True).
const ReasonApplyResumed = retirement.ConditionApplyResumed

// What a takeover did (status.applyProgress.takeover), defined in internal/retirement.
const (
	TakeoverResumed   = retirement.TakeoverResumed
	TakeoverCompleted = retirement.TakeoverCompleted
)

// ApplyProgress is an apply's recorded intent and its single applier's hold on the plan.
type ApplyProgress struct {
	// state is InProgress from the recorded intent until the report is written, then
	// Finished.
	// +required
	// +kubebuilder:validation:Enum=InProgress;Finished
	State string `json:"state"`

	// applier is the instance id of the controller that holds the apply (its host name
	// and a random suffix, minted once per process). Only the holder writes rows and the
	// report.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Applier string `json:"applier"`

	// startedAt is when the intent was recorded. A row counts as retired by this apply
	// only if its retiredAt is not before it.
	// +required
	StartedAt metav1.Time `json:"startedAt"`

	// renewedAt is the holder's last renewal. Once it is older than the takeover
	// timeout, another reconcile may take the apply over.
	// +required
	RenewedAt metav1.MicroTime `json:"renewedAt"`

	// intendedCount is the number of rows the apply set out to write.
	// +optional
	IntendedCount int32 `json:"intendedCount"`

	// intendedRows are the rows the apply set out to write, sorted by name (at most the
	// 2000 an approval names), each with the resourceVersion and the fingerprint the
	// applier read it at before recording its intent. The first applier's row writes are
	// guarded by that resourceVersion. A takeover that resumes the apply writes a row
	// only while its fingerprint still matches (else row_changed_since_plan), guarded by
	// the resourceVersion it read it at. Either one, refused by a conflict, reads the row
	// again and writes it again only if its fingerprint is still this one. Cleared when the report is written: retired and
	// applyPreserved then name every one of them.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=2000
	IntendedRows []IntendedRow `json:"intendedRows,omitempty"`

	// retiredSoFar is the number of rows the holder had retired at its last renewal.
	// +optional
	RetiredSoFar int32 `json:"retiredSoFar,omitempty"`

	// takenOverFrom is the applier whose lapsed hold this holder took over, when it did.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TakenOverFrom string `json:"takenOverFrom,omitempty"`

	// takeover says what the holder did with the apply it took over: Resumed (it wrote
	// the remaining intended rows, each revalidated as the first applier would have) or
	// Completed (it wrote no row and completed the report from what the rows show).
	// Unset when nobody took the apply over.
	// +optional
	// +kubebuilder:validation:Enum=Resumed;Completed
	Takeover string `json:"takeover,omitempty"`
}

// IntendedRow is one row an apply set out to write, as its applier read it.
type IntendedRow struct {
	// name is the registration's name (the worker identity).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// resourceVersion is the registration's resourceVersion when the applier read it,
	// right before it recorded its intent. The row's write carries it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	ResourceVersion string `json:"resourceVersion"`

	// fingerprint is the row's own fingerprint when the applier read it ("sha256:" and
	// 64 hex digits): every field the plan's fingerprints cover, and nothing else (not
	// labels, conditions or the resourceVersion). A takeover that resumes the apply
	// writes a row whose resourceVersion moved only while this still matches.
	// +required
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	Fingerprint string `json:"fingerprint"`
}

// RetirementPlan plans the retirement of stale worker registrations as a dry run, and
// applies exactly that plan once a reviewer approves it through spec.approval.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rplan;rp,categories=fleet
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.spec.hostID`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.status.outcome`
// +kubebuilder:printcolumn:name="Approved",type=string,JSONPath=`.status.conditions[?(@.type=="Approved")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="The Ready condition's reason: tells a plan awaiting approval from a final refusal, and a planned plan from an applied or refused apply"
// +kubebuilder:printcolumn:name="Candidates",type=integer,JSONPath=`.status.candidateCount`
// +kubebuilder:printcolumn:name="Preserved",type=integer,JSONPath=`.status.preservedCount`
// +kubebuilder:printcolumn:name="Retired",type=integer,JSONPath=`.status.retiredCount`
// +kubebuilder:printcolumn:name="Stale",type=integer,JSONPath=`.status.snapshot.staleWorkerCount`
// +kubebuilder:printcolumn:name="Live",type=integer,JSONPath=`.status.snapshot.liveWorkerCount`
// +kubebuilder:printcolumn:name="Safe",type=boolean,JSONPath=`.status.snapshot.liveFleetSafe`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Binding",type=string,JSONPath=`.spec.approval.binding`,priority=1,description="What the approval binds: Registry or CandidateSet"
// +kubebuilder:printcolumn:name="Approver",type=string,JSONPath=`.spec.approval.approvedBy`,priority=1,description="Who set the approval, as admission saw it"
// +kubebuilder:printcolumn:name="Retired-So-Far",type=integer,JSONPath=`.status.applyProgress.retiredSoFar`,priority=1,description="Rows retired so far by an apply in progress"
type RetirementPlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the plan's scope and, once approved, its approval.
	// +required
	Spec RetirementPlanSpec `json:"spec"`

	// status is the plan and its apply result. Until the controller has observed the
	// plan, it reads observedGeneration 0, so kstatus (Flux's wait) and Argo CD see the
	// plan as in progress rather than current.
	// +optional
	// +kubebuilder:default={observedGeneration: 0}
	Status RetirementPlanStatus `json:"status,omitempty"`
}

// RetirementPlanList is a list of RetirementPlan.
//
// +kubebuilder:object:root=true
type RetirementPlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RetirementPlan `json:"items"`
}
