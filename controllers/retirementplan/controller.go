// Package retirementplan holds the two RetirementPlan reconcilers. A plan a user
// creates is a fleet plan: FleetPlanReconciler (fleetplan.go) fans it out to one host
// plan per host that has an agent, judges its approval and aggregates what the host
// plans report; it creates host plans and reads them, and writes only fleet plans. A
// host plan is HostPlanReconciler's (hostplan.go): only the agent holding its host's
// Lease takes it through its stages, each ending in one status write (record.go): the
// dry run, its pages (pages.go), the fleet plan's approval narrowed to its host
// (hostapproval.go), and the apply, exactly once (apply.go: the hold, intent.go; the
// rows, rows.go). When that agent is lost, the host-plan reconciler of the fleet
// coordinator's manager stands in and closes it (hostloss.go).
//
// The two meet only in the API server: the fleet plan's status (hosts, approval) and
// the host plans' status. Nothing of one runs inside the other's reconcile.
//
// Both ask internal/retirement for every decision (the plan, the approval verdict, the
// apply decision, each row's recheck, the report) and only read and write. A fleet plan's
// pass reads its phase (phase.go), fans out (fleetsplit.go), reads what the step needs
// (fleetobserve.go), decides its next status purely (fleetstatus.go) and writes it once
// (fleetplan.go, record); a host plan's reads are in gather.go, its next status in
// status.go. Deps is what they share; each reconciler owns its own state.
package retirementplan

import (
	"context"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// ApproverChecker answers what an approval verdict needs to know about who approved:
// whether the subject (approvedBy with approvedGroups) may approve in the namespace,
// whether it is a worker, and whether the admission policy that guards approvals is
// installed as shipped.
type ApproverChecker interface {
	CanApprove(ctx context.Context, s authz.Subject, namespace string) (allowed bool, reason string, err error)
	WorkerFacts(ctx context.Context, s authz.Subject, namespace string) (retirement.SubjectFacts, error)
	ApprovalGuard(ctx context.Context) (retirement.ApprovalGuard, error)
}

// Fence is the workflow fence: it moves whenever a task claim is acquired.
type Fence interface {
	Read(ctx context.Context, namespace string) (string, error)
	Moved(ctx context.Context, namespace, since string) (bool, error)
}

// RegistrationLister lists every WorkerRegistration of a namespace straight from the API
// server, as one consistent view at resourceVersion (the newest when empty), without
// managedFields, and says which resourceVersion the view is.
type RegistrationLister interface {
	ListAt(ctx context.Context, namespace, resourceVersion string) ([]fleetv1alpha1.WorkerRegistration, string, error)
}

// Deps is what both RetirementPlan reconcilers read and write through. It is
// configuration, set before the manager starts and never changed after, and one memo: the
// view of the registrations this process's last fan-out read, which its own host plan's
// dry run reads at the same resourceVersion (gather.go).
type Deps struct {
	client.Client
	// APIReader reads straight from the API server; apply never trusts the cache.
	APIReader client.Reader
	// Registrations lists a namespace's registrations straight from the API server, the
	// plan's and the apply's authoritative read (reglist.Lister: chunks, each decoded
	// while the next one is asked for). Nil: chunks read one after the other through
	// APIReader.
	Registrations RegistrationLister
	// Host is the machine (and boot) this controller runs on.
	Host retirement.Host
	// Repository is the default canonical repository binding.
	Repository string
	// Approvers checks the approver and the guarding policy when the approval lands,
	// right before the first write, and again during a long apply.
	Approvers ApproverChecker
	// Fence is the workflow fence, read before the authoritative read and before each row.
	Fence    Fence
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	// PageRows caps the rows of one RetirementPlanPage (zero: retirement.PageMaxRows).
	PageRows int

	views viewMemo
}

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplans,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplans/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplans/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=gitearepositories,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=workerregistrations,verbs=retire
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update

// HostAgent is this manager's agent for its host (internal/hostagent): the host id, the
// agent's instance id, and whether it holds the host's coordination Lease right now.
type HostAgent interface {
	ID() string
	Instance() string
	Held() bool
}

// Coordinator is this manager's candidacy for the fleet coordinator Lease
// (hostagent.NewCoordinator): whether it holds the Lease right now.
type Coordinator interface {
	Held() bool
}
