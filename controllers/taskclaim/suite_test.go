// The TaskClaim suite is the end-to-end suite of the TaskClaim protocol (seed 002): a real
// kube-apiserver (envtest) with the project's CRDs, RBAC and admission policies, a real
// Gitea server, and the TaskClaim and WorkerRegistration reconcilers running in a
// controller-runtime manager.
//
// Run it with KUBEBUILDER_ASSETS pointing at kube-apiserver and etcd (hack/envtest.sh
// prints the folder). Gitea is the server named by GITEA_URL and GITEA_TOKEN, or one the
// suite starts with hack/gitea.sh (FLEET_GITEA_SCRIPT, else found above the working
// directory); a Gitea that cannot start fails the suite.
package taskclaim_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testfleet"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// testHostID stands in for /etc/machine-id; the boot id and /proc are the machine's own.
const testHostID = "taskclaim-test-host"

// Suite timings. The manager's reconciler re-reads active claims every activeRecheck, so
// Gitea-side triggers show within a few seconds.
const (
	claimTTL      = time.Hour
	activeRecheck = time.Second
	// reconcilers is the manager's MaxConcurrentReconciles, the shipped default: claims
	// on one target are decided truly concurrently, so contention races the Lease and
	// Gitea writes.
	reconcilers = taskclaim.DefaultConcurrency
)

var (
	// Gitea.
	srv        *testgitea.Server
	gc         *giteaclaim.Client // the controller's client (administrator token)
	suffix     string
	repo       string // the controller's repository, owner/name
	otherRepo  string // a second repository the controller does not serve
	ownerToken string // owner of both repositories (not a worker)
	human      gitUser
	blockedID  int64 // id of the "blocked" label in repo

	// Kubernetes.
	env       *testenv.Env
	k8s       client.WithWatch // cacheless admin client: assertions read the API server
	ctx       context.Context  // the manager's; env.Stop cancels it
	nsMain    string           // claims here are reconciled by the manager
	nsDirect  string           // claims here are reconciled only by hand (Reconcile calls)
	recorder  events.EventRecorder
	hostFacts liveness.HostFacts
	selfStart int64 // start time of this test process (its registrations point at it)

	began = time.Now()
)

// gitUser is a Gitea account and its token.
type gitUser struct {
	login, token string
}

func TestTaskClaims(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "TaskClaim suite (envtest kube-apiserver + real Gitea)")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
	SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)

	By("starting envtest and installing CRDs, RBAC and admission policies")
	t0 := time.Now()
	var err error
	env, ctx, err = testenv.StartSuite(GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	k8s = env.Client
	timing("envtest", time.Since(t0))

	By("starting Gitea (GITEA_URL/GITEA_TOKEN, or hack/gitea.sh on a free port)")
	t0 = time.Now()
	srv, gc, err = testfleet.StartGitea(ctx)
	DeferCleanup(stopGitea) // also stops a half-started server
	Expect(err).NotTo(HaveOccurred(), "the TaskClaim suite needs a real Gitea; it does not skip without one")
	seedGitea()
	timing("gitea", time.Since(t0))

	t0 = time.Now()
	nsMain, nsDirect = "claims-"+suffix, "direct-"+suffix
	Expect(env.CreateNamespaces(ctx, nsMain, nsDirect)).To(Succeed())
	hostFacts, selfStart, err = testfleet.ThisProcess(testHostID)
	Expect(err).NotTo(HaveOccurred())

	By("starting the manager: TaskClaim and WorkerRegistration reconcilers")
	mgr, err := env.NewManager(ctrl.Options{
		Controller: config.Controller{MaxConcurrentReconciles: reconcilers},
		// The manager sees claims (and their locks) of nsMain only; claims in nsDirect are
		// driven by hand.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&fleetv1alpha1.TaskClaim{}: {Namespaces: map[string]cache.Config{nsMain: {}}},
			&coordinationv1.Lease{}:    {Namespaces: map[string]cache.Config{nsMain: {}, agentNamespace: {}}},
		}},
	})
	Expect(err).NotTo(HaveOccurred())
	recorder = mgr.GetEventRecorder("taskclaim-test")
	// This host's agent and the fleet coordinator, the WorkerRegistration and TaskClaim
	// reconcilers, as cmd/setup.go runs them: only the holder of a host's Lease writes its
	// rows' ownership.
	elections, err := testfleet.Wire(mgr, testfleet.Wiring{Host: hostFacts, AgentNamespace: agentNamespace,
		Gitea: gc, Repository: repo, ClaimTTL: claimTTL, ActiveRecheck: activeRecheck})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(elections.Held, time.Minute).Should(BeTrue(), "the manager is its host's agent and the fleet coordinator")
	timing("manager", time.Since(t0))
})

// failures: the pull requests a spec left open are closed after it (testfleet.SpecHooks).
var failures = testfleet.SpecHooks(func() (*testgitea.Server, string) { return srv, repo })

var _ = AfterSuite(func() {
	Expect(env.Stop()).To(Succeed()) // also stops the manager
	timing("suite", time.Since(began))
})

// stopGitea stops a Gitea this suite started (keeping its run directory after failures).
func stopGitea() { testfleet.StopGitea(srv, failures.Any(), "taskclaim") }

// seedGitea creates the repository owner, a human reviewer, the controller's repository,
// a second repository, and the "blocked" label.
func seedGitea() {
	GinkgoHelper()
	suffix = testgitea.RandomHex(3)
	owner := "owner-" + suffix
	tok, err := srv.CreateUser(ctx, owner)
	Expect(err).NotTo(HaveOccurred())
	ownerToken = tok
	human = gitUser{login: "human-" + suffix}
	human.token, err = srv.CreateUser(ctx, human.login)
	Expect(err).NotTo(HaveOccurred())
	repo, err = srv.CreateRepo(ctx, ownerToken, "fleet-"+suffix)
	Expect(err).NotTo(HaveOccurred())
	otherRepo, err = srv.CreateRepo(ctx, ownerToken, "elsewhere-"+suffix)
	Expect(err).NotTo(HaveOccurred())
	Expect(srv.AddCollaborator(ctx, repo, human.login)).To(Succeed())
	blockedID, err = srv.EnsureLabel(ctx, repo, "blocked")
	Expect(err).NotTo(HaveOccurred())
}

// timing prints one timing line on stderr, so runs report where the time goes.
func timing(what string, d time.Duration) {
	fmt.Fprintf(os.Stderr, "TIMING %s: %s\n", what, d.Round(10*time.Millisecond))
}

// evidence prints one line of completion evidence (contention counts, the independence
// matrix) on stderr.
func evidence(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "EVIDENCE "+format+"\n", args...)
}

// agentNamespace holds the hosts' coordination Leases in this suite.
const agentNamespace = "fleet-agents"
