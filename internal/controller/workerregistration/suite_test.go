package workerregistration_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/controller/workerregistration"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testworker"
)

// testHostID stands in for /etc/machine-id; the boot id and /proc are the machine's own.
const testHostID = "fleet-test-host"

const canonicalRepo = "acme/widgets"

// agentNamespace holds the coordination Leases.
const agentNamespace = "fleet-agents"

const hour = time.Hour

var (
	env       *testenv.Env
	k8sClient client.Client // cacheless: assertions read the API server directly
	ctx       context.Context
	cancel    context.CancelFunc
	fleet     testworker.Fleet
)

func TestWorkerRegistration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "WorkerRegistration suite (envtest: real kube-apiserver and etcd)")
}

var _ = BeforeSuite(func() {
	testenv.SetLogger(GinkgoWriter)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	ctx, cancel = context.WithCancel(context.Background())

	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient = env.Client
	Expect(env.InstallManifests(ctx)).To(Succeed())

	facts, err := testenv.HostFacts(testHostID)
	Expect(err).NotTo(HaveOccurred())
	fleet = testworker.Fleet{Client: k8sClient, Host: retirement.Host{HostID: facts.HostID, BootID: facts.BootID}, Repository: canonicalRepo}

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(env.Config)
	Expect(err).NotTo(HaveOccurred())
	instance := hostagent.NewInstanceID()
	timings := hostagent.Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: time.Second}
	agent := hostagent.NewHost(cs, agentNamespace, facts.HostID, instance, timings)
	coordinator := hostagent.NewCoordinator(cs, agentNamespace, instance, timings)
	Expect(mgr.Add(agent)).To(Succeed())
	Expect(mgr.Add(coordinator)).To(Succeed())
	Expect((&workerregistration.Reconciler{
		Client: mgr.GetClient(), Prober: &liveness.ProcProber{Facts: facts}, Clock: clock.RealClock{},
		Recorder: mgr.GetEventRecorder("workerregistration-controller"),
		Agent:    agent, Coordinator: coordinator, AgentNamespace: agentNamespace,
	}).SetupWithManager(mgr)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(agent.Held).Should(BeTrue(), "the manager is its host's agent")
	Eventually(coordinator.Held).Should(BeTrue(), "and the fleet coordinator")
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	Expect(env.Stop()).To(Succeed())
})

func newNamespace() string {
	GinkgoHelper()
	ns, err := env.NewNamespace(ctx, "fleet-test")
	Expect(err).NotTo(HaveOccurred())
	return ns
}

func get(wr *fleetv1alpha1.WorkerRegistration) *fleetv1alpha1.WorkerRegistration {
	GinkgoHelper()
	return fleet.Get(ctx, wr)
}
