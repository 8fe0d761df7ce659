package retirementplan_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/workerregistration"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

// hostManager is a manager that is the agent of one more host: its host election, its
// WorkerRegistration reconciler and, unless leaseOnly, its RetirementPlan reconciler.
type hostManager struct {
	agent *hostagent.Agent
	stop  context.CancelFunc
	done  chan struct{}
}

// startHostManager starts the agent of hostID (the children of this test registered
// under hostID are its processes). A leaseOnly manager holds the host's Lease and runs
// nothing else: an agent that never gets to plan.
func startHostManager(hostID, name string, leaseOnly bool) *hostManager {
	GinkgoHelper()
	facts := hostBFacts
	facts.HostID = hostID
	mctx, stop := context.WithCancel(ctx)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(env.Config)
	Expect(err).NotTo(HaveOccurred())
	agent := hostagent.NewHost(cs, agentNamespace, hostID, hostagent.NewInstanceID(), agentTimings)
	Expect(mgr.Add(agent)).To(Succeed())
	if !leaseOnly {
		p := &liveness.ProcProber{Facts: facts}
		Expect((&workerregistration.Reconciler{
			Client: mgr.GetClient(), Prober: p, Clock: clock.RealClock{}, Recorder: testenv.Discard,
			Agent: agent, AgentNamespace: agentNamespace,
		}).SetupWithManagerNamed(mgr, "workerregistration-"+name)).To(Succeed())
		plans := newPlanReconciler(mgr.GetClient(), mgr.GetAPIReader(), p)
		plans.Host = retirement.Host{HostID: hostID, BootID: facts.BootID, BootTime: facts.BootTime}
		plans.Agent = agent
		notDirect := predicate.NewPredicateFuncs(func(o client.Object) bool { return !strings.HasPrefix(o.GetName(), "direct-") })
		Expect(plans.SetupWithManagerNamed(mgr, "retirementplan-"+name, notDirect)).To(Succeed())
	}
	hm := &hostManager{agent: agent, stop: stop, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(hm.done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	DeferCleanup(hm.Stop)
	Eventually(agent.Held).Should(BeTrue(), "the agent of %s holds its Lease", hostID)
	return hm
}

// Stop stops the manager and waits until it has released its Lease.
func (hm *hostManager) Stop() {
	hm.stop()
	<-hm.done
}

// planOrPageWrites counts every write of a plan or a page (create, update, patch, status).
func planOrPageWrites(c client.Client, n *atomic.Int64) writeCounter {
	return writeCounter{Client: c, n: n, counts: func(_ string, obj client.Object) bool {
		switch obj.(type) {
		case *fleetv1alpha1.RetirementPlan, *fleetv1alpha1.RetirementPlanPage:
			return true
		}
		return false
	}}
}

var _ = Describe("RetirementPlan when a host's agent goes away after the fan-out (multi-host)", func() {
	It("closes the host plans of lost hosts without writing their rows, and the fleet report is final and no success", func() {
		const hostE, hostF = "fleet-test-host-e", "fleet-test-host-f"
		e := startHostManager(hostE, "e", false)
		f := startHostManager(hostF, "f", true) // holds host F's Lease, never plans
		ns := newNamespace()
		aDead := eligible(ns, "a-dead")
		eDead := eligible(ns, "e-dead", onHost(hostE))
		// Host F's agent never classifies its rows: nobody writes their ownership state.
		fDead := fleet.Registration(ns, "f-dead", deadChild(), onHost(hostF))
		Expect(k8sClient.Create(ctx, fDead)).To(Succeed())
		heartbeat(fDead, hour)

		p := newPlanObj(ns, testenv.Uniq("lost"))
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		By("the fan-out gives hosts A, E and F a host plan; host F's agent never plans it")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.Hosts).To(HaveLen(3))
			g.Expect(hostEntry(p, hostE).Outcome).To(Equal("planned"))
		}).Should(Succeed())
		Expect(p.Status.Outcome).To(BeEmpty(), "host F's host plan is not planned")

		By("host F's agent stops: once its Lease lapsed for the grace, its rows are preserved and the fleet plan is planned")
		f.Stop()
		p = waitOutcomeWithin(p, "planned", 60*time.Second)
		Expect(p.Status.CandidateWorkerIdentities).To(Equal([]string{aDead.Name, eDead.Name}))
		Expect(reasonOf(p.Status.Preserved, fDead.Name)).To(Equal("host_binding_unproven"))
		Expect(detailOf(p.Status.Preserved, fDead.Name)).To(ContainSubstring(hostF))
		Expect(p.Status.HostsWithoutAgent).To(ContainElement(fleetv1alpha1.HostRowCount{HostID: hostF, RowCount: 1}))
		fPlan := hostPlan(p, hostF)
		Expect(meta.IsStatusConditionTrue(fPlan.Status.Conditions, "HostAgentLost")).To(BeTrue())
		Expect(fPlan.Status.CandidateCount).To(BeZero())
		By("the coordinator pages the lost host's rows, and the fleet plan counts its pages")
		Eventually(func(g Gomega) {
			fPlan = hostPlan(p, hostF)
			g.Expect(pagesReady(fPlan)).To(Equal([]string{"True", fleetv1alpha1.ReasonPagesWritten}))
			g.Expect(fPlan.Status.Pages).NotTo(BeNil())
			g.Expect(fPlan.Status.Pages.Preserved).To(Equal(int32(1)))
		}, 30*time.Second).Should(Succeed())
		var fPages fleetv1alpha1.RetirementPlanPageList
		Expect(k8sClient.List(ctx, &fPages, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.PlanLabel: fPlan.Name})).To(Succeed())
		Expect(fPages.Items).To(HaveLen(1))
		Expect(metav1.IsControlledBy(&fPages.Items[0], fPlan)).To(BeTrue())
		fRows := apiconv.PageVerdicts(&fPages.Items[0])
		Expect(fRows).To(HaveLen(1))
		Expect([]string{fRows[0].WorkerIdentity, fRows[0].ReasonCode}).To(Equal([]string{fDead.Name, "host_binding_unproven"}))

		By("host E's agent stops after planning; the approval lands: host A retires, host E writes nothing")
		e.Stop()
		// Host F's rows were classified once its agent was gone, which moved the registry:
		// the approval binds the candidate set.
		Expect(approveBound(gitops(), p, fleetv1alpha1.ApprovalBindingCandidateSet)).To(Succeed())
		p = waitOutcomeWithin(p, "applied", 60*time.Second)
		Expect(p.Status.Retired).To(Equal([]string{aDead.Name}))
		Expect(*p.Status.Success).To(BeFalse(), "an apply that could not run on host E is no success")
		Expect(p.Status.ApplyComplete).NotTo(BeNil())
		Expect(*p.Status.ApplyComplete).To(BeFalse())
		Expect(reasonOf(p.Status.ApplyPreserved, eDead.Name)).To(Equal("host_binding_unproven"))
		Expect(p.Status.HostsWithoutAgent).To(ContainElement(fleetv1alpha1.HostRowCount{HostID: hostE, RowCount: 1}))
		ePlan := hostPlan(p, hostE)
		Expect(ePlan.Status.Outcome).To(Equal("transaction_failed"))
		Expect(ePlan.Status.MutationPerformed).To(BeFalse())
		Expect(get(aDead).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired))
		expectActive(eDead, fDead)
		Eventually(func() []string { return pagesReady(getPlan(p)) }).Should(Equal([]string{"True", fleetv1alpha1.ReasonPagesWritten}),
			"every host's pages were written before its agent went, or by the coordinator")
	})

	It("lets a takeover complete a lost host's apply that had recorded its intent, truthfully", func() {
		const hostG = "fleet-test-host-g"
		g := startHostManager(hostG, "g", false)
		ns := newNamespace()
		gDead := eligible(ns, "g-dead", onHost(hostG))
		p := createPlan(ns)
		Expect(p.Status.CandidateWorkerIdentities).To(Equal([]string{gDead.Name}))
		gPlan := hostPlan(p, hostG)
		g.Stop()

		By("an intent recorded by host G's agent, which then vanished, before any row write")
		// Its last renewal is 116 s old; the suite's takeover timeout is the default 60 s,
		// and the stand-in of a lost host waits twice that (the host's own agent would
		// resume first), so the hold is still fresh for it when the approval lands and
		// lapses moments later.
		renewed := time.Now().Add(-retirement.StandInTakeoverTimeout(0) + 4*time.Second)
		Eventually(func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(gPlan), gPlan); err != nil {
				return err
			}
			gPlan.Status.ApplyProgress = &fleetv1alpha1.ApplyProgress{State: retirement.ApplyInProgress, Applier: "agent-gone",
				StartedAt: metav1.NewTime(renewed), RenewedAt: metav1.NewMicroTime(renewed), IntendedCount: 1,
				IntendedRows: []fleetv1alpha1.IntendedRow{{Name: gDead.Name, ResourceVersion: get(gDead).ResourceVersion,
					Fingerprint: retirement.RowFingerprint(apiconv.Row(get(gDead)))}}}
			return k8sClient.Status().Update(ctx, gPlan)
		}).Should(Succeed())
		Expect(approveBound(gitops(), p, fleetv1alpha1.ApprovalBindingCandidateSet)).To(Succeed())
		// The host is lost, but its host plan is not closed the lost way: once the hold
		// lapses a takeover completes the report from the rows (none retired, so nothing
		// was applied: transaction_failed).
		p = waitOutcomeWithin(p, "transaction_failed", 60*time.Second)
		gPlan = hostPlan(p, hostG)
		Expect(gPlan.Status.ApplyProgress.State).To(Equal(retirement.ApplyFinished))
		Expect(gPlan.Status.ApplyProgress.TakenOverFrom).To(Equal("agent-gone"))
		Expect(gPlan.Status.ApplyProgress.Takeover).To(Equal(fleetv1alpha1.TakeoverCompleted), "the stand-in cannot probe host G's processes, so it does not resume")
		Expect(gPlan.Status.Message).To(ContainSubstring("not resumed"))
		Expect(meta.FindStatusCondition(gPlan.Status.Conditions, "HostAgentLost")).To(BeNil(), "an apply in progress is completed, not closed")
		Expect(meta.FindStatusCondition(gPlan.Status.Conditions, fleetv1alpha1.AppliedCondition).Reason).To(Equal(retirement.ConditionApplyInterrupted))
		Expect(p.Status.RetiredCount).To(BeZero())
		Expect(*p.Status.Success).To(BeFalse())
		expectActive(gDead)
	})
})

