package v1alpha1

// The labels, annotations, finalizers and token audience the controller writes or reads
// on objects of any kind. Each is defined here once; the packages that use one name it
// from here (some under a name of their own, as an alias of the value below).
const (
	// PlanLabel names the RetirementPlan a RetirementPlanPage belongs to:
	// `kubectl get retirementplanpages -l fleet.giteatools.dev/plan=NAME` lists its
	// pages. A name longer than a label value may be is shortened to its first 54
	// characters and a hash; the plan's status.pages.selector always names the value to
	// use.
	PlanLabel = "fleet.giteatools.dev/plan"

	// FleetPlanLabel names, on a host plan, the fleet plan it belongs to.
	FleetPlanLabel = "fleet.giteatools.dev/fleet-plan"

	// AgentLeaseLabel marks the coordination Leases of the host agents: "host" for a
	// host's Lease, "coordinator" for the fleet coordinator's.
	AgentLeaseLabel = "fleet.giteatools.dev/agent-lease"

	// HostIDAnnotation carries the full host id on a host's Lease (its name holds only a
	// hash of it).
	HostIDAnnotation = "fleet.giteatools.dev/host-id"

	// WorkflowFenceLabel marks the Lease that fences retirement against task claims in
	// each namespace.
	WorkflowFenceLabel = "fleet.giteatools.dev/workflow-fence"

	// ClaimLockLabel marks the per-target lock Leases of TaskClaims (value "true"); the
	// manager caches and watches only Leases with it.
	ClaimLockLabel = "fleet.giteatools.dev/claim-lock"

	// ClaimFinalizer is the finalizer a TaskClaim carries from the moment it takes its
	// lock until its Gitea record and its lock are released.
	ClaimFinalizer = "fleet.giteatools.dev/release-claim"

	// RepositoryFinalizer is the finalizer a GiteaRepository carries while it may hold
	// claims: deleting it ends every capability in it, and the object goes only once
	// every claim there released its Gitea record and lock.
	RepositoryFinalizer = "fleet.giteatools.dev/release-claims"

	// GiteaLoginLabel labels the Secret that holds an identity's gateway token; its value
	// is the Gitea login.
	GiteaLoginLabel = "fleet.giteatools.dev/gitea-login"

	// GiteaServerLabel names, on such a Secret, the GiteaServer the token is for. A
	// Secret without it holds a token of the server the manager's --gitea-url names. The
	// gateway sends a token to no other server than the one it is labelled for.
	GiteaServerLabel = "fleet.giteatools.dev/gitea-server"

	// GatewayAudience is the audience a worker's ServiceAccount token must be bound to
	// (TokenRequest) for the gateway and the capability check to accept it.
	GatewayAudience = "fleet.giteatools.dev/gateway"
)
