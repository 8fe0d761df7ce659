/*
Copyright 2026 The fleet-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package retirement

import (
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// Reason codes attached to every assessment. The preserve reasons are listed
// in the order the eligibility chain evaluates them (see CheckOrder).
const (
	// ReasonEligibleStaleOrphan marks a row that passed every check.
	ReasonEligibleStaleOrphan = "eligible_stale_orphan"
	// ReasonAlreadyTerminal: the registration is not in phase Active.
	ReasonAlreadyTerminal = "already_terminal_registration"
	// ReasonIncompleteIdentity: a field the checks rely on is absent or
	// invalid (see RequiredIdentityFields).
	ReasonIncompleteIdentity = "incomplete_registry_identity"
	// ReasonUnparsableHeartbeat: lastHeartbeatAt is empty or not RFC 3339.
	ReasonUnparsableHeartbeat = "unparsable_heartbeat"
	// ReasonWorkerLive: the heartbeat is fresh and no probe withdrew it.
	ReasonWorkerLive = "worker_live"
	// ReasonUntrustedProvenance: the client instance id is not
	// launcher-minted (inst-…).
	ReasonUntrustedProvenance = "untrusted_identity_provenance"
	// ReasonRepositoryAmbiguous: the repository binding is missing, not of
	// the form owner/name, or not the canonical repository.
	ReasonRepositoryAmbiguous = "repository_binding_ambiguous"
	// ReasonHostBindingUnproven: the row belongs to another host, or the
	// controller does not know its own host.
	ReasonHostBindingUnproven = "host_binding_unproven"
	// ReasonBootIdentityUnknown: the boot id is missing on the row or on the
	// controller's host.
	ReasonBootIdentityUnknown = "boot_identity_unknown"
	// ReasonPIDLivenessUnknown: the probe gave no definite answer.
	ReasonPIDLivenessUnknown = "pid_liveness_unknown"
	// ReasonPIDAlive: the registered process still runs.
	ReasonPIDAlive = "pid_alive"
	// ReasonPIDReuseDetected: the pid number is held by another process
	// incarnation.
	ReasonPIDReuseDetected = "pid_reuse_detected"
	// ReasonHeartbeatNotExpired: lastHeartbeatAt + TTL is still ahead of Now.
	ReasonHeartbeatNotExpired = "heartbeat_not_expired"
	// ReasonAmbiguousOwnership: the stored ownership state is not "stale".
	ReasonAmbiguousOwnership = "ambiguous_ownership_state"
	// ReasonConflictingIdentity: identity evidence is shared with another
	// registration that may be live.
	ReasonConflictingIdentity = "conflicting_identity_evidence"
	// ReasonClientInstanceConflict: another active registration with the
	// same (clientInstanceID, workerNamespace) may be live.
	ReasonClientInstanceConflict = "client_instance_conflict"
	// ReasonProtectedWorkflowOwner: the worker holds an active task claim.
	ReasonProtectedWorkflowOwner = "protected_active_workflow_owner"

	// ReasonRowChangedSincePlan (apply time): the guarded update found the
	// row changed since it was read.
	ReasonRowChangedSincePlan = "row_changed_since_plan"
	// ReasonLivenessReprobeUnavailable (apply time): no prober was supplied,
	// so liveness could not be re-established before the write.
	ReasonLivenessReprobeUnavailable = "liveness_reprobe_unavailable"
	// ReasonExternalFenceMoved (apply time): the external fence (active task
	// claims) moved during apply, so this row and every later one were left
	// untouched.
	ReasonExternalFenceMoved = "external_fence_moved"
	// ReasonNotInCandidateSet (apply time): an approved identity is not in
	// the candidate set recomputed from the fresh rows.
	ReasonNotInCandidateSet = "not_in_candidate_set"
)

// Outcomes of plan and apply.
const (
	// OutcomePlanned is the outcome of a dry run.
	OutcomePlanned = "planned"
	// OutcomeApplied means apply ran; see the retired and preserved lists.
	OutcomeApplied = "applied"
	// OutcomeRegistryRevisionMoved means the registry fingerprint changed
	// between plan and apply; nothing was written.
	OutcomeRegistryRevisionMoved = "registry_revision_moved"
	// OutcomeCandidateSetMoved means the candidate fingerprint changed
	// between plan and apply; nothing was written.
	OutcomeCandidateSetMoved = "candidate_set_moved"
	// OutcomeAlreadyRetired means every requested row is already Retired.
	OutcomeAlreadyRetired = "already_retired"
	// OutcomeNothingRequested means the approval named no worker.
	OutcomeNothingRequested = "nothing_requested"
	// OutcomeTransactionFailed means apply failed before retiring anything.
	OutcomeTransactionFailed = "transaction_failed"
)

// Host identifies the machine (and its current boot) that runs retirement.
type Host struct {
	// HostID is the machine id of the controller's host.
	HostID string
	// BootID is the boot id of the controller's host.
	BootID string
	// BootTime is when the controller host's current boot began (btime of
	// /proc/stat); zero when unknown. A pid found free for a registration
	// of another boot proves the process gone only when the registration's
	// last heartbeat is before BootTime (see effectivePIDState), so a zero
	// BootTime keeps every such row.
	BootTime time.Time
}

// Row is one worker registration, flattened from the API object.
type Row struct {
	// Name is the registration name, which is the worker identity.
	Name string
	// Namespace is the Kubernetes namespace of the registration.
	Namespace string
	// ClientInstanceID is the launcher-minted instance id (inst-…) or a
	// legacy one.
	ClientInstanceID string
	// WorkerNamespace is the worker's own namespace (tenant).
	WorkerNamespace string
	// Identity is the Gitea user the worker acts as.
	Identity string
	// Remote names the Gitea remote.
	Remote string
	// Repository is the repository binding as the registration declares it, canonical
	// form owner/name.
	Repository string
	// Binding is the canonical value of that binding in the row's namespace, as the
	// controller resolved it (forge.Binding.Canonical): "gitea:<server>/<id>" for a
	// GiteaRepository, the lower-cased owner/name for the --repository one, "" when the
	// name binds no repository there. The fingerprints encode it in the repository
	// field's place, and rows are compared with the plan's binding by it.
	Binding string
	// HeartbeatTTLSeconds is the heartbeat TTL as a decimal number.
	HeartbeatTTLSeconds Number
	// HostID is the machine id the worker process ran on.
	HostID string
	// BootID is the boot id of that machine when the process started.
	BootID string
	// PID is the worker's process id: the host's, or, with PodUID, the pod's own.
	PID int64
	// PodUID is the UID of the pod the worker runs in, when it runs in one; PID is then a
	// pid of the pod's own namespace.
	PodUID string
	// StartTime is the process start time (field 22 of /proc/<pid>/stat).
	StartTime *int64
	// GenerationID identifies the worker generation.
	GenerationID string
	// SessionID identifies the worker session.
	SessionID string
	// FencingEpoch is the worker's fencing epoch.
	FencingEpoch *int64
	// Phase is Active or Retired.
	Phase string
	// OwnershipState is the stored classification (live, stale, historical).
	OwnershipState string
	// LastHeartbeatAt is the stored heartbeat text; may be empty or invalid.
	LastHeartbeatAt string
	// TokenFingerprint is credential-adjacent; never a fingerprint input.
	TokenFingerprint string
	// Revisions are restart-related revisions; never fingerprint inputs.
	Revisions map[string]string
	// RetiredAt is retirement bookkeeping; never a fingerprint input.
	RetiredAt string
	// RetiredBy is retirement bookkeeping; never a fingerprint input.
	RetiredBy string
	// RetirementReason is retirement bookkeeping; never a fingerprint input.
	RetirementReason string
	// ResourceVersion is the API server's version; never a fingerprint input.
	ResourceVersion string
}

// Probe is a process prober's answer for one row.
type Probe struct {
	// State is the prober's verdict.
	State fleet.PIDState
	// ObservedStartTime is the start time of whatever process holds the pid
	// number now, nil when the number is free or it could not be read.
	ObservedStartTime *int64
	// Detail is free text from the prober, copied into evidence.
	Detail string
}

// Input is everything BuildPlan needs, gathered by the controller.
type Input struct {
	// Rows are the registry rows as read from the API server.
	Rows []Row
	// CanonicalRepository is the expected repository binding (owner/name).
	CanonicalRepository string
	// CanonicalBinding is the canonical value of the plan's binding (see Row.Binding):
	// a row is retired only when its Binding equals it, and the candidate fingerprint
	// binds it. "" binds nothing: every row is preserved.
	CanonicalBinding string
	// RepositoryProblem, when set, says why the plan's binding names no repository of
	// its namespace: every row is then preserved as repository_ambiguous, with this
	// detail.
	RepositoryProblem string
	// Now is the evaluation instant.
	Now time.Time
	// Host is the machine running retirement.
	Host Host
	// Probes holds process probe answers by row Name; a missing entry means
	// the pid state is unknown.
	Probes map[string]Probe
	// ActiveWorkflowOwners lists the worker names that hold an active task
	// claim.
	ActiveWorkflowOwners []string
}

// Assessment is the verdict on one row.
type Assessment struct {
	// WorkerIdentity is the row's Name.
	WorkerIdentity string
	// ReasonCode is eligible_stale_orphan for candidates, otherwise the
	// first failed check's code.
	ReasonCode string
	// Detail explains the verdict for humans.
	Detail string
	// Evidence holds the observations the verdict was based on (see the
	// Evidence* keys); it is filled whichever check failed.
	Evidence map[string]string
}

// Plan is the read-only result of planning.
type Plan struct {
	// Outcome is always OutcomePlanned.
	Outcome string
	// RegistryFingerprint is the stable token over every row.
	RegistryFingerprint string
	// CandidateFingerprint is the stable token over the candidate rows and
	// the canonical repository.
	CandidateFingerprint string
	// CanonicalRepository is the repository binding the plan was made for,
	// trimmed and lower-cased.
	CanonicalRepository string
	// CanonicalBinding is that binding's canonical value (Input.CanonicalBinding), the
	// one the candidate fingerprint binds.
	CanonicalBinding string
	// CandidateWorkerIdentities are the candidates' names, sorted.
	CandidateWorkerIdentities []string
	// Candidates are the eligible rows' assessments, sorted by identity.
	Candidates []Assessment
	// Preserved are the remaining rows' assessments, sorted by identity.
	Preserved []Assessment
	// PreservedReasonCounts counts preserved rows by reason code.
	PreservedReasonCounts map[string]int
	// AssessedCount is the number of rows assessed.
	AssessedCount int
	// CandidateCount is len(Candidates).
	CandidateCount int
	// PreservedCount is len(Preserved).
	PreservedCount int
	// ProtectedActiveWorkflowOwners lists, sorted, the registered workers
	// that hold an active task claim.
	ProtectedActiveWorkflowOwners []string
	// MutationPerformed is always false for a plan.
	MutationPerformed bool
	// ReadOnly is always true for a plan.
	ReadOnly bool
}

// Evidence keys used in Assessment.Evidence.
//
// Every assessment carries classification, heartbeatExpiresAt,
// heartbeatExpired, probeState and the host and boot ids on both sides
// (rowHostID, hostID, rowBootID, hostBootID). Some keys appear when they
// apply: probeDetail (the prober gave one), effectiveProbeState (the verdict
// used differs from the prober's answer, e.g. a probe for a row of another
// host, or a start-time mismatch), activeWorkflowOwner (the worker holds a
// task claim), hostBootTime (the row names another boot of this host). The remaining keys are attached by the check that failed and
// describe exactly what it found wanting: phase, missingFields and
// heartbeatTTLSeconds, lastHeartbeatAt, clientInstanceID, repository and
// canonicalRepository, pid/rowStartTime/observedStartTime (probe verdicts),
// ownershipState, conflictingWorkers.
const (
	// EvidencePhase is the row phase.
	EvidencePhase = "phase"
	// EvidenceOwnershipState is the stored ownership state.
	EvidenceOwnershipState = "ownershipState"
	// EvidenceClassification is the ownership state recomputed at Now from
	// heartbeat, TTL and the effective probe state.
	EvidenceClassification = "classification"
	// EvidenceMissingFields lists the absent identity fields
	// (incomplete_registry_identity only).
	EvidenceMissingFields = "missingFields"
	// EvidenceClientInstanceID is the row's client instance id.
	EvidenceClientInstanceID = "clientInstanceID"
	// EvidenceRepository is the row's repository binding.
	EvidenceRepository = "repository"
	// EvidenceCanonicalRepository is the expected binding.
	EvidenceCanonicalRepository = "canonicalRepository"
	// EvidenceBinding is the canonical value the row's binding resolved to.
	EvidenceBinding = "repositoryBinding"
	// EvidenceCanonicalBinding is the canonical value of the plan's binding.
	EvidenceCanonicalBinding = "canonicalBinding"
	// EvidenceLastHeartbeatAt is the stored heartbeat text.
	EvidenceLastHeartbeatAt = "lastHeartbeatAt"
	// EvidenceHeartbeatTTLSeconds is the canonical TTL (or the raw text when
	// it is invalid).
	EvidenceHeartbeatTTLSeconds = "heartbeatTTLSeconds"
	// EvidenceHeartbeatExpiresAt is lastHeartbeatAt + TTL (RFC 3339, UTC),
	// empty when either is unusable.
	EvidenceHeartbeatExpiresAt = "heartbeatExpiresAt"
	// EvidenceHeartbeatExpired is "true", "false" or "unknown".
	EvidenceHeartbeatExpired = "heartbeatExpired"
	// EvidenceProbeState is the prober's raw answer ("none" without probe;
	// a missing probe counts as unknown).
	EvidenceProbeState = "probeState"
	// EvidenceEffectiveProbeState is the probe answer after host/boot
	// binding and start-time comparison.
	EvidenceEffectiveProbeState = "effectiveProbeState"
	// EvidenceProbeDetail is the prober's free-text detail, when any.
	EvidenceProbeDetail = "probeDetail"
	// EvidencePID is the registered pid.
	EvidencePID = "pid"
	// EvidenceRowStartTime is the registered process start time.
	EvidenceRowStartTime = "rowStartTime"
	// EvidenceObservedStartTime is the start time the prober observed.
	EvidenceObservedStartTime = "observedStartTime"
	// EvidenceRowHostID is the row's host id.
	EvidenceRowHostID = "rowHostID"
	// EvidenceHostID is the controller's host id.
	EvidenceHostID = "hostID"
	// EvidenceRowBootID is the row's boot id.
	EvidenceRowBootID = "rowBootID"
	// EvidenceHostBootID is the controller's boot id.
	EvidenceHostBootID = "hostBootID"
	// EvidenceHostBootTime is when the controller host's current boot began
	// (RFC 3339, UTC; empty when unknown). Present only when the row's boot
	// id is known and differs from the host's: then a free pid counts as
	// gone only if lastHeartbeatAt is before this instant.
	EvidenceHostBootTime = "hostBootTime"
	// EvidenceActiveWorkflowOwner is "true" when the worker holds an active
	// task claim (absent otherwise).
	EvidenceActiveWorkflowOwner = "activeWorkflowOwner"
	// EvidenceConflictingWorkers names the registrations a conflict check
	// matched (comma-separated), only when such a check failed.
	EvidenceConflictingWorkers = "conflictingWorkers"
	// EvidencePlanReasonCode is set by DecideApply on a requested identity
	// that is not a candidate: the reason the fresh plan gave.
	EvidencePlanReasonCode = "planReasonCode"
)
