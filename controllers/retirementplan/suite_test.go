package retirementplan_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/retirementplan"
	"github.com/giteatools/fleet-controller/controllers/workerregistration"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/reglist"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testworker"
)

// testHostID is this machine's /etc/machine-id (or, on a machine without one, a stand-in
// for it); the boot id and /proc are the machine's real ones. Host A's agent is the
// suite's manager.
var testHostID = machineID()

// hostB is a second host, whose agent is the suite's second manager: its prober sees this
// machine's /proc but reports host id hostB, so the children of this test registered
// under hostB are "its" processes.
const hostB = "fleet-test-host-b"

// hostC is a host with no agent at all.
const hostC = "fleet-test-host-c"

// agentNamespace holds the hosts' coordination Leases.
const agentNamespace = "fleet-agents"

// agentTimings renew often; a stopped agent releases its Lease, so a standby takes over
// within a retry period.
var agentTimings = testenv.AgentTimings

// hostAgentGrace is how long the suite's fleet plans wait for a host whose Lease lapsed
// before they close its host plan (the shipped default is
// retirement.DefaultHostAgentGrace): long against the agents' one-second retry period,
// short enough that specs of lost hosts do not wait out the default.
const hostAgentGrace = 4 * time.Second

const canonicalRepo = "acme/widgets"

// gitopsUser is the identity that applies approvals in these tests.
const gitopsUser = "gitops"

// Registrations labelled unclassifiedLabel are left alone by the WorkerRegistration
// reconciler, so a test can store an ownership state by hand.
const unclassifiedLabel = "fleet-test/unclassified"

var (
	env       *testenv.Env
	k8sClient client.Client   // cacheless: assertions read the API server directly
	ctx       context.Context // the managers'; env.Stop cancels it
	prober    *liveness.ProcProber
	host      retirement.Host
	fleet     testworker.Fleet
	mgrPlans  *planReconcilers
	// agentA and agentB are the host agents of the two managers.
	agentA, agentB *hostagent.Agent
	// plansB is the second manager's RetirementPlan reconciler (host B).
	plansB     *planReconcilers
	hostBFacts liveness.HostFacts
)

func machineID() string {
	b, err := os.ReadFile("/etc/machine-id")
	if id := strings.TrimSpace(string(b)); err == nil && id != "" {
		return id
	}
	return "fleet-test-host"
}

func TestRetirementPlan(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "RetirementPlan suite (envtest: real kube-apiserver and etcd)")
}

var _ = BeforeSuite(func() {
	// Generous: the suite runs next to other packages' suites, and a live fleet of 50
	// heartbeating workers loads a 2-core machine. Only failures wait this long.
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	var err error
	env, ctx, err = testenv.StartSuite(GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	k8sClient = env.Client
	// The GitOps tool's identity: bound cluster-wide to the (otherwise unbound) approver
	// role, once the controller honours approvals of new plans.
	Expect(env.AllowApprovals(ctx, gitopsUser)).To(Succeed())

	facts, err := testenv.HostFacts(testHostID)
	Expect(err).NotTo(HaveOccurred())
	prober = &liveness.ProcProber{Facts: facts}
	host = retirement.Host{HostID: facts.HostID, BootID: facts.BootID, BootTime: facts.BootTime}
	fleet = testworker.Fleet{Client: k8sClient, Host: host, Repository: canonicalRepo}

	agentA = startManager(ctx, facts, "")
	hostBFacts = facts
	hostBFacts.HostID = hostB
	agentB = startManager(ctx, hostBFacts, "-b")
	Eventually(agentA.Held).Should(BeTrue(), "host A's agent holds its Lease")
	Eventually(agentB.Held).Should(BeTrue(), "host B's agent holds its Lease")
})

// startManager starts a manager that is the agent of the host facts names: its
// WorkerRegistration reconciler (wired to skip unclassifiedLabel rows) and its
// RetirementPlan reconciler (for every plan except those named "direct-*", which tests
// reconcile by hand with specially wired reconcilers), and its host and coordinator
// elections. suffix keeps the controller names apart.
func startManager(ctx context.Context, facts liveness.HostFacts, suffix string) *hostagent.Agent {
	GinkgoHelper()
	mgr, err := env.NewManager(ctrl.Options{})
	Expect(err).NotTo(HaveOccurred())
	elections, err := hostagent.Campaign(mgr, agentNamespace, facts.HostID, agentTimings)
	Expect(err).NotTo(HaveOccurred())
	agent := elections.Host
	p := &liveness.ProcProber{Facts: facts}

	// Plans rest on the ownership state the WorkerRegistration reconciler computes, so it
	// runs here too.
	classified := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[unclassifiedLabel] == "" })
	Expect((&workerregistration.Reconciler{
		Client: mgr.GetClient(), Prober: p, Clock: clock.RealClock{},
		Recorder: mgr.GetEventRecorder("workerregistration-controller"),
		Agent:    agent, Coordinator: elections.Coordinator, AgentNamespace: agentNamespace,
	}).SetupWithManagerNamed(mgr, "workerregistration"+suffix, classified)).To(Succeed())

	plans := newPlanReconciler(mgr.GetClient(), mgr.GetAPIReader(), p)
	plans.Host = retirement.Host{HostID: facts.HostID, BootID: facts.BootID, BootTime: facts.BootTime}
	plans.Agent = agent
	plans.Registrations, err = reglist.New(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetScheme()) // as cmd/ wires it
	Expect(err).NotTo(HaveOccurred())
	// No Coordinator: both managers may fan out and aggregate fleet plans, so specs can
	// show that the answer does not depend on which one did. The single-writer rule of the
	// coordinator Lease is shown by its own spec (fleetrobust_test.go) and by test/fleet,
	// which runs the manager binary as shipped.
	plans.Recorder = mgr.GetEventRecorder("retirementplan-controller")
	notDirect := predicate.NewPredicateFuncs(func(o client.Object) bool { return !strings.HasPrefix(o.GetName(), "direct-") })
	Expect(plans.SetupWithManagerNamed(mgr, "retirementplan"+suffix, notDirect)).To(Succeed())
	if suffix == "" {
		mgrPlans = plans
	} else {
		plansB = plans
	}
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return agent
}

