package retirementplan_test

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/retirementplan"
	"github.com/giteatools/fleet-controller/controllers/workerregistration"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testworker"
)

// onHost registers the row under host id h (the process is a child of this test).
func onHost(h string) testworker.Option {
	return func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.Process.HostID = h }
}

// rowWatch records every change of one registration the API server reports.
type rowWatch struct {
	w       watch.Interface
	changes atomic.Int64 // status changes other than the heartbeat (controller writes)
	states  atomic.Int64 // ownershipState changes
	mods    atomic.Int64 // every modification
}

// watchRow watches registration ns/name from its creation on.
func watchRow(ns, name string) *rowWatch {
	GinkgoHelper()
	w, err := env.Client.Watch(ctx, &fleetv1alpha1.WorkerRegistrationList{}, client.InNamespace(ns),
		client.MatchingFields{"metadata.name": name})
	Expect(err).NotTo(HaveOccurred())
	rw := &rowWatch{w: w}
	DeferCleanup(w.Stop)
	go func() {
		var last *fleetv1alpha1.WorkerRegistration
		for ev := range w.ResultChan() {
			wr, ok := ev.Object.(*fleetv1alpha1.WorkerRegistration)
			if !ok {
				continue
			}
			if ev.Type == watch.Modified && last != nil {
				rw.mods.Add(1)
				if wr.Status.OwnershipState != last.Status.OwnershipState {
					rw.states.Add(1)
				}
				a, b := last.Status.DeepCopy(), wr.Status.DeepCopy()
				a.LastHeartbeatAt, b.LastHeartbeatAt = nil, nil
				if !equalJSON(a, b) {
					rw.changes.Add(1)
				}
			}
			last = wr
		}
	}()
	return rw
}

func equalJSON(a, b *fleetv1alpha1.WorkerRegistrationStatus) bool {
	if a.OwnershipState != b.OwnershipState || a.Phase != b.Phase || a.ObservedGeneration != b.ObservedGeneration || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return false
		}
	}
	return true
}

// counterSum sums a counter family of the process's metrics registry.
func counterSum(name string) float64 {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	sum := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// eventsAbout counts the Events regarding a registration.
func eventsAbout(wr *fleetv1alpha1.WorkerRegistration) int {
	GinkgoHelper()
	list := &eventsv1.EventList{}
	Expect(k8sClient.List(ctx, list, client.InNamespace(wr.Namespace))).To(Succeed())
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name == wr.Name && e.Regarding.Kind == "WorkerRegistration" {
			n++
		}
	}
	return n
}

func hostEntry(p *fleetv1alpha1.RetirementPlan, h string) *fleetv1alpha1.HostPlanStatus {
	for i := range p.Status.Hosts {
		if p.Status.Hosts[i].HostID == h {
			return &p.Status.Hosts[i]
		}
	}
	return nil
}

// reconcileUntil reconciles plan key by hand with r until done holds of what the API
// server then holds.
func reconcileUntil(r *planReconcilers, key client.ObjectKey, done func(*fleetv1alpha1.RetirementPlan) bool) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		g.Expect(err).NotTo(HaveOccurred())
		cur := &fleetv1alpha1.RetirementPlan{}
		g.Expect(k8sClient.Get(ctx, key, cur)).To(Succeed())
		g.Expect(done(cur)).To(BeTrue())
	}).Should(Succeed())
}

