package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// Phase values of a WorkerRegistration. They are defined once, in internal/fleet, and
// re-exported here for clients of the API.
const (
	// PhaseActive marks a registration whose row still describes a worker process.
	PhaseActive = fleet.Active
	// PhaseRetired marks a registration that was retired; it never becomes Active again.
	PhaseRetired = fleet.Retired
)

// Ownership states computed by the controller (defined in internal/fleet).
const (
	// OwnershipLive means the heartbeat is fresh and no probe withdrew liveness.
	OwnershipLive = fleet.Live
	// OwnershipStale means the heartbeat lapsed (or a probe proved the process gone) while the
	// row is still Active.
	OwnershipStale = fleet.Stale
	// OwnershipHistorical means the row is Retired and only kept as history.
	OwnershipHistorical = fleet.Historical
)

// ProcessIdentity pins a registration to exactly one operating-system process.
type ProcessIdentity struct {
	// hostID is the machine identity of the host the worker runs on, as read from
	// /etc/machine-id. Liveness can only be proven by a controller running on this host.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	HostID string `json:"hostID,omitempty"`

	// bootID identifies one boot of that host, as read from
	// /proc/sys/kernel/random/boot_id. A pid number only means something within one boot.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	BootID string `json:"bootID,omitempty"`

	// pid is the operating-system process id of the worker process: the host's pid, or,
	// when pod is set, the pid in the pod's own pid namespace (never a host pid).
	// +required
	// +kubebuilder:validation:Minimum=1
	PID int64 `json:"pid"`

	// startTime is the process start time in clock ticks after boot (field 22 of
	// /proc/<pid>/stat). Together with bootID it tells one incarnation of a pid number
	// from a later process that reused the number.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StartTime *int64 `json:"startTime,omitempty"`

	// pod is set when the worker runs in a pod, in a pid namespace of its own: pid is then
	// only meaningful inside that pod, and hostID is the machine id of the pod's node (the
	// pod mounts the node's /etc/machine-id). The node's agent resolves the row to the one
	// host process of this pod whose namespace pid and start time match, and proves it
	// gone only when no process of the pod matches; a row it cannot resolve is never
	// retired.
	// +optional
	Pod *PodProcess `json:"pod,omitempty"`
}

// PodProcess names the pod a worker process runs in, as the downward API tells it.
type PodProcess struct {
	// namespace is the pod's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name is the pod's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid is the pod's UID: the agent finds the pod's processes by it, in their cgroups.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F-]+$`
	UID string `json:"uid"`
	// nodeName is the node the pod runs on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`
	// container is the name of the worker's container in the pod, when known.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Container string `json:"container,omitempty"`
}

// Revisions records the revisions a worker was started with. They are informational:
// revision drift is a restart concern and never an input to retirement fingerprints.
type Revisions struct {
	// code is the source revision of the worker's code.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Code string `json:"code,omitempty"`
	// config is the revision of the worker's configuration.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Config string `json:"config,omitempty"`
	// profile is the revision of the profile the worker loaded.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Profile string `json:"profile,omitempty"`
	// protocol is the revision of the control-plane protocol the worker speaks.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Protocol string `json:"protocol,omitempty"`
}

// WorkerRegistrationSpec is written once by the worker's launcher and never changes.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a new process registers a new WorkerRegistration"
type WorkerRegistrationSpec struct {
	// clientInstanceID identifies one application launch. Launchers mint "inst-..."
	// identifiers; rows on legacy "pid-..." or "proc-..." identities prove nothing about
	// which process they describe and are never retired.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ClientInstanceID string `json:"clientInstanceID"`

	// workerNamespace is the worker's control-plane namespace (its session slot), not a
	// Kubernetes namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	WorkerNamespace string `json:"workerNamespace"`

	// identity is the Gitea username the worker acts as.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Identity string `json:"identity"`

	// remote names the Gitea remote the worker uses (for example "origin").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Remote string `json:"remote"`

	// repository is the canonical "owner/name" repository the worker is bound to.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Repository string `json:"repository,omitempty"`

	// heartbeatTTLSeconds is how long a heartbeat stays valid. A heartbeat older than
	// this makes the registration stale. At most 2592000 (30 days): a worker that has
	// not renewed its heartbeat for a month is not live, and the bound keeps every
	// TTL far inside the range of a Go time.Duration.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2592000
	HeartbeatTTLSeconds int64 `json:"heartbeatTTLSeconds"`

	// process pins the registration to one process on one boot of one host.
	// +required
	Process ProcessIdentity `json:"process"`

	// generationID identifies the worker generation that owns this row (fencing).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	GenerationID string `json:"generationID,omitempty"`

	// sessionID identifies the worker's session (fencing).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	SessionID string `json:"sessionID,omitempty"`

	// fencingEpoch is a monotonically increasing fencing number for the worker slot.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FencingEpoch *int64 `json:"fencingEpoch,omitempty"`

	// tokenFingerprint is a fingerprint of the credential the worker uses. It is never a
	// retirement input.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	TokenFingerprint string `json:"tokenFingerprint,omitempty"`

	// revisions records the revisions the worker was started with (informational).
	// +optional
	Revisions Revisions `json:"revisions,omitempty"`
}

// WorkerRegistrationStatus is the observed state of a registration. The worker renews
// lastHeartbeatAt; the controller owns the rest.
type WorkerRegistrationStatus struct {
	// conditions describe the registration's current state. Ready is True once the
	// controller assessed the row for its current generation.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the controller last assessed.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is Active until the row is retired; Retired never returns to Active.
	// +optional
	// +kubebuilder:validation:Enum=Active;Retired
	Phase string `json:"phase,omitempty"`

	// lastHeartbeatAt is the time of the worker's last heartbeat, renewed by the worker
	// through the status subresource.
	// +optional
	LastHeartbeatAt *metav1.Time `json:"lastHeartbeatAt,omitempty"`

	// ownershipState is computed by the controller: live (fresh heartbeat and no probe
	// proved the process gone), stale (Active but not live) or historical (Retired).
	// +optional
	// +kubebuilder:validation:Enum=live;stale;historical
	OwnershipState string `json:"ownershipState,omitempty"`

	// retiredAt is when the row was retired.
	// +optional
	RetiredAt *metav1.Time `json:"retiredAt,omitempty"`

	// retiredBy names the RetirementPlan (namespace/name) that retired the row.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	RetiredBy string `json:"retiredBy,omitempty"`

	// retirementReason is the reason code the row was retired under.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	RetirementReason string `json:"retirementReason,omitempty"`
}

// WorkerRegistration is one registry row: one worker process, its identity, host, boot,
// pid, start time, heartbeat and repository binding.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wreg;wr,categories=fleet
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.spec.identity`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ownership",type=string,JSONPath=`.status.ownershipState`
// +kubebuilder:printcolumn:name="PID",type=integer,JSONPath=`.spec.process.pid`,priority=1
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.lastHeartbeatAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase != 'Retired' || (has(self.status) && has(self.status.phase) && self.status.phase == 'Retired')",message="a Retired registration can never return to Active"
type WorkerRegistration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the immutable registration written by the worker's launcher.
	// +required
	Spec WorkerRegistrationSpec `json:"spec"`

	// status is the observed state of the registration.
	// +optional
	Status WorkerRegistrationStatus `json:"status,omitempty"`
}

// WorkerRegistrationList is a list of WorkerRegistration.
//
// +kubebuilder:object:root=true
type WorkerRegistrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkerRegistration `json:"items"`
}