var _ = AfterSuite(func() {
	Expect(env.Stop()).To(Succeed()) // also stops the managers
})

// newPlanReconciler wires a RetirementPlan reconciler against the real API server: c
// writes, reader is the authoritative reader (also of the workflow fence).
func newPlanReconciler(c client.Client, reader client.Reader, p liveness.Prober) *planReconcilers {
	deps := &retirementplan.Deps{
		Client:     c,
		APIReader:  reader,
		Host:       host,
		Repository: canonicalRepo,
		Approvers:  authz.Reviewer{Client: c, Reader: reader},
		Fence:      workflowfence.Fence{Client: c, Reader: reader, Clock: clock.RealClock{}},
		Clock:      clock.RealClock{},
		Recorder:   testenv.Discard,
	}
	// A hand-driven reconciler is host A's agent by fiat: the plans it drives
	// ("direct-*") are seen by no manager.
	hosts := &retirementplan.HostPlanReconciler{Deps: deps, Agent: heldAgent{host: host.HostID}, AgentNamespace: agentNamespace,
		HostAgentGrace: hostAgentGrace}
	if p != nil {
		hosts.Prober, hosts.Reprober = p, p
	}
	return &planReconcilers{
		HostPlanReconciler: hosts,
		fleet:              &retirementplan.FleetPlanReconciler{Deps: deps, AgentNamespace: agentNamespace},
	}
}

// planReconcilers is one manager's two RetirementPlan reconcilers. Its fields are the
// host-plan reconciler's and, through it, the shared Deps; the fleet-plan reconciler's
// own are under fleet. Reconcile routes a plan as the manager's two controllers do.
type planReconcilers struct {
	*retirementplan.HostPlanReconciler
	fleet *retirementplan.FleetPlanReconciler
}

// Reconcile hands a host plan to the host-plan reconciler. A fleet plan it drives as a
// manager's two work queues would: the fleet plan, then each of its host plans, and the
// fleet plan again while a host plan's write would have enqueued it. The result asks to
// look again as soon as the earliest of them does. A plan that is gone goes to both.
func (p *planReconcilers) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	plan := &fleetv1alpha1.RetirementPlan{}
	err := p.APIReader.Get(ctx, req.NamespacedName, plan)
	switch {
	case apierrors.IsNotFound(err):
		if _, err := p.HostPlanReconciler.Reconcile(ctx, req); err != nil {
			return ctrl.Result{}, err
		}
		return p.fleet.Reconcile(ctx, req)
	case err != nil:
		return ctrl.Result{}, err
	case plan.Spec.HostID != "":
		return p.HostPlanReconciler.Reconcile(ctx, req)
	}
	var out ctrl.Result
	for range 10 {
		res, err := p.fleet.Reconcile(ctx, req)
		if err != nil {
			return ctrl.Result{}, err
		}
		out = sooner(out, res)
		children := &fleetv1alpha1.RetirementPlanList{}
		if err := p.APIReader.List(ctx, children, client.InNamespace(plan.Namespace)); err != nil {
			return ctrl.Result{}, err
		}
		changed := false
		for i := range children.Items {
			c := &children.Items[i]
			if !metav1.IsControlledBy(c, plan) {
				continue
			}
			res, err := p.HostPlanReconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
			if err != nil {
				return ctrl.Result{}, err
			}
			out = sooner(out, res)
			after := &fleetv1alpha1.RetirementPlan{}
			if err := p.APIReader.Get(ctx, client.ObjectKeyFromObject(c), after); err != nil || after.ResourceVersion != c.ResourceVersion {
				changed = true
			}
		}
		if !changed {
			return out, nil
		}
		out = ctrl.Result{} // the next round's results say what is still waiting
	}
	return out, nil
}

// sooner is the result that looks again first.
func sooner(a, b ctrl.Result) ctrl.Result {
	if a.RequeueAfter == 0 || (b.RequeueAfter > 0 && b.RequeueAfter < a.RequeueAfter) {
		return b
	}
	return a
}

// SetupWithManagerNamed registers both reconcilers, as name-host and name-fleet.
func (p *planReconcilers) SetupWithManagerNamed(mgr ctrl.Manager, name string, preds ...predicate.Predicate) error {
	if err := p.HostPlanReconciler.SetupWithManagerNamed(mgr, name+"-host", preds...); err != nil {
		return err
	}
	return p.fleet.SetupWithManagerNamed(mgr, name+"-fleet", preds...)
}

// heldAgent is an agent that holds its host by fiat, for reconcilers driven by hand.
type heldAgent struct{ host string }

func (a heldAgent) ID() string       { return a.host }
func (a heldAgent) Instance() string { return "hand-driven" }
func (a heldAgent) Held() bool       { return true }