var _ = Describe("RetirementPlan across several hosts (multi-host)", func() {
	It("retires the dead rows of both agents' hosts with one plan and one approval, and keeps an agent-less host's rows", func() {
		ns := newNamespace()
		aDead, aLive := eligible(ns, "a-dead"), register(ns, "a-live", startChild(), 0, fleetv1alpha1.OwnershipLive)
		bDead := eligible(ns, "b-dead", onHost(hostB))
		bLive := register(ns, "b-live", startChild(), 0, fleetv1alpha1.OwnershipLive, onHost(hostB))
		// Host C has no agent: the fleet coordinator classifies its rows from the heartbeat
		// alone, and no plan can ever prove them gone.
		cDead := eligible(ns, "c-dead", onHost(hostC))
		Expect(meta.FindStatusCondition(get(cDead).Status.Conditions, fleetv1alpha1.ReadyCondition).Reason).To(Equal(fleetv1alpha1.ReasonNoHostAgent))

		p := createPlan(ns)
		Expect(p.Spec.HostID).To(BeEmpty())
		Expect(p.Status.CandidateWorkerIdentities).To(Equal([]string{"a-dead", "b-dead"}))
		Expect(reasonOf(p.Status.Preserved, aLive.Name)).To(Equal("worker_live"))
		Expect(reasonOf(p.Status.Preserved, bLive.Name)).To(Equal("worker_live"))
		Expect(reasonOf(p.Status.Preserved, cDead.Name)).To(Equal("host_binding_unproven"))
		for _, a := range p.Status.Preserved {
			if a.WorkerIdentity == cDead.Name {
				Expect(a.Detail).To(ContainSubstring(hostC))
				Expect(a.Detail).To(ContainSubstring("no agent"))
			}
		}
		Expect(p.Status.HostsWithoutAgent).To(Equal([]fleetv1alpha1.HostRowCount{{HostID: hostC, RowCount: 1}}))
		Expect(p.Status.HostsWithoutAgentCount).To(BeEquivalentTo(1))
		Expect(p.Status.AssessedCount).To(BeEquivalentTo(5))
		Expect(p.Status.PreservedReasonCounts).To(Equal(map[string]int32{"worker_live": 2, "host_binding_unproven": 1}))
		Expect(p.Status.Hosts).To(HaveLen(2))
		for _, h := range []string{testHostID, hostB} {
			e := hostEntry(p, h)
			Expect(e).NotTo(BeNil(), h)
			Expect(e.Plan).To(Equal(retirementplan.HostPlanName(p.Name, h)))
			Expect(e.Outcome).To(Equal("planned"))
			Expect(e.CandidateCount).To(BeEquivalentTo(1))
			child := &fleetv1alpha1.RetirementPlan{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: e.Plan}, child)).To(Succeed())
			Expect(child.Spec.HostID).To(Equal(h))
			Expect(metav1.GetControllerOf(child).UID).To(Equal(p.UID))
			Expect(child.Labels).To(HaveKeyWithValue(fleetv1alpha1.FleetPlanLabel, p.Name))
			Expect(child.Status.RegistryFingerprint).To(Equal(p.Status.RegistryFingerprint), "a host plan fingerprints the whole namespace")
			Expect(e.CandidateFingerprint).To(Equal(child.Status.CandidateFingerprint))
		}

		By("one approval of the fleet plan retires both hosts' dead rows")
		Expect(approve(gitops(), p)).To(Succeed())
		p = waitOutcome(p, "applied")
		Expect(p.Status.Retired).To(Equal([]string{"a-dead", "b-dead"}))
		Expect(p.Status.RetiredCount).To(BeEquivalentTo(2))
		expectApplied(p, metav1.ConditionTrue, fleetv1alpha1.ReasonApplySucceeded)
		expectReadiness(p, "True", "", fleetv1alpha1.ReasonApplySucceeded)
		Expect(*p.Status.Success).To(BeTrue())
		for _, wr := range []*fleetv1alpha1.WorkerRegistration{aDead, bDead} {
			got := get(wr)
			Expect(got.Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired), wr.Name)
			Expect(got.Status.RetiredBy).To(Equal(ns + "/" + p.Name))
		}
		for _, h := range []string{testHostID, hostB} {
			Expect(hostEntry(p, h).RetiredCount).To(BeEquivalentTo(1), h)
		}
		By("each host plan recorded the fleet approval narrowed to its own candidates, once, and applied with it")
		for h, dead := range map[string]string{testHostID: aDead.Name, hostB: bDead.Name} {
			child := hostPlan(p, h)
			a := child.Status.HostApproval
			Expect(a).NotTo(BeNil(), h)
			Expect(a.WorkerIdentities).To(Equal([]string{dead}), h)
			Expect(a.CandidateFingerprint).To(Equal(child.Status.CandidateFingerprint), h)
			Expect(a.RegistryFingerprint).To(Equal(p.Spec.Approval.RegistryFingerprint), h)
			Expect([]string{a.ApprovedBy, a.Binding}).To(Equal([]string{p.Spec.Approval.ApprovedBy, p.Spec.Approval.Binding}), h)
			c := meta.FindStatusCondition(child.Status.Conditions, fleetv1alpha1.ApprovedCondition)
			Expect([]string{string(c.Status), c.Reason}).To(Equal([]string{"True", fleetv1alpha1.ReasonApprovedThroughFleetPlan}), h)
		}
		expectActive(aLive, bLive, cDead)
	})

	It("applies a registry-bound fleet approval on both hosts when one host's apply lands before the other's fresh read", func() {
		// The host plans of one fleet plan apply concurrently; here, driven by hand, host
		// A's apply finishes before host B's starts, so B's fresh read sees A's retired
		// row. That retirement is the fleet plan's own and does not move the registry the
		// approval bound; anything else still would.
		ns := newNamespace()
		aDead := eligible(ns, "a-dead")
		bDead := eligible(ns, "b-dead", onHost(hostB))
		p := newPlanObj(ns, "direct-one-after-the-other")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		key := client.ObjectKeyFromObject(p)
		keyA := client.ObjectKey{Namespace: ns, Name: retirementplan.HostPlanName(p.Name, testHostID)}
		keyB := client.ObjectKey{Namespace: ns, Name: retirementplan.HostPlanName(p.Name, hostB)}
		reconcileUntil(mgrPlans, key, func(c *fleetv1alpha1.RetirementPlan) bool { return len(c.Status.Hosts) == 2 })
		reconcileUntil(mgrPlans, keyA, func(c *fleetv1alpha1.RetirementPlan) bool { return c.Status.Outcome == "planned" })
		reconcileUntil(plansB, keyB, func(c *fleetv1alpha1.RetirementPlan) bool { return c.Status.Outcome == "planned" })
		reconcileUntil(mgrPlans, key, func(c *fleetv1alpha1.RetirementPlan) bool { return c.Status.Outcome == "planned" })
		Expect(k8sClient.Get(ctx, key, p)).To(Succeed())
		Expect(p.Status.CandidateWorkerIdentities).To(Equal([]string{"a-dead", "b-dead"}))
		Expect(p.Status.RegistryFingerprint).NotTo(BeEmpty())

		Expect(approve(gitops(), p)).To(Succeed())
		Expect(k8sClient.Get(ctx, key, p)).To(Succeed())
		Expect(p.Spec.Approval.RegistryFingerprint).To(Equal(p.Status.RegistryFingerprint), "the approval binds the registry")
		reconcileUntil(mgrPlans, key, func(c *fleetv1alpha1.RetirementPlan) bool {
			a := meta.FindStatusCondition(c.Status.Conditions, fleetv1alpha1.ApprovedCondition)
			return a != nil && a.Status == metav1.ConditionTrue && a.ObservedGeneration == c.Generation
		})
		reconcileUntil(mgrPlans, keyA, func(c *fleetv1alpha1.RetirementPlan) bool { return c.Status.Outcome == "applied" })
		Expect(get(aDead).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired))
		Expect(get(bDead).Status.Phase).To(Equal(fleetv1alpha1.PhaseActive), "host B has not applied yet")

		reconcileUntil(plansB, keyB, func(c *fleetv1alpha1.RetirementPlan) bool {
			return c.Status.Outcome != "" && c.Status.Outcome != "planned"
		})
		child := &fleetv1alpha1.RetirementPlan{}
		Expect(k8sClient.Get(ctx, keyB, child)).To(Succeed())
		Expect(child.Status.Outcome).To(Equal("applied"), "host B's apply: %v", child.Status.Conditions)
		Expect(child.Status.Retired).To(Equal([]string{"b-dead"}))
		reconcileUntil(mgrPlans, key, func(c *fleetv1alpha1.RetirementPlan) bool { return c.Status.Outcome == "applied" })
		Expect(k8sClient.Get(ctx, key, p)).To(Succeed())
		Expect(p.Status.Retired).To(Equal([]string{"a-dead", "b-dead"}))
		Expect(*p.Status.Success).To(BeTrue())
		Expect(get(bDead).Status.RetiredBy).To(Equal(ns + "/" + p.Name))
	})

	It("gives the same answer whichever agent fans out and aggregates the plan", func() {
		ns := newNamespace()
		eligible(ns, "a-dead")
		register(ns, "a-live", startChild(), 0, fleetv1alpha1.OwnershipLive)
		eligible(ns, "b-dead", onHost(hostB))
		register(ns, "b-fresh", deadChild(), 0, fleetv1alpha1.OwnershipStale, onHost(hostB))
		eligible(ns, "c-dead", onHost(hostC))

		// Each plan is driven by hand: the first by host A's manager, the second by host
		// B's; each agent plans only its own host's host plan.
		drive := func(first, second *planReconcilers, firstHost, secondHost, name string) *fleetv1alpha1.RetirementPlan {
			GinkgoHelper()
			p := newPlanObj(ns, name)
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			key := client.ObjectKeyFromObject(p)
			reconcileUntil(first, key, func(c *fleetv1alpha1.RetirementPlan) bool {
				e := hostEntry(c, firstHost)
				return e != nil && e.Outcome == "planned"
			})
			Expect(k8sClient.Get(ctx, key, p)).To(Succeed())
			Expect(p.Status.Outcome).To(BeEmpty(), "the other host's plan is not planned yet")
			expectReadiness(p, "False", "", fleetv1alpha1.ReasonWaitingForHostPlans)
			childKey := client.ObjectKey{Namespace: ns, Name: retirementplan.HostPlanName(name, secondHost)}
			reconcileUntil(first, childKey, func(c *fleetv1alpha1.RetirementPlan) bool { return c.Status.Outcome == "" })
			reconcileUntil(second, childKey, func(c *fleetv1alpha1.RetirementPlan) bool { return c.Status.Outcome == "planned" })
			reconcileUntil(second, key, func(c *fleetv1alpha1.RetirementPlan) bool { return c.Status.Outcome == "planned" })
			Expect(k8sClient.Get(ctx, key, p)).To(Succeed())
			return p
		}
		viaA := drive(mgrPlans, plansB, testHostID, hostB, "direct-via-a")
		viaB := drive(plansB, mgrPlans, hostB, testHostID, "direct-via-b")

		type answer struct {
			Registry, Candidate string
			Identities          []string
			Candidates          []string
			Preserved           []string
			Counts              [3]int32
			Reasons             map[string]int32
			WithoutAgent        []fleetv1alpha1.HostRowCount
			Hosts               []string
		}
		answerOf := func(p *fleetv1alpha1.RetirementPlan) answer {
			a := answer{Registry: p.Status.RegistryFingerprint, Candidate: p.Status.CandidateFingerprint,
				Identities: p.Status.CandidateWorkerIdentities, Reasons: p.Status.PreservedReasonCounts, WithoutAgent: p.Status.HostsWithoutAgent,
				Counts: [3]int32{p.Status.AssessedCount, p.Status.CandidateCount, p.Status.PreservedCount}}
			for _, c := range p.Status.Candidates {
				a.Candidates = append(a.Candidates, c.WorkerIdentity+"="+c.ReasonCode)
			}
			for _, c := range p.Status.Preserved {
				a.Preserved = append(a.Preserved, c.WorkerIdentity+"="+c.ReasonCode+": "+c.Detail)
			}
			for _, h := range p.Status.Hosts {
				a.Hosts = append(a.Hosts, h.HostID+"="+h.CandidateFingerprint)
			}
			return a
		}
		Expect(answerOf(viaB)).To(Equal(answerOf(viaA)))
		Expect(viaA.Status.CandidateWorkerIdentities).To(Equal([]string{"a-dead", "b-dead"}))
		Expect(reasonOf(viaA.Status.Preserved, "b-fresh")).To(Equal("heartbeat_not_expired"))
		Expect(reasonOf(viaA.Status.Preserved, "c-dead")).To(Equal("host_binding_unproven"))
	})

	It("changes a pid-gone, heartbeat-fresh row's ownership state once, while both agents run, and a heartbeat storm writes nothing more", func() {
		ns := newNamespace()
		rows := map[string]*rowWatch{}
		var wrs []*fleetv1alpha1.WorkerRegistration
		for _, h := range []string{testHostID, hostB} {
			name := "fresh-" + map[string]string{testHostID: "a", hostB: "b"}[h]
			rows[name] = watchRow(ns, name)
			wrs = append(wrs, register(ns, name, deadChild(), 0, fleetv1alpha1.OwnershipStale, onHost(h)))
		}
		live := register(ns, "live-b", startChild(), 0, fleetv1alpha1.OwnershipLive, onHost(hostB))
		rows["live-b"] = watchRow(ns, "live-b") // from now on: no controller write is due
		wrs = append(wrs, live)

		// Both agents look at every row (each enqueues every change); only the row's own
		// host's agent may write it. Over a few seconds nothing moves.
		Consistently(func(g Gomega) {
			for name, rw := range rows {
				g.Expect(rw.states.Load()).To(BeNumerically("<=", 1), "%s changed ownership state more than once", name)
			}
		}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
		for _, wr := range wrs[:2] {
			Expect(get(wr).Status.OwnershipState).To(Equal(fleetv1alpha1.OwnershipStale))
			Expect(rows[wr.Name].states.Load()).To(BeEquivalentTo(1), "the row went from unset to stale once")
		}

		By("a heartbeat storm: every renewal is the worker's one write, and nothing else")
		before := map[string]int64{}
		beforeEvents := map[string]int{}
		for _, wr := range wrs {
			before[wr.Name] = rows[wr.Name].changes.Load()
			beforeEvents[wr.Name] = eventsAbout(wr)
		}
		writesBefore := counterSum("fleet_registration_status_writes_total")
		reconcilesBefore := counterSum("controller_runtime_reconcile_total")
		const beats = 20
		for i := 0; i < beats; i++ {
			for _, wr := range wrs {
				heartbeat(wr, 0)
			}
		}
		// Every renewal reached both managers' reconcilers (they looked, and wrote nothing).
		Eventually(func() float64 { return counterSum("controller_runtime_reconcile_total") - reconcilesBefore }).
			Should(BeNumerically(">=", beats*len(wrs)))
		Consistently(func(g Gomega) {
			for _, wr := range wrs {
				g.Expect(rows[wr.Name].changes.Load()).To(Equal(before[wr.Name]), "%s: a controller wrote during the storm", wr.Name)
			}
		}, 2*time.Second, 100*time.Millisecond).Should(Succeed())
		// (The status-write counter is process-wide, so other specs' rows may move it: the
		// per-row watch above is the assertion; the counter is only printed.)
		for _, wr := range wrs {
			Expect(eventsAbout(wr)).To(Equal(beforeEvents[wr.Name]), "%s: an event during the storm", wr.Name)
			Expect(rows[wr.Name].mods.Load()).To(BeNumerically(">=", beats), "the storm's renewals are there")
		}
		GinkgoWriter.Printf("heartbeat storm: %d renewals of %d rows; controller status writes %v, ownership changes a=%d b=%d live=%d\n",
			beats*len(wrs), len(wrs), counterSum("fleet_registration_status_writes_total")-writesBefore,
			rows["fresh-a"].states.Load(), rows["fresh-b"].states.Load(), rows["live-b"].states.Load())
		Expect(get(live).Status.OwnershipState).To(Equal(fleetv1alpha1.OwnershipLive))
	})

	It("elects one of two agents with the same host id; the other writes nothing, no row and no plan, until it takes over", func() {
		const hostD = "fleet-test-host-d"
		facts := hostBFacts
		facts.HostID = hostD
		type agentMgr struct {
			agent  *hostagent.Agent
			writes *atomic.Int64
			stop   context.CancelFunc
		}
		start := func(suffix string) agentMgr {
			GinkgoHelper()
			mctx, stop := context.WithCancel(ctx)
			DeferCleanup(stop)
			mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
			Expect(err).NotTo(HaveOccurred())
			cs, err := kubernetes.NewForConfig(env.Config)
			Expect(err).NotTo(HaveOccurred())
			agent := hostagent.NewHost(cs, agentNamespace, hostD, hostagent.NewInstanceID(), agentTimings)
			Expect(mgr.Add(agent)).To(Succeed())
			writes := &atomic.Int64{}
			counting := hostWrites(mgr.GetClient(), writes, hostD)
			Expect((&workerregistration.Reconciler{
				Client: counting, Prober: &liveness.ProcProber{Facts: facts}, Clock: clock.RealClock{}, Recorder: testenv.Discard,
				Agent: agent, AgentNamespace: agentNamespace,
			}).SetupWithManagerNamed(mgr, "workerregistration-d"+suffix)).To(Succeed())
			plans := newPlanReconciler(counting, mgr.GetAPIReader(), &liveness.ProcProber{Facts: facts})
			plans.Host = retirement.Host{HostID: hostD, BootID: facts.BootID, BootTime: facts.BootTime}
			plans.Agent = agent
			notDirect := predicate.NewPredicateFuncs(func(o client.Object) bool { return !strings.HasPrefix(o.GetName(), "direct-") })
			Expect(plans.SetupWithManagerNamed(mgr, "retirementplan-d"+suffix, notDirect)).To(Succeed())
			go func() {
				defer GinkgoRecover()
				Expect(mgr.Start(mctx)).To(Succeed())
			}()
			return agentMgr{agent: agent, writes: writes, stop: stop}
		}
		one, two := start("1"), start("2")
		Eventually(func() bool { return one.agent.Held() || two.agent.Held() }).Should(BeTrue())
		Consistently(func() bool { return one.agent.Held() && two.agent.Held() }, 2*time.Second, 50*time.Millisecond).Should(BeFalse(),
			"never both")
		holder, standby := one, two
		if two.agent.Held() {
			holder, standby = two, one
		}

		ns := newNamespace()
		c := startChild()
		wr := register(ns, "d-row", c, hour, fleetv1alpha1.OwnershipStale, onHost(hostD)) // alive, heartbeat lapsed
		Expect(holder.writes.Load()).To(BeNumerically(">=", 1))
		heartbeat(wr, 0)
		Eventually(func() string { return get(wr).Status.OwnershipState }).Should(Equal(fleetv1alpha1.OwnershipLive))
		dead := eligible(ns, "d-dead", onHost(hostD))
		p := createPlan(ns) // every manager may drive the fleet plan; only the holder plans host D's
		Expect(p.Status.CandidateWorkerIdentities).To(Equal([]string{dead.Name}))
		Expect(hostEntry(p, hostD)).NotTo(BeNil())
		Expect(hostEntry(p, hostD).Agent).To(Equal(holder.agent.Identity))
		Expect(standby.writes.Load()).To(BeZero(), "the standby agent wrote a row or a plan of its host")

		By("the holder stops: the standby takes over, and is the one that writes")
		holder.stop()
		Eventually(standby.agent.Held, 15*time.Second).Should(BeTrue())
		heldWrites := holder.writes.Load()
		heartbeat(wr, hour) // the heartbeat lapses again: only an agent can see that
		Eventually(func() string { return get(wr).Status.OwnershipState }).Should(Equal(fleetv1alpha1.OwnershipStale))
		Expect(standby.writes.Load()).To(BeNumerically(">=", 1))
		Expect(holder.writes.Load()).To(Equal(heldWrites), "a stopped agent writes nothing")
	})
})

