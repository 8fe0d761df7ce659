// Package testfleet is what the suites that run task claims share: the Gitea they start
// and stop, the manager they wire the way cmd/setup.go wires the shipped one, the live
// workers they register, the targets they claim, and the Ginkgo nodes they run around
// each spec (SpecHooks; only Ginkgo suites import this package). Each suite keeps its own
// variables and its own flavour of worker (a Gitea account with a write token, or one that
// reaches Gitea only through the gateway); what every suite does alike lives here, once.
package testfleet

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/controllers/workerregistration"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/nudge"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// StartGitea starts the suite's Gitea (GITEA_URL and GITEA_TOKEN, or hack/gitea.sh on a
// free port) and the controller's client of it (administrator token). The server is
// returned even when the start failed half-way, so that StopGitea can stop it.
func StartGitea(ctx context.Context) (*testgitea.Server, *giteaclaim.Client, error) {
	srv, err := testgitea.Start(ctx)
	if err != nil {
		return srv, nil, err
	}
	gc, err := giteaclaim.New(srv.URL, srv.Token, giteaclaim.WithHTTPClient(srv.HTTP))
	return srv, gc, err
}

// StopGitea stops a Gitea the suite started; keep leaves its run directory for a look
// after failures, and says where it is.
func StopGitea(srv *testgitea.Server, keep bool, suite string) {
	if srv == nil || !srv.Started() {
		return
	}
	if keep {
		fmt.Fprintf(os.Stderr, "%s suite: failures; Gitea run directory kept: %s\n", suite, srv.RunDir())
	}
	if err := srv.Stop(keep); err != nil {
		fmt.Fprintf(os.Stderr, "%s suite: %v\n", suite, err)
	}
}

// ClosePulls closes every pull request left open in repo, for a spec's cleanup. Gitea
// tests each open pull request into a branch again whenever that branch moves, so pull
// requests that earlier specs left open would make every later merge or commit to the
// default branch dearer, and slow down the heads that later specs wait for.
func ClosePulls(srv *testgitea.Server, repo string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := srv.CloseOpenPulls(ctx, repo)
	return err
}

// Wiring is what a suite's manager runs besides its own additions: this host's agent and
// the fleet coordinator, the WorkerRegistration reconciler, and, with a Gitea client,
// the TaskClaim reconciler, each wired as cmd/setup.go wires the shipped manager.
type Wiring struct {
	// Host is this machine's facts (testenv.HostFacts): the agent campaigns for its host
	// and the prober probes its processes.
	Host liveness.HostFacts
	// AgentNamespace holds the hosts' coordination Leases.
	AgentNamespace string
	// Gitea is the controller's Gitea client of Repository, the repository the shipped
	// manager's flags name; Repositories finds the GiteaRepositories of a claim's
	// namespace. With neither, no TaskClaim reconciler runs.
	Gitea        *giteaclaim.Client
	Repository   string
	Repositories taskclaim.Repositories
	// ClaimTTL is a capability's lifetime (zero: an hour).
	ClaimTTL time.Duration
	// ActiveRecheck is how often an Active claim is looked at again (zero: a second).
	ActiveRecheck time.Duration
	// Nudges, when set, is shared with the suite's gateway (gateway.Gateway.Nudges), as
	// cmd/setup.go shares it.
	Nudges *nudge.Hub
	// Verdicts answers the capability verdict (nil: a SubjectAccessReview of the worker's
	// ServiceAccount, authz.Reviewer, as cmd/setup.go wires it). A benchmark that measures
	// claims and not permissions answers allowed.
	Verdicts taskclaim.VerdictChecker
	// Concurrency is how many claims are reconciled at once (zero: controller-runtime's
	// default, one).
	Concurrency int
}

// Wire adds what w names to mgr and returns the manager's elections; wait for
// Elections.Held before the first spec.
func Wire(mgr manager.Manager, w Wiring) (hostagent.Elections, error) {
	elections, err := hostagent.Campaign(mgr, w.AgentNamespace, w.Host.HostID, testenv.AgentTimings)
	if err != nil {
		return elections, err
	}
	clk := clock.RealClock{}
	if err := (&workerregistration.Reconciler{
		Client: mgr.GetClient(), Prober: &liveness.ProcProber{Facts: w.Host}, Clock: clk,
		Recorder: mgr.GetEventRecorder("workerregistration-controller"),
		Agent:    elections.Host, Coordinator: elections.Coordinator, AgentNamespace: w.AgentNamespace, Repository: w.Repository,
	}).SetupWithManager(mgr); err != nil {
		return elections, err
	}
	if w.Gitea == nil && w.Repositories == nil {
		return elections, nil
	}
	ttl, recheck := w.ClaimTTL, w.ActiveRecheck
	if ttl == 0 {
		ttl = time.Hour
	}
	if recheck == 0 {
		recheck = time.Second
	}
	verdicts := w.Verdicts
	if verdicts == nil {
		verdicts = authz.Reviewer{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}
	}
	r := &taskclaim.Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Repositories:  w.Repositories,
		Verdicts:      verdicts,
		Fence:         workflowfence.Fence{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Clock: clk},
		TTL:           ttl,
		ActiveRecheck: recheck,
		Nudges:        w.Nudges,
		Clock:         clk,
		Recorder:      mgr.GetEventRecorder("taskclaim-controller"),

		MaxConcurrentReconciles: w.Concurrency,
	}
	if w.Gitea != nil { // a nil *Client would be a non-nil Gitea
		r.Gitea, r.Repository = w.Gitea, w.Repository
	}
	return elections, r.SetupWithManager(mgr)
}

