// The gateway suite drives the gateway as workers would, against a real kube-apiserver
// (envtest) with the project's CRDs, RBAC and admission policies, a real Gitea, and the
// TaskClaim and WorkerRegistration reconcilers running in a controller-runtime manager
// that also serves the gateway and HTTPS metrics, as cmd/ wires them.
//
// Worker accounts are write collaborators in Gitea (Gitea checks the acting user's
// permissions), but each worker holds only a read-only token; the write-scoped token the
// gateway acts with sits in a Secret of the credentials namespace.
package gateway_test

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/cli"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/nudge"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testfleet"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

const testHostID = "gateway-test-host"

var (
	srv        *testgitea.Server
	gc         *giteaclaim.Client
	suffix     string
	repo       string
	otherRepo  string
	ownerToken string
	human      gitUser

	env       *testenv.Env
	k8s       client.WithWatch
	ctx       context.Context // the manager's; env.Stop cancels it
	nsMain    string          // claims here are reconciled by the manager
	nsDirect  string          // claims here are written by hand (forged capabilities)
	credsNS   string          // the gateway's credentials namespace
	hostFacts liveness.HostFacts
	selfStart int64

	gatewayURL string // the manager's gateway
	metricsURL string // the manager's HTTPS metrics endpoint
	gw         *gateway.Gateway
	recorder   events.EventRecorder
	apiReader  client.Reader
)

type gitUser struct{ login, token string }

// TestMain runs this test binary as kubectl-fleet when asKubectlFleet is set: git runs
// it as its credential helper (credential_test.go).
func TestMain(m *testing.M) {
	if os.Getenv(asKubectlFleet) == "1" {
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func TestGateway(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Gateway suite (envtest kube-apiserver + real Gitea)")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)

	By("starting envtest")
	var err error
	env, ctx, err = testenv.StartSuite(GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	k8s = env.Client

	By("starting Gitea")
	srv, gc, err = testfleet.StartGitea(ctx)
	DeferCleanup(stopGitea)
	Expect(err).NotTo(HaveOccurred(), "the gateway suite needs a real Gitea; it does not skip without one")
	suffix = testgitea.RandomHex(3)
	owner := "gwowner-" + suffix
	ownerToken, err = srv.CreateUser(ctx, owner)
	Expect(err).NotTo(HaveOccurred())
	human = gitUser{login: "gwhuman-" + suffix}
	human.token, err = srv.CreateUser(ctx, human.login)
	Expect(err).NotTo(HaveOccurred())
	repo, err = srv.CreateRepo(ctx, ownerToken, "gw-"+suffix)
	Expect(err).NotTo(HaveOccurred())
	otherRepo, err = srv.CreateRepo(ctx, ownerToken, "gw-elsewhere-"+suffix)
	Expect(err).NotTo(HaveOccurred())
	Expect(srv.AddCollaborator(ctx, repo, human.login)).To(Succeed())
	Expect(srv.ProtectBranch(ctx, repo, "main", srv.AdminLogin)).To(Succeed())

	nsMain, nsDirect, credsNS = "gw-"+suffix, "gw-direct-"+suffix, "gw-creds-"+suffix
	Expect(env.CreateNamespaces(ctx, nsMain, nsDirect, credsNS)).To(Succeed())
	hostFacts, selfStart, err = testfleet.ThisProcess(testHostID)
	Expect(err).NotTo(HaveOccurred())

	By("starting the manager: reconcilers, the gateway and HTTPS metrics")
	gwAddr, metricsAddr := freeAddr(), freeAddr()
	gatewayURL, metricsURL = "http://"+gwAddr, "https://"+metricsAddr+"/metrics"
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{MaxConcurrentReconciles: 4},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&fleetv1alpha1.TaskClaim{}: {Namespaces: map[string]cache.Config{nsMain: {}}},
		}},
	})
	Expect(err).NotTo(HaveOccurred())
	// This host's agent and the fleet coordinator, the WorkerRegistration and TaskClaim
	// reconcilers, as cmd/setup.go runs them.
	nudges := &nudge.Hub{}
	elections, err := testfleet.Wire(mgr, testfleet.Wiring{Host: hostFacts, AgentNamespace: agentNamespace,
		Gitea: gc, Repository: repo, ClaimTTL: time.Hour, ActiveRecheck: time.Second, Nudges: nudges})
	Expect(err).NotTo(HaveOccurred())
	recorder, apiReader = mgr.GetEventRecorder("fleet-gateway"), mgr.GetAPIReader()
	gw = newGateway(mgr.GetClient(), apiReader, recorder, clock.RealClock{})
	gw.Addr = gwAddr
	gw.Cache = mgr.GetClient()
	gw.Nudges = nudges
	Expect(mgr.Add(gw)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(elections.Held, time.Minute).Should(BeTrue(), "the manager is its host's agent and the fleet coordinator")
	Eventually(func() error {
		c, err := net.Dial("tcp", gwAddr)
		if err == nil {
			_ = c.Close()
		}
		return err
	}).Should(Succeed())
})

// failures: the pull requests a spec left open are closed after it (testfleet.SpecHooks).
var failures = testfleet.SpecHooks(func() (*testgitea.Server, string) { return srv, repo })

var _ = AfterSuite(func() {
	Expect(env.Stop()).To(Succeed()) // also stops the manager
})

func stopGitea() { testfleet.StopGitea(srv, failures.Any(), "gateway") }

func freeAddr() string {
	GinkgoHelper()
	port, err := testgitea.FreePort()
	Expect(err).NotTo(HaveOccurred())
	return "127.0.0.1:" + port
}

// agentNamespace holds the hosts' coordination Leases in this suite.
const agentNamespace = "fleet-agents"