// hostWrites counts the writes of host's objects: updates of its registrations and of its
// host plans, and their status. (Creating a host plan is the fleet plan's work, which
// any agent may do.)
func hostWrites(c client.Client, n *atomic.Int64, host string) writeCounter {
	return writeCounter{Client: c, n: n, counts: func(verb string, obj client.Object) bool {
		if verb == verbCreate {
			return false
		}
		switch o := obj.(type) {
		case *fleetv1alpha1.WorkerRegistration:
			return o.Spec.Process.HostID == host
		case *fleetv1alpha1.RetirementPlan:
			return o.Spec.HostID == host
		}
		return false
	}}
}

var _ = Describe("RetirementPlan fan-out view", func() {
	It("plans a host plan at the registrations its fleet plan's fan-out read, on another agent, while rows change", func() {
		ns := newNamespace()
		dead := eligible(ns, "dead-1")
		p := newPlanObj(ns, "direct-view")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())

		By("the fleet coordinator fans out")
		coordinator := newPlanReconciler(k8sClient, k8sClient, prober)
		_, err := coordinator.fleet.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).NotTo(HaveOccurred())
		p = getPlan(p)
		Expect(p.Status.RegistryResourceVersion).NotTo(BeEmpty())
		hp := hostPlanOf(p)
		Expect(hp.Status.Outcome).To(BeEmpty())

		By("another row dies after the fan-out")
		late := eligible(ns, "dead-late")

		By("host A's agent, another process that never saw the fan-out's read, plans the host plan")
		agentA := newPlanReconciler(k8sClient, k8sClient, prober)
		_, err = agentA.HostPlanReconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hp)})
		Expect(err).NotTo(HaveOccurred())
		hp = getPlan(hp)
		Expect(hp.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned))
		Expect(hp.Status.RegistryResourceVersion).To(Equal(p.Status.RegistryResourceVersion))
		Expect(hp.Status.RegistryFingerprint).To(Equal(p.Status.RegistryFingerprint), "one view of the namespace")
		Expect(hp.Status.CandidateWorkerIdentities).To(Equal([]string{dead.Name}), "%s came after the fan-out", late.Name)
		Expect(hp.Status.AssessedCount).To(BeEquivalentTo(1))

		By("the fleet plan aggregates it, and an apply still reads the newest")
		p = reconcilePlan(coordinator, p)
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned))
		Expect(p.Status.CandidateWorkerIdentities).To(Equal([]string{dead.Name}))
		Expect(approve(gitops(), p)).To(Succeed())
		p = reconcilePlan(coordinator, p)
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomeRegistryRevisionMoved), "the rows that came after the plan move the registry")
		expectActive(dead, late)
	})
})
