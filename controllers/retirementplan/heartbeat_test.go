package retirementplan_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/workerregistration"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/managercache"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testworker"
)

// requestCounter counts the API requests made through a rest config: every request but
// watches (long-running streams, opened once) and the coordination Leases' own traffic
// (the agents' renewals, which go on whatever the rows do). It records what it counted.
type requestCounter struct {
	base http.RoundTripper
	n    *atomic.Int64
	mu   *sync.Mutex
	seen *[]string
}

func (c requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") != "true" && !strings.Contains(req.URL.Path, "/leases") {
		c.n.Add(1)
		c.mu.Lock()
		*c.seen = append(*c.seen, req.Method+" "+req.URL.Path)
		c.mu.Unlock()
	}
	return c.base.RoundTrip(req)
}

// countedConfig is a copy of the suite's rest config whose requests are counted.
func countedConfig() (*rest.Config, *atomic.Int64, func() []string) {
	n, mu, seen := &atomic.Int64{}, &sync.Mutex{}, &[]string{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return requestCounter{base: rt, n: n, mu: mu, seen: seen}
	})
	return cfg, n, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), *seen...) }
}

var _ = Describe("Cheap heartbeats", func() {
	It("costs the worker one write, and the manager no request: no status write, no plan recomputed", func() {
		const hostH = "fleet-test-host-heartbeat"
		facts := hostBFacts
		facts.HostID = hostH

		By("a manager of its own host, with the shipped cache options, whose every request is counted")
		// It watches its own namespace (and the agents'), as a manager given --namespaces
		// does: plans other specs left requeued elsewhere are not its requests.
		ns := newNamespace()
		cfg, managerRequests, managerSeen := countedConfig()
		mctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme, Cache: managercache.Options([]string{ns, agentNamespace}),
			Metrics: metricsserver.Options{BindAddress: "0"}})
		Expect(err).NotTo(HaveOccurred())
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		agent := hostagent.NewHost(cs, agentNamespace, hostH, hostagent.NewInstanceID(), agentTimings)
		Expect(mgr.Add(agent)).To(Succeed())
		p := &liveness.ProcProber{Facts: facts}
		Expect((&workerregistration.Reconciler{
			Client: mgr.GetClient(), Prober: p, Clock: clock.RealClock{}, Recorder: mgr.GetEventRecorder("workerregistration-heartbeat"),
			Agent: agent, AgentNamespace: agentNamespace,
		}).SetupWithManagerNamed(mgr, "workerregistration-heartbeat")).To(Succeed())
		plans := newPlanReconciler(mgr.GetClient(), mgr.GetAPIReader(), p)
		plans.Host = retirement.Host{HostID: hostH, BootID: facts.BootID, BootTime: facts.BootTime}
		plans.Agent = agent
		plans.Recorder = mgr.GetEventRecorder("retirementplan-heartbeat")
		Expect(plans.SetupWithManagerNamed(mgr, "retirementplan-heartbeat")).To(Succeed())
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
		Eventually(agent.Held).Should(BeTrue())

		By("live workers on that host next to a dead row, and a planned plan over them")
		var live []*fleetv1alpha1.WorkerRegistration
		rows := map[string]*rowWatch{}
		for i := range 5 {
			name := fmt.Sprintf("live-%d", i)
			live = append(live, register(ns, name, startChild(), 0, fleetv1alpha1.OwnershipLive, onHost(hostH), withTTL(3600)))
			rows[name] = watchRow(ns, name)
		}
		eligible(ns, "dead", onHost(hostH))
		plan := createPlan(ns)
		Expect(plan.Status.CandidateWorkerIdentities).To(Equal([]string{"dead"}))

		By("waiting until the manager is quiet")
		Eventually(func() int64 {
			before := managerRequests.Load()
			time.Sleep(time.Second)
			return managerRequests.Load() - before
		}, time.Minute, 0).Should(BeZero())
		beforeManager := managerRequests.Load()
		beforeChanges, beforeMods := map[string]int64{}, map[string]int64{}
		for name, rw := range rows {
			beforeChanges[name], beforeMods[name] = rw.changes.Load(), rw.mods.Load()
		}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(plan), plan)).To(Succeed())
		planVersion := plan.ResourceVersion

		By("a storm of heartbeats, each written as the worker's CLI writes it")
		workerCfg, _, workerSeen := countedConfig()
		worker, err := client.New(workerCfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		const beats = 10
		last := map[string]time.Time{}
		for b := range beats {
			for _, wr := range live {
				last[wr.Name] = renewLikeTheCLI(worker, wr, b)
			}
		}
		writes, reads := 0, 0
		for _, r := range workerSeen() {
			switch {
			case !strings.Contains(r, "/workerregistrations/"): // the client's discovery, once
			case strings.HasPrefix(r, http.MethodGet+" "):
				reads++
			default:
				writes++
			}
		}
		Expect(writes).To(Equal(beats*len(live)), "one write per heartbeat: %v", workerSeen())
		Expect(reads).To(Equal(beats*len(live)), "and the CLI's one read before it: %v", workerSeen())

		By("the manager has seen every heartbeat")
		Eventually(func(g Gomega) {
			for _, wr := range live {
				cached := &fleetv1alpha1.WorkerRegistration{}
				g.Expect(mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(wr), cached)).To(Succeed())
				g.Expect(cached.Status.LastHeartbeatAt.Time).To(BeTemporally("==", last[wr.Name]))
			}
		}).Should(Succeed())

		By("and made no request for them: no status write, no read of the registry, no plan recomputed")
		Consistently(func() int64 { return managerRequests.Load() - beforeManager }, 3*time.Second, 100*time.Millisecond).
			Should(BeZero(), func() string { return fmt.Sprintf("the manager's requests: %v", managerSeen()[beforeManager:]) })
		for name, rw := range rows {
			Eventually(func() int64 { return rw.mods.Load() - beforeMods[name] }).Should(BeEquivalentTo(beats), "%s: one modification per heartbeat", name)
			Expect(rw.changes.Load()-beforeChanges[name]).To(BeZero(), "%s: a controller wrote its status during the storm", name)
		}
		after := &fleetv1alpha1.RetirementPlan{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(plan), after)).To(Succeed())
		Expect(after.ResourceVersion).To(Equal(planVersion), "the plan was not written again")
		GinkgoWriter.Printf("heartbeats: %d renewals of %d rows; the worker's requests: %d writes, %d reads; the manager's requests during the storm: %d\n",
			beats*len(live), len(live), writes, reads, managerRequests.Load()-beforeManager)
	})
})

// withTTL sets the heartbeat TTL, in seconds.
func withTTL(seconds int64) testworker.Option {
	return func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.HeartbeatTTLSeconds = seconds }
}

// renewLikeTheCLI renews wr's heartbeat the way `kubectl fleet heartbeat` does (a read,
// then one status patch guarded by the resourceVersion read), b seconds after now so
// every renewal moves the stamp, and returns the stamp written.
func renewLikeTheCLI(c client.Client, wr *fleetv1alpha1.WorkerRegistration, b int) time.Time {
	GinkgoHelper()
	cur := &fleetv1alpha1.WorkerRegistration{}
	Expect(c.Get(ctx, client.ObjectKeyFromObject(wr), cur)).To(Succeed())
	base := cur.DeepCopy()
	at := metav1.NewTime(time.Now().Truncate(time.Second).Add(time.Duration(b+1) * time.Second))
	cur.Status.LastHeartbeatAt = &at
	Expect(c.Status().Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	return at.Time
}