// ThisProcess is this host's facts (testenv.HostFacts, hostID standing in for
// /etc/machine-id) and the start time of this test process: what a WorkerSpec's Host and
// StartTime take, so that the registrations point at the test binary.
func ThisProcess(hostID string) (liveness.HostFacts, int64, error) {
	facts, err := testenv.HostFacts(hostID)
	if err != nil {
		return facts, 0, err
	}
	start, err := liveness.ProcessStartTime("", int64(os.Getpid()))
	return facts, start, err
}

// Worker is a registered fleet worker: a ServiceAccount (its Kubernetes identity) and a
// WorkerRegistration of the same name whose process is the test binary.
type Worker struct {
	Name, Namespace string
	// Identity is the registration's spec.identity, its Gitea login.
	Identity string
	// Client acts as the worker's ServiceAccount (impersonation).
	Client client.Client
}

// WorkerSpec says which worker Register creates.
type WorkerSpec struct {
	Namespace, Name string
	// Identity is the Gitea login (default: Name).
	Identity string
	// Repository is the registration's repository binding.
	Repository string
	// Host and StartTime place the registration's process: this test binary, on this host.
	Host      liveness.HostFacts
	StartTime int64
	// Unbound leaves the ServiceAccount without its fleet-worker RoleBinding.
	Unbound bool
}

// Register creates the worker's ServiceAccount, its fleet-worker RoleBinding (unless
// Unbound) and a registration with an hour's TTL, heartbeats it as the worker (as the
// administrator when Unbound), and waits until the host's agent shows it Active and
// live.
func Register(ctx context.Context, env *testenv.Env, s WorkerSpec) (*Worker, error) {
	w := &Worker{Name: s.Name, Namespace: s.Namespace, Identity: s.Identity}
	if w.Identity == "" {
		w.Identity = s.Name
	}
	admin := env.Client
	if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace}}); err != nil {
		return nil, err
	}
	if !s.Unbound {
		if err := BindWorker(ctx, admin, s.Namespace, s.Name); err != nil {
			return nil, err
		}
	}
	user, groups := testenv.ServiceAccount(s.Namespace, s.Name)
	var err error
	if w.Client, err = env.Impersonate(user, groups...); err != nil {
		return nil, err
	}
	wr := &fleetv1alpha1.WorkerRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
		Spec: fleetv1alpha1.WorkerRegistrationSpec{
			ClientInstanceID: "inst-" + s.Name, WorkerNamespace: "slot-" + s.Name, Identity: w.Identity, Remote: "origin",
			Repository: s.Repository, HeartbeatTTLSeconds: 3600,
			Process: fleetv1alpha1.ProcessIdentity{HostID: s.Host.HostID, BootID: s.Host.BootID,
				PID: int64(os.Getpid()), StartTime: ptr.To(s.StartTime)},
		},
	}
	if err := admin.Create(ctx, wr); err != nil {
		return nil, err
	}
	// The worker heartbeats itself; an unbound one may not, so the administrator does.
	beater := w
	if s.Unbound {
		beater = &Worker{Name: w.Name, Namespace: w.Namespace, Client: admin}
	}
	if err := Heartbeat(ctx, admin, beater); err != nil {
		return nil, err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(wr), wr); err != nil {
			return false, err
		}
		return wr.Status.Phase == fleetv1alpha1.PhaseActive && wr.Status.OwnershipState == fleetv1alpha1.OwnershipLive, nil
	})
	if err != nil {
		return nil, fmt.Errorf("registration %s/%s never became Active and live (phase %q, ownership %q): %w",
			s.Namespace, s.Name, wr.Status.Phase, wr.Status.OwnershipState, err)
	}
	return w, nil
}

// BindWorker binds the fleet-worker ClusterRole to the ServiceAccount ns/name.
func BindWorker(ctx context.Context, admin client.Client, ns, name string) error {
	return admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-worker-" + name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fleet-worker"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	})
}

// Heartbeat renews the worker's heartbeat through the status subresource, as the worker
// (w.Client), reading the row as admin.
func Heartbeat(ctx context.Context, admin client.Client, w *Worker) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wr := &fleetv1alpha1.WorkerRegistration{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Name}, wr); err != nil {
			return err
		}
		wr.Status.LastHeartbeatAt = ptr.To(metav1.NewTime(time.Now().Truncate(time.Second)))
		return w.Client.Status().Update(ctx, wr)
	})
}

// IssueTarget is issue n of repo, as a claim names it.
func IssueTarget(repo string, n int64) fleetv1alpha1.TaskTarget {
	return fleetv1alpha1.TaskTarget{Repository: repo, Kind: fleetv1alpha1.TargetKindIssue, Number: n}
}

// PullTarget is pull request pr of repo at its head, as a claim names it.
func PullTarget(repo string, pr testgitea.PullRequest) fleetv1alpha1.TaskTarget {
	return fleetv1alpha1.TaskTarget{Repository: repo, Kind: fleetv1alpha1.TargetKindPullRequest, Number: pr.Number, HeadSHA: pr.HeadSHA}
}
