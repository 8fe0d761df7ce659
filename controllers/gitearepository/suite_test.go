package gitearepository_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	ctx        context.Context // the manager's; env.Stop cancels it
)

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

	mgr, err := env.NewManager(ctrl.Options{})
	Expect(err).NotTo(HaveOccurred())
	hostFacts, selfStart, err = testfleet.ThisProcess("gitea-suite-host")
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
	port, err := testgitea.FreePort()
	Expect(err).NotTo(HaveOccurred())
	gatewayURL = "http://127.0.0.1:" + port
	Expect(mgr.Add(&gateway.Gateway{
		Addr: "127.0.0.1:" + port, Repositories: resolver, Reader: mgr.GetAPIReader(), Cache: mgr.GetClient(),
		Authn: gateway.NewAuthenticator(mgr.GetClient()), Credentials: gateway.NewCredentials(mgr.GetAPIReader(), credentialsNamespace, nil),
		Recorder: mgr.GetEventRecorder("fleet-gateway"), Client: mgr.GetClient(),
	})).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(elections.Coordinator.Held).Should(BeTrue(), "the manager is the fleet coordinator")
})

var _ = AfterSuite(func() {
	Expect(env.Stop()).To(Succeed()) // also stops the manager
	testfleet.StopGitea(forgeSrv, CurrentSpecReport().Failed(), "GiteaRepository")
})
