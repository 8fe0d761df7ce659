package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/giteatools/fleet-controller/internal/forge"
)

// Reasons of a GiteaServer's or GiteaRepository's Ready condition. They are decided in
// internal/forge and re-exported here for clients of the API.
const (
	// ReasonServerConnected: the token was read, Gitea answered as the token's account, and
	// its version is one the gateway relies on (Ready=True).
	ReasonServerConnected = forge.ReasonConnected
	// ReasonTokenSecretInvalid: the Secret named by spec.tokenSecretRef is missing, or
	// holds no token under its key.
	ReasonTokenSecretInvalid = forge.ReasonTokenSecretInvalid
	// ReasonCABundleInvalid: spec.caBundle holds no PEM certificate.
	ReasonCABundleInvalid = forge.ReasonCABundleInvalid
	// ReasonServerUnreachable: Gitea did not answer (refused, timed out, TLS failure, or an
	// answer that is not Gitea's API).
	ReasonServerUnreachable = forge.ReasonUnreachable
	// ReasonTokenInvalid: Gitea refused the token (401 or 403).
	ReasonTokenInvalid = forge.ReasonTokenInvalid
	// ReasonGiteaVersionUnsupported: the server is older than the release whose token-scope
	// fixes the workers' read-only tokens rely on.
	ReasonGiteaVersionUnsupported = forge.ReasonVersionUnsupported

	// ReasonRepositoryResolved: the repository was found on a Ready server, its default
	// branch is protected so that no worker identity can write around the gateway, and the
	// claim rule set in force is published in it (Ready=True).
	ReasonRepositoryResolved = forge.ReasonResolved
	// ReasonServerNotFound: spec.server names no GiteaServer.
	ReasonServerNotFound = forge.ReasonServerNotFound
	// ReasonServerNotReady: the GiteaServer is not Ready; the message repeats its reason.
	ReasonServerNotReady = forge.ReasonServerNotReady
	// ReasonRepositoryNotFound: the server has no such repository, or no longer has the
	// one this object resolved to.
	ReasonRepositoryNotFound = forge.ReasonRepositoryNotFound
	// ReasonDefaultBranchUnprotected: the default branch has no protection rule, or one
	// that lets every writer push.
	ReasonDefaultBranchUnprotected = forge.ReasonDefaultBranchUnprotected
	// ReasonWorkerCanWriteAroundGateway: a worker identity (a login of the gateway's
	// credential Secrets) is a site administrator, or may push to the default branch.
	ReasonWorkerCanWriteAroundGateway = forge.ReasonWorkerCanWriteAroundGateway
	// ReasonDuplicateRepository: an older GiteaRepository of the same namespace names the
	// same repository on the same server, or the same owner/name on another server (claims
	// name a repository by owner/name within their namespace); only the older one is used.
	ReasonDuplicateRepository = forge.ReasonDuplicateRepository
	// ReasonRuleSetUnpublished: the claim rule set in force could not be published to the
	// repository's .fleet/claim-rules.json, or was not read back unchanged.
	ReasonRuleSetUnpublished = forge.ReasonRuleSetUnpublished
	// ReasonRepositoryDeleting: the GiteaRepository is being deleted and waits for the
	// claims in it to end and release their Gitea records and locks
	// (RepositoryFinalizer).
	ReasonRepositoryDeleting = forge.ReasonDeleting
)