var _ = Describe("RetirementPlan fan-out with two coordinators at once (multi-host)", func() {
	It("has one writer: only the fleet coordinator's holder writes the fleet plan, its pages and host plans", func() {
		ns := newNamespace()
		// A namespace of Leases of their own: the two reconcilers below elect their own
		// fleet coordinator there, and host A's agent holds host A's Lease there.
		leases := testenv.Uniq("fleet-coord")
		cs, err := kubernetes.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
		type coord struct {
			r      *planReconcilers
			agent  *hostagent.Agent
			writes *atomic.Int64
		}
		cctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		mk := func() coord {
			n := &atomic.Int64{}
			agent := hostagent.NewCoordinator(cs, leases, hostagent.NewInstanceID(), agentTimings)
			go func() { _ = agent.Start(cctx) }()
			r := newPlanReconciler(planOrPageWrites(k8sClient, n), k8sClient, prober)
			r.fleet.AgentNamespace, r.fleet.Coordinator = leases, agent
			return coord{r: r, agent: agent, writes: n}
		}
		one, two := mk(), mk()
		// Host A's Lease in that namespace, so the fan-out finds host A with an agent.
		hostA := hostagent.NewHost(cs, leases, host.HostID, hostagent.NewInstanceID(), agentTimings)
		go func() { _ = hostA.Start(cctx) }()
		Eventually(hostA.Held).Should(BeTrue())
		Eventually(func() bool { return one.agent.Held() || two.agent.Held() }).Should(BeTrue())
		holder, standby := one, two
		if two.agent.Held() {
			holder, standby = two, one
		}
		Expect(standby.agent.Held()).To(BeFalse())
		// Only the holder is host A's agent; the standby is the agent of a host without rows,
		// so any write it made could only be the fleet plan's work.
		standby.r.Agent = heldAgent{host: "fleet-test-host-none"}

		var dead []string
		for i := range 6 {
			dead = append(dead, eligible(ns, "dead-"+string(rune('a'+i))).Name)
		}
		register(ns, "live", startChild(), 0, fleetv1alpha1.OwnershipLive)
		eligible(ns, "c-dead", onHost(hostC))
		p := newPlanObj(ns, testenv.Uniq("direct-coord"))
		Expect(k8sClient.Create(ctx, p)).To(Succeed())

		By("both reconcile the same fleet plan at once, over and over, until it is applied")
		approved := atomic.Bool{}
		var wg sync.WaitGroup
		run := func(c coord) {
			defer GinkgoRecover()
			defer wg.Done()
			for range 200 {
				_, _ = c.r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
				cur := &fleetv1alpha1.RetirementPlan{}
				if k8sClient.Get(ctx, client.ObjectKeyFromObject(p), cur) == nil {
					if cur.Status.Outcome == "planned" && approved.CompareAndSwap(false, true) {
						Expect(approve(gitops(), cur)).To(Succeed())
					}
					if cur.Status.Outcome == "applied" {
						return
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		wg.Add(2)
		go run(one)
		go run(two)
		wg.Wait()
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		Expect(p.Status.Outcome).To(Equal("applied"))
		Expect(p.Status.Retired).To(Equal(dead))
		Expect(*p.Status.Success).To(BeTrue())
		Expect(reasonOf(p.Status.Preserved, "c-dead")).To(Equal("host_binding_unproven"))
		Expect(holder.writes.Load()).To(BeNumerically(">", 0))
		Expect(standby.writes.Load()).To(BeZero(), "the standby coordinator wrote a plan or a page")
		children := &fleetv1alpha1.RetirementPlanList{}
		Expect(k8sClient.List(ctx, children, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.FleetPlanLabel: p.Name})).To(Succeed())
		Expect(children.Items).To(HaveLen(1))
		lease := &coordinationv1.Lease{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: leases, Name: hostagent.CoordinatorLeaseName}, lease)).To(Succeed())
		Expect(*lease.Spec.HolderIdentity).To(Equal(holder.agent.Identity))
	})
})

// waitOutcomeWithin waits for the plan's outcome, for up to d.
func waitOutcomeWithin(p *fleetv1alpha1.RetirementPlan, outcome string, d time.Duration) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		g.Expect(p.Status.Outcome).To(Equal(outcome))
	}, d).Should(Succeed())
	return p
}

// hostPlan reads the fleet plan's host plan of host h.
func hostPlan(p *fleetv1alpha1.RetirementPlan, h string) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	e := hostEntry(p, h)
	Expect(e).NotTo(BeNil(), h)
	c := &fleetv1alpha1.RetirementPlan{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: e.Plan}, c)).To(Succeed())
	return c
}

func detailOf(as []fleetv1alpha1.WorkerAssessment, name string) string {
	for _, a := range as {
		if a.WorkerIdentity == name {
			return a.Detail
		}
	}
	return ""
}
