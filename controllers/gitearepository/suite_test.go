package gitearepository_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/giteatools/fleet-controller/controllers/gitearepository"
	"github.com/giteatools/fleet-controller/controllers/giteaserver"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testfleet"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// The suite runs the GiteaServer and GiteaRepository reconcilers in a manager against
// envtest's kube-apiserver and a real Gitea, and reads what they record with a cacheless
// client. Both check again every second (every half second when not Ready), so a change
// made in Gitea shows without a spec change. The same manager decides TaskClaims in the
// repositories (claims_test.go), with registrations of live workers on this host.
const (
	// controllerNamespace is the controller's own namespace: token Secrets live there.
	controllerNamespace = "fleet-system"
	// credentialsNamespace holds the gateway's credential Secrets (the worker logins).
	credentialsNamespace = "fleet-credentials"
	agentNamespace       = "fleet-agents"
)

var (
	hostFacts liveness.HostFacts
	selfStart int64
	env       *testenv.Env
	k8sClient client.Client
	forgeSrv  *testgitea.Server
	// adminGitea reads claim records as Gitea holds them.
	adminGitea *giteaclaim.Client
	// resolver is the manager's: it finds claims' repositories and the sweep's.
	resolver *gitearepository.Resolver
	// gatewayURL is the manager's gateway.
	gatewayURL string
	ctx        context.Context // the suite's; env.Stop cancels it
	// running is the manager serving the suite now (a spec may stop it and start another).
	running *runningManager
)

// runningManager is one manager process's worth of the suite: stop cancels its context
// and waits until every runnable (reconcilers, gateway, elections) returned.
type runningManager struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *runningManager) stop() {
	m.cancel()
	Eventually(m.done, time.Minute).Should(BeClosed(), "the manager stopped")
}

func TestGiteaRepository(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "GiteaServer and GiteaRepository suite (envtest kube-apiserver + real Gitea)")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	var err error
	// The manifests hold the fleet-worker ClusterRole.
	env, ctx, err = testenv.StartSuite(GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	k8sClient = env.Client
	forgeSrv, adminGitea, err = testfleet.StartGitea(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(env.CreateNamespaces(ctx, controllerNamespace, credentialsNamespace)).To(Succeed())

	hostFacts, selfStart, err = testfleet.ThisProcess("gitea-suite-host")
	Expect(err).NotTo(HaveOccurred())
	port, err := testgitea.FreePort()
	Expect(err).NotTo(HaveOccurred())
	gatewayURL = "http://127.0.0.1:" + port
	running = startManager()
})

// startManager starts the suite's manager, as cmd/ wires one started without --gitea-url
// and --repository, and waits until it is the fleet coordinator. Its gateway listens on
// gatewayURL. A spec that stops the running manager and starts a new one gets it in the
// same process, as a restarted pod would be: nothing carries over but the API server's
// and Gitea's state.
func startManager() *runningManager {
	GinkgoHelper()
	// The same controllers again in one process: their names are the shipped ones.
	mgr, err := env.NewManager(ctrl.Options{Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	Expect(err).NotTo(HaveOccurred())
	dialer := &giteaserver.Dialer{Reader: mgr.GetAPIReader(), Namespace: controllerNamespace}
	// The manager decides TaskClaims in GiteaRepositories only, as one started without
	// --gitea-url and --repository does.
	resolver = &gitearepository.Resolver{Reader: mgr.GetClient(), Dialer: dialer}
	elections, err := testfleet.Wire(mgr, testfleet.Wiring{Host: hostFacts, AgentNamespace: agentNamespace, Repositories: resolver})
	Expect(err).NotTo(HaveOccurred())
	Expect((&giteaserver.Reconciler{
		Client: mgr.GetClient(), Dialer: dialer, Recorder: mgr.GetEventRecorder("giteaserver-controller"),
		Coordinator: elections.Coordinator, Interval: time.Second, Retry: 500 * time.Millisecond,
	}).SetupWithManager(mgr)).To(Succeed())
	Expect((&gitearepository.Reconciler{
		Client: mgr.GetClient(), Dialer: dialer, Recorder: mgr.GetEventRecorder("gitearepository-controller"),
		Coordinator: elections.Coordinator, CredentialsNamespace: credentialsNamespace,
		Interval: time.Second, Retry: 500 * time.Millisecond,
	}).SetupWithManager(ctx, mgr)).To(Succeed())
	// The gateway, as cmd/setup.go runs it without --gitea-url: every worker is routed to
	// the server of the GiteaRepository its bound repository is named by (gateway_test.go).
	Expect(mgr.Add(&gateway.Gateway{
		Addr: strings.TrimPrefix(gatewayURL, "http://"), Repositories: resolver, Reader: mgr.GetAPIReader(), Cache: mgr.GetClient(),
		Authn: gateway.NewAuthenticator(mgr.GetClient()), Credentials: gateway.NewCredentials(mgr.GetAPIReader(), credentialsNamespace, nil),
		Recorder: mgr.GetEventRecorder("fleet-gateway"), Client: mgr.GetClient(),
	})).To(Succeed())
	mctx, cancel := context.WithCancel(ctx)
	m := &runningManager{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(m.done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	// A new manager waits out the stopped one's coordinator Lease, if it was not given back.
	Eventually(elections.Coordinator.Held, 2*testenv.AgentTimings.LeaseDuration).Should(BeTrue(), "the manager is the fleet coordinator")
	return m
}

var _ = AfterSuite(func() {
	Expect(env.Stop()).To(Succeed()) // also stops the manager
	testfleet.StopGitea(forgeSrv, CurrentSpecReport().Failed(), "GiteaRepository")
})