// SecretKeyRef names one key of a Secret in the controller's own namespace.
type SecretKeyRef struct {
	// name is the Secret's name, in the namespace the controller runs in (fleet-system
	// when installed from config/default). Other namespaces cannot be named: a token is
	// never read from where a tenant could place one.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// key is the key of the Secret's data holding the token.
	// +optional
	// +kubebuilder:default=token
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// GiteaServerSpec says where a Gitea server is and how the controller authenticates to it.
type GiteaServerSpec struct {
	// url is the server's base URL, as its users browse it: http or https, a host, and
	// optionally a path prefix when Gitea is served below one (ROOT_URL). No query, no
	// fragment, no user information.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="url must be an absolute http or https URL with a host"
	// +kubebuilder:validation:XValidation:rule="!self.contains('?') && !self.contains('#') && !self.contains('@')",message="url must not carry a query, a fragment or user information"
	URL string `json:"url"`

	// caBundle holds the PEM certificates that verify the server's TLS certificate, for a
	// server whose certificate the system roots do not verify. Empty: the system roots.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CABundle []byte `json:"caBundle,omitempty"`

	// tokenSecretRef names the Secret, in the controller's own namespace, holding the API
	// token of the controller's Gitea account for this server. The token never appears in
	// status, Events or logs.
	// +required
	TokenSecretRef SecretKeyRef `json:"tokenSecretRef"`

	// requestsPerSecond caps the controller's requests to this server, all of them
	// together (readiness checks, claims, the gateway's forwarded writes): a burst of this
	// many, refilled at this rate.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	RequestsPerSecond int32 `json:"requestsPerSecond,omitempty"`
}

// GiteaServerStatus is what the controller last found on the server.
type GiteaServerStatus struct {
	// conditions: Ready is True while the server answers the controller's token with a
	// supported version; its reason says what is wrong otherwise.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// version is the version the server reported.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`

	// login is the account the token authenticates as.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Login string `json:"login,omitempty"`
}

// GiteaServer is one Gitea server the controller reaches, with its own token: the
// cluster-wide counterpart of a cert-manager ClusterIssuer. GiteaRepositories of any
// namespace name it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gsrv,categories=fleet
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Login",type=string,JSONPath=`.status.login`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GiteaServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says where the server is and which token the controller uses.
	// +required
	Spec GiteaServerSpec `json:"spec"`

	// status is what the controller last found.
	// +optional
	Status GiteaServerStatus `json:"status,omitempty"`
}

// GiteaServerList is a list of GiteaServer.
//
// +kubebuilder:object:root=true
type GiteaServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GiteaServer `json:"items"`
}

// GiteaRepositorySpec names one repository on one GiteaServer. Which repository it is
// never changes: server, owner and name are set once.
// +kubebuilder:validation:XValidation:rule="self.server == oldSelf.server && self.owner == oldSelf.owner && self.name == oldSelf.name",message="server, owner and name are immutable: a different repository is a new GiteaRepository"
type GiteaRepositorySpec struct {
	// server is the name of the GiteaServer the repository is on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Server string `json:"server"`

	// owner is the repository's owner, a Gitea user or organization, as Gitea spells it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	Owner string `json:"owner"`

	// name is the repository's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	Name string `json:"name"`

	// maxActiveClaims caps how many TaskClaims on this repository may hold an active
	// capability at once: each claim that publishes holds one of this many slots (Leases
	// taken by compare-and-swap), and a claim that finds none free is refused
	// repository_claim_limit. Lowering it ends no capability. Unset: no cap of its own.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxActiveClaims *int32 `json:"maxActiveClaims,omitempty"`
}

// GiteaRepositoryStatus is what the controller last found of the repository.
type GiteaRepositoryStatus struct {
	// conditions: Ready is True while the repository is resolved on a Ready server, its
	// default branch is protected so that no worker identity can write around the gateway,
	// and the claim rule set in force is published in it. Claims in it are decided only
	// while it is Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// repositoryID is the Gitea repository ID the object resolved to, once. It is the
	// repository's key from then on: a rename in Gitea changes fullName, never this.
	// +optional
	// +kubebuilder:validation:Minimum=1
	RepositoryID int64 `json:"repositoryID,omitempty"`

	// fullName is the repository's "owner/name" as Gitea reports it now.
	// +optional
	// +kubebuilder:validation:MaxLength=141
	FullName string `json:"fullName,omitempty"`

	// defaultBranch is the repository's default branch.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	DefaultBranch string `json:"defaultBranch,omitempty"`
	// ruleSetDigest is the digest of the claim rule set the last check published to, or
	// found in, the repository's .fleet/claim-rules.json and read back. Claims there are
	// decided only while it is the digest of the rule set in force.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	RuleSetDigest string `json:"ruleSetDigest,omitempty"`
}

// GiteaRepository is one repository on one GiteaServer that the fleet of its namespace
// works on. The namespace is the tenancy boundary: its workers claim only in its
// repositories.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=grepo,categories=fleet
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.spec.server`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner`
// +kubebuilder:printcolumn:name="Repo",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="ID",type=integer,JSONPath=`.status.repositoryID`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Branch",type=string,JSONPath=`.status.defaultBranch`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GiteaRepository struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the repository.
	// +required
	Spec GiteaRepositorySpec `json:"spec"`

	// status is what the controller last found.
	// +optional
	Status GiteaRepositoryStatus `json:"status,omitempty"`
}

// GiteaRepositoryList is a list of GiteaRepository.
//
// +kubebuilder:object:root=true
type GiteaRepositoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GiteaRepository `json:"items"`
}
