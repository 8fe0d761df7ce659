package workerregistration_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testfleet"
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
	k8sClient client.Client   // cacheless: assertions read the API server directly
	ctx       context.Context // the manager's; env.Stop cancels it
	fleet     testworker.Fleet
)

func TestWorkerRegistration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "WorkerRegistration suite (envtest: real kube-apiserver and etcd)")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	var err error
	env, ctx, err = testenv.StartSuite(GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	k8sClient = env.Client

	facts, err := testenv.HostFacts(testHostID)
	Expect(err).NotTo(HaveOccurred())
	fleet = testworker.Fleet{Client: k8sClient, Host: retirement.Host{HostID: facts.HostID, BootID: facts.BootID}, Repository: canonicalRepo}

	mgr, err := env.NewManager(ctrl.Options{})
	Expect(err).NotTo(HaveOccurred())
	// This host's agent and the fleet coordinator, and the WorkerRegistration reconciler,
	// as cmd/setup.go runs them.
	elections, err := testfleet.Wire(mgr, testfleet.Wiring{Host: facts, AgentNamespace: agentNamespace, Repository: canonicalRepo})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(elections.Held).Should(BeTrue(), "the manager is its host's agent and the fleet coordinator")
})

var _ = AfterSuite(func() {
	Expect(env.Stop()).To(Succeed()) // also stops the manager
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
