package retirementplan_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/retirementplan"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

// writeLog records the rows a reconciler wrote (AfterWrite) and reached (BeforeWrite).
type writeLog struct {
	mu      sync.Mutex
	reached []string
	written []string
}

func (l *writeLog) reach(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reached = append(l.reached, name)
}

func (l *writeLog) write(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.written = append(l.written, name)
	return len(l.written)
}

func (l *writeLog) Written() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.written...)
}

func (l *writeLog) Reached() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reached...)
}

// count is how many events of kind/reason c was given.
func (c *countingRecorder) count(kind, reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[kind+"/"+reason]
}

// counterValue reads a counter of the controller's metrics registry.
func counterValue(name string, labels map[string]string) float64 {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// restartRows is how many eligible rows each spec here approves.
const restartRows = 5

// deadRowsOf registers restartRows eligible rows named dead-1..dead-5, sorted as apply
// writes them.
func deadRowsOf(ns string) []*fleetv1alpha1.WorkerRegistration {
	GinkgoHelper()
	out := make([]*fleetv1alpha1.WorkerRegistration, 0, restartRows)
	for i := range restartRows {
		out = append(out, eligible(ns, fmt.Sprintf("dead-%d", i+1)))
	}
	return out
}

// planManager is a manager of its own whose only controller reconciles one plan, so a
// spec can stop it (a crash) and start another in its place (a restart or failover).
type planManager struct {
	reconciler *planReconcilers
	recorder   *countingRecorder
	log        *writeLog
	stop       context.CancelFunc
	done       chan struct{}
}

// startPlanManager starts a manager whose RetirementPlan controller, with applier id
// applier and takeover timeout timeout, handles only plan p. wire adjusts the
// reconciler before it starts.
func startPlanManager(p *fleetv1alpha1.RetirementPlan, applier string, timeout time.Duration, wire func(*planReconcilers, *writeLog)) *planManager {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	pm := &planManager{recorder: &countingRecorder{}, log: &writeLog{}, done: make(chan struct{})}
	r := newPlanReconciler(mgr.GetClient(), mgr.GetAPIReader(), prober)
	r.ApplierID, r.TakeoverTimeout, r.Recorder = applier, timeout, pm.recorder
	r.BeforeWrite = func(_ context.Context, worker string) { pm.log.reach(worker) }
	r.AfterWrite = func(_ context.Context, worker string) error { pm.log.write(worker); return nil }
	if wire != nil {
		wire(r, pm.log)
	}
	pm.reconciler = r
	key := client.ObjectKeyFromObject(p) // by value: the spec goes on using p
	onlyP := predicate.NewPredicateFuncs(func(o client.Object) bool { return client.ObjectKeyFromObject(o) == key })
	Expect(ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.RetirementPlan{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, onlyP)).
		Named(testenv.Uniq("restart")).
		Complete(r)).To(Succeed())
	mctx, stop := context.WithCancel(ctx)
	pm.stop = stop
	go func() {
		defer GinkgoRecover()
		defer close(pm.done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	DeferCleanup(pm.Stop)
	return pm
}

// Stop stops the manager and waits until it has stopped (idempotent).
func (pm *planManager) Stop() {
	pm.stop()
	<-pm.done
}

// reconcileUntilSettled reconciles p with r, waiting each requested interval, until r
// asks for nothing more; it returns the first result (what r did on first sight).
func reconcileUntilSettled(r *planReconcilers, p *fleetv1alpha1.RetirementPlan) ctrl.Result {
	GinkgoHelper()
	var first *ctrl.Result
	for range 20 {
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).NotTo(HaveOccurred())
		if first == nil {
			first = &res
		}
		if res.RequeueAfter == 0 {
			return *first
		}
		time.Sleep(res.RequeueAfter)
	}
	Fail("the reconciler kept requeueing")
	return ctrl.Result{}
}

// expectRowsAsReported checks each of rows against a host plan's report: the ones in
// retired are Retired by fleet, the user's plan; every other one is Active and listed in
// preserved with reason. It returns the names of those others, in rows' order.
func expectRowsAsReported(preserved []fleetv1alpha1.WorkerAssessment, fleet *fleetv1alpha1.RetirementPlan,
	rows []*fleetv1alpha1.WorkerRegistration, retired []string, reason string) []string {
	GinkgoHelper()
	var kept []string
	for _, wr := range rows {
		cur := get(wr)
		if slices.Contains(retired, wr.Name) {
			Expect(cur.Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired), wr.Name)
			Expect(cur.Status.RetiredBy).To(Equal(fleet.Namespace+"/"+fleet.Name), "%s names the fleet plan the user approved", wr.Name)
			continue
		}
		kept = append(kept, wr.Name)
		Expect(cur.Status.Phase).To(Equal(fleetv1alpha1.PhaseActive), "%s was not retired by anyone", wr.Name)
		Expect(reasonOf(preserved, wr.Name)).To(Equal(reason), wr.Name)
	}
	return kept
}

// expectResumedReport checks the report of an apply a takeover resumed on host plan p:
// every intended row is retired (exactly retired, each carrying the fleet plan) or, for
// the rows in changed, kept Active as row_changed_since_plan; the report reads as an
// apply that went through every row, resumed by taker from from. It then checks that
// fleet, p's fleet plan, aggregates the same truth.
func expectResumedReport(p, fleet *fleetv1alpha1.RetirementPlan, rows []*fleetv1alpha1.WorkerRegistration, retired, changed []string, taker, from string) {
	GinkgoHelper()
	Expect(metav1.IsControlledBy(p, fleet)).To(BeTrue(), "%s is a host plan of %s", p.Name, fleet.Name)
	s := p.Status
	Expect(s.Outcome).To(Equal(fleetv1alpha1.OutcomeApplied))
	Expect(s.Retired).To(Equal(retired), "the report names the rows retired before and after the takeover")
	Expect(s.RetiredCount).To(BeEquivalentTo(len(retired)))
	Expect(s.MutationPerformed).To(Equal(len(retired) > 0))
	Expect(s.Success).To(HaveValue(BeTrue()), "every approved row was retired or kept with its reason")
	Expect(s.ApplyComplete).To(HaveValue(BeTrue()))
	expectReadiness(p, "True", "", fleetv1alpha1.ReasonApplyResumed)
	expectApplied(p, metav1.ConditionTrue, fleetv1alpha1.ReasonApplyResumed)
	Expect(s.Message).To(ContainSubstring(taker+" resumed the apply held by "+from), "the report says who resumed it")
	Expect(s.ApplyProgress).NotTo(BeNil())
	Expect(s.ApplyProgress.State).To(Equal(fleetv1alpha1.ApplyStateFinished))
	Expect(s.ApplyProgress.Applier).To(Equal(taker))
	Expect(s.ApplyProgress.TakenOverFrom).To(Equal(from))
	Expect(s.ApplyProgress.Takeover).To(Equal(fleetv1alpha1.TakeoverResumed))
	Expect(s.ApplyProgress.IntendedCount).To(BeEquivalentTo(len(rows)))
	Expect(s.ApplyProgress.IntendedRows).To(BeEmpty(), "cleared once retired and applyPreserved name every intended row")

	kept := expectRowsAsReported(s.ApplyPreserved, fleet, rows, retired, retirement.ReasonRowChangedSincePlan)
	Expect(kept).To(Equal(changed))
	Expect(s.ApplyPreserved).To(HaveLen(len(changed)), "applyPreserved names exactly the rows written since the apply read them")
	Expect(len(retired)+len(changed)).To(Equal(len(rows)), "every intended row is accounted for")

	By("the fleet plan's aggregate reads as the resumed apply it is")
	f := fleet.Status
	Expect(f.Outcome).To(Equal(fleetv1alpha1.OutcomeApplied))
	Expect(f.Retired).To(Equal(retired))
	Expect(f.RetiredCount).To(BeEquivalentTo(len(retired)))
	Expect(f.Success).To(HaveValue(BeTrue()))
	Expect(f.ApplyComplete).To(HaveValue(BeTrue()))
	expectReadiness(fleet, "True", "", fleetv1alpha1.ReasonApplyResumed)
	expectApplied(fleet, metav1.ConditionTrue, fleetv1alpha1.ReasonApplyResumed)
	Expect(f.ApplyPreserved).To(HaveLen(len(changed)))
	for _, n := range changed {
		Expect(reasonOf(f.ApplyPreserved, n)).To(Equal(retirement.ReasonRowChangedSincePlan), n)
	}
	Expect(f.Hosts).To(HaveLen(1))
	Expect(f.Hosts[0].Outcome).To(Equal(fleetv1alpha1.OutcomeApplied))
	Expect(f.Hosts[0].RetiredCount).To(BeEquivalentTo(len(retired)))
}

// expectInterruptedReport checks the report a takeover completed on host plan p:
// exactly retired were retired, every other intended row is preserved as
// apply_interrupted and still Active, and nothing reads as a success. It then checks that
// fleet, p's fleet plan, aggregates the same truth.
func expectInterruptedReport(p, fleet *fleetv1alpha1.RetirementPlan, rows []*fleetv1alpha1.WorkerRegistration, retired []string, taker, from string) {
	GinkgoHelper()
	Expect(metav1.IsControlledBy(p, fleet)).To(BeTrue(), "%s is a host plan of %s", p.Name, fleet.Name)
	s := p.Status
	wantOutcome := fleetv1alpha1.OutcomeApplied
	if len(retired) == 0 {
		wantOutcome = fleetv1alpha1.OutcomeTransactionFailed
	}
	Expect(s.Outcome).To(Equal(wantOutcome))
	Expect(s.Retired).To(Equal(retired), "the report names exactly the rows the crashed applier retired")
	Expect(s.RetiredCount).To(BeEquivalentTo(len(retired)))
	Expect(s.MutationPerformed).To(Equal(len(retired) > 0))
	Expect(s.Success).To(HaveValue(BeFalse()), "an interrupted apply is never a success")
	Expect(s.ApplyComplete).To(HaveValue(BeFalse()), "nor complete")
	expectReadiness(p, "False", "True", fleetv1alpha1.ReasonApplyInterrupted)
	expectApplied(p, metav1.ConditionFalse, fleetv1alpha1.ReasonApplyInterrupted)
	Expect(s.ApplyProgress).NotTo(BeNil())
	Expect(s.ApplyProgress.State).To(Equal(fleetv1alpha1.ApplyStateFinished))
	Expect(s.ApplyProgress.Applier).To(Equal(taker))
	Expect(s.ApplyProgress.TakenOverFrom).To(Equal(from))
	Expect(s.ApplyProgress.IntendedCount).To(BeEquivalentTo(len(rows)))
	Expect(s.ApplyProgress.Takeover).To(Equal(fleetv1alpha1.TakeoverCompleted))
	Expect(s.ApplyProgress.IntendedRows).To(BeEmpty(), "cleared once retired and applyPreserved name every intended row")

	untouched := expectRowsAsReported(s.ApplyPreserved, fleet, rows, retired, retirement.ReasonApplyInterrupted)
	Expect(s.ApplyPreserved).To(HaveLen(len(untouched)), "applyPreserved names exactly the intended rows not retired")

	By("the fleet plan's aggregate reads as the interrupted apply it is")
	f := fleet.Status
	Expect(f.Outcome).To(Equal(wantOutcome))
	Expect(f.Retired).To(Equal(retired), "the fleet report's retired rows are the union of its host plans'")
	Expect(f.RetiredCount).To(BeEquivalentTo(len(retired)))
	Expect(f.MutationPerformed).To(Equal(len(retired) > 0))
	Expect(f.Success).To(HaveValue(BeFalse()), "a fleet apply with an interrupted host plan is no success")
	Expect(f.ApplyComplete).To(HaveValue(BeFalse()), "nor complete")
	expectReadiness(fleet, "False", "True", fleetv1alpha1.ReasonApplyInterrupted)
	expectApplied(fleet, metav1.ConditionFalse, fleetv1alpha1.ReasonApplyInterrupted)
	Expect(f.ApplyProgress).To(BeNil(), "a fleet plan writes no row: its host plans record their applies")
	Expect(f.ApplyPreserved).To(HaveLen(len(untouched)))
	for _, n := range untouched {
		Expect(reasonOf(f.ApplyPreserved, n)).To(Equal(retirement.ReasonApplyInterrupted), n)
	}
	Expect(f.Hosts).To(HaveLen(1))
	Expect(f.Hosts[0].Plan).To(Equal(p.Name))
	Expect(f.Hosts[0].Outcome).To(Equal(wantOutcome))
	Expect(f.Hosts[0].RetiredCount).To(BeEquivalentTo(len(retired)))
}

// waitFleetApplied waits until fleet plan p has aggregated its host plans' applies.
func waitFleetApplied(p *fleetv1alpha1.RetirementPlan) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		g.Expect(p.Status.Outcome).NotTo(BeElementOf("", fleetv1alpha1.OutcomePlanned))
	}).Should(Succeed())
	return p
}

// Each plan here is a fleet plan, as a user creates it; its one host plan (host A, whose
// agent every reconciler here is) is planned and applied by the same reconcile, so the
// apply's single-applier protocol is checked on the host plan, and its aggregate on the
// fleet plan.
var _ = Describe("RetirementPlan apply across restarts: one applier, a report that survives", func() {
	// crashAfterTwoWrites starts manager A on plan p, approves p, and lets A crash right
	// after its second row write: the host plan then shows A's recorded intent and two
	// retired rows. approveIt approves p. It returns p, its host plan and the rows'
	// resourceVersions then.
	crashAfterTwoWrites := func(p *fleetv1alpha1.RetirementPlan, rows []*fleetv1alpha1.WorkerRegistration,
		approveIt func(*fleetv1alpha1.RetirementPlan)) (*fleetv1alpha1.RetirementPlan, *fleetv1alpha1.RetirementPlan, map[string]string) {
		GinkgoHelper()
		By("manager A plans, is approved, and crashes right after its second row write")
		crashed := make(chan struct{})
		a := startPlanManager(p, "agent-a", 0, func(r *planReconcilers, l *writeLog) {
			r.AfterWrite = func(_ context.Context, worker string) error {
				if n := l.write(worker); n >= 2 {
					if n == 2 {
						close(crashed)
					}
					return errors.New("simulated process death")
				}
				return nil
			}
		})
		p = waitOutcome(p, fleetv1alpha1.OutcomePlanned)
		Expect(p.Status.CandidateWorkerIdentities).To(Equal(names(rows)))
		hp := hostPlanOf(p)
		approveIt(p)
		Eventually(crashed).Should(BeClosed())
		a.Stop()
		Expect(a.log.Written()).To(Equal([]string{"dead-1", "dead-2"}), "A wrote two rows and nothing after its crash")

		p, hp = getPlan(p), getPlan(hp)
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned), "the fleet plan has no report to aggregate")
		Expect(p.Status.ApplyProgress).To(BeNil(), "the apply is recorded on the host plan")
		Expect(hp.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned), "A wrote no report")
		Expect(hp.Status.ApplyProgress).NotTo(BeNil(), "the intent was recorded before the first row write")
		Expect(hp.Status.ApplyProgress.State).To(Equal(fleetv1alpha1.ApplyStateInProgress))
		Expect(hp.Status.ApplyProgress.Applier).To(Equal("agent-a"))
		Expect(hp.Status.ApplyProgress.IntendedCount).To(BeEquivalentTo(5))
		versions := map[string]string{}
		for _, wr := range rows {
			versions[wr.Name] = get(wr).ResourceVersion
		}
		var intended []string
		for _, ir := range hp.Status.ApplyProgress.IntendedRows {
			intended = append(intended, ir.Name)
			if ir.Name != "dead-1" && ir.Name != "dead-2" {
				Expect(ir.ResourceVersion).To(Equal(versions[ir.Name]), "the intent records the resourceVersion %s was read at", ir.Name)
			}
		}
		Expect(intended).To(Equal(names(rows)))
		expectActive(rows[2:]...)
		return p, hp, versions
	}

	It("resumes the apply after the manager crashes between two row writes: a new manager on the rows' host takes over "+
		"once the hold lapses, re-probes and writes the remaining rows, writes nothing twice, and keeps a row changed since", func() {
		ns := newNamespace()
		rows := deadRowsOf(ns)
		p := newPlanObj(ns, "direct-restart")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		p, hp, versions := crashAfterTwoWrites(p, rows, func(p *fleetv1alpha1.RetirementPlan) { Expect(approve(gitops(), p)).To(Succeed()) })

		By("while no manager runs, someone labels dead-3 (nothing the approval covers) and moves dead-4's heartbeat further back (it stays a stale orphan)")
		Eventually(func() error {
			cur := get(rows[2])
			cur.Labels = map[string]string{"touched": "after-the-crash"}
			return k8sClient.Update(ctx, cur)
		}).Should(Succeed())
		Eventually(func() error {
			cur := get(rows[3])
			hb := metav1.NewTime(time.Now().Add(-3 * time.Hour))
			cur.Status.LastHeartbeatAt = &hb
			return k8sClient.Status().Update(ctx, cur)
		}).Should(Succeed())
		Expect(get(rows[2]).ResourceVersion).NotTo(Equal(versions["dead-3"]))
		expectActive(rows[3])

		By("manager B, a new applier on the same host with a short takeover timeout, resumes the apply")
		takeovers := counterValue("fleet_retirement_apply_takeovers_total", nil)
		b := startPlanManager(p, "agent-b", 2*time.Second, nil) // it sees only the fleet plan
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(hp), hp)).To(Succeed())
			g.Expect(hp.Status.ApplyProgress).NotTo(BeNil())
			g.Expect(hp.Status.ApplyProgress.State).To(Equal(fleetv1alpha1.ApplyStateFinished))
		}).Should(Succeed())
		p = waitFleetApplied(p)
		expectResumedReport(hp, p, rows, []string{"dead-1", "dead-2", "dead-3", "dead-5"}, []string{"dead-4"}, "agent-b", "agent-a")
		Expect(b.log.Reached()).To(Equal([]string{"dead-3", "dead-5"}), "B probes and writes only the remaining rows the approval still describes")
		Expect(b.log.Written()).To(Equal([]string{"dead-3", "dead-5"}))
		for _, wr := range rows[:2] {
			Expect(get(wr).ResourceVersion).To(Equal(versions[wr.Name]), "%s, retired by A, is not written again", wr.Name)
		}
		Expect(evidenceOf(hp.Status.ApplyPreserved, "dead-4")).To(HaveKeyWithValue("phase", fleetv1alpha1.PhaseActive))
		Expect(b.recorder.countAbout(hp.Name, "Warning", "ApplyTakenOver")).To(Equal(1))
		Expect(b.recorder.countAbout(hp.Name, "Warning", fleetv1alpha1.ReasonApplyInterrupted)).To(Equal(0), "a resumed apply is not an interrupted one")
		Expect(counterValue("fleet_retirement_apply_takeovers_total", nil)).To(Equal(takeovers + 1))

		By("the finished plans stay as reported")
		b.Stop()
		Consistently(func(g Gomega) {
			cur, curHost := getPlan(p), getPlan(hp)
			g.Expect(cur.ResourceVersion).To(Equal(p.ResourceVersion))
			g.Expect(curHost.ResourceVersion).To(Equal(hp.ResourceVersion))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
		expectActive(rows[3])
	})

	It("does not resume when the approver lost the verb after the crash: the takeover writes no row and completes the report", func() {
		ns := newNamespace()
		rows := deadRowsOf(ns)
		rb := bind(ns, "erin", "fleet-retirement-approver")
		p := newPlanObj(ns, "direct-lapsed-restart")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		p, hp, _ := crashAfterTwoWrites(p, rows, func(p *fleetv1alpha1.RetirementPlan) { approveEventually(impersonating("erin"), p) })

		By("erin loses the approve verb while no manager runs")
		Expect(k8sClient.Delete(ctx, rb)).To(Succeed())

		By("manager B takes over and completes the report from the rows")
		b := startPlanManager(p, "agent-b", 2*time.Second, nil)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(hp), hp)).To(Succeed())
			g.Expect(hp.Status.ApplyProgress).NotTo(BeNil())
			g.Expect(hp.Status.ApplyProgress.State).To(Equal(fleetv1alpha1.ApplyStateFinished))
		}).Should(Succeed())
		p = waitFleetApplied(p)
		expectInterruptedReport(hp, p, rows, []string{"dead-1", "dead-2"}, "agent-b", "agent-a")
		Expect(hp.Status.Message).To(ContainSubstring("it was not resumed: the approval is no longer honoured"))
		Expect(b.log.Reached()).To(BeEmpty(), "the takeover writes no row")
		Expect(b.recorder.countAbout(hp.Name, "Warning", fleetv1alpha1.ReasonApplyInterrupted)).To(Equal(1))
		expectActive(rows[2:]...)
	})

	It("completes the report when every row was written but the final status write was lost, writing no row again", func() {
		ns := newNamespace()
		rows := deadRowsOf(ns)
		p := newPlanObj(ns, "direct-lostreport")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		var lost atomic.Int32
		losing := interceptor.NewClient(k8sClient.(client.WithWatch), interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if rp, ok := obj.(*fleetv1alpha1.RetirementPlan); ok && rp.Status.ApplyProgress != nil &&
					rp.Status.ApplyProgress.State == fleetv1alpha1.ApplyStateFinished {
					lost.Add(1)
					return apierrors.NewServiceUnavailable("injected: the final status write is lost")
				}
				return c.Status().Update(ctx, obj, opts...)
			},
		})
		a := newPlanReconciler(losing, k8sClient, prober)
		a.ApplierID = "agent-a"
		p = writePlanPages(a, reconcilePlan(a, p))
		hp := hostPlanOf(p)
		Expect(approve(gitops(), p)).To(Succeed())
		_, err := a.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).To(MatchError(ContainSubstring("writing apply result")))
		Expect(lost.Load()).To(BeEquivalentTo(1))
		p, hp = getPlan(p), getPlan(hp)
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned), "no host report, so no aggregate")
		Expect(hp.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned), "the report was lost")
		Expect(hp.Status.ApplyProgress).NotTo(BeNil())
		Expect(hp.Status.ApplyProgress.State).To(Equal(fleetv1alpha1.ApplyStateInProgress))
		for _, wr := range rows {
			Expect(get(wr).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired), wr.Name)
		}

		By("a second applier waits out the hold without writing anything, then completes the report")
		b := newPlanReconciler(k8sClient, k8sClient, prober)
		b.ApplierID, b.TakeoverTimeout = "agent-b", 10*time.Second
		rec := &countingRecorder{}
		b.Recorder = rec
		var bWrites writeLog
		b.BeforeWrite = func(_ context.Context, w string) { bWrites.reach(w) }
		before, beforeHost := p.ResourceVersion, hp.ResourceVersion
		first, err := b.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).NotTo(HaveOccurred())
		Expect(first.RequeueAfter).To(BeNumerically(">", 0), "the hold was fresh when b first looked, and the fleet plan carries the host plan's wait")
		Expect(first.RequeueAfter).To(BeNumerically("<=", b.TakeoverTimeout))
		Expect(getPlan(p).ResourceVersion).To(Equal(before), "a reconcile that waits changes nothing")
		Expect(getPlan(hp).ResourceVersion).To(Equal(beforeHost), "a reconcile that waits changes nothing")
		Expect(rec.count("Normal", "ApplyInProgress")).To(Equal(1))
		time.Sleep(first.RequeueAfter)
		reconcileUntilSettled(b, p)
		p, hp = getPlan(p), getPlan(hp)
		expectResumedReport(hp, p, rows, names(rows), nil, "agent-b", "agent-a")
		Expect(bWrites.Reached()).To(BeEmpty(), "the takeover writes no row")
		Expect(rec.count("Warning", "ApplyTakenOver")).To(Equal(1))
	})

	It("lets exactly one of two appliers that race to record the intent write rows; "+
		"the other changes nothing, and the one report has the right counts", func() {
		ns := newNamespace()
		rows := deadRowsOf(ns)
		p := newPlanObj(ns, "direct-race")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		planner := newPlanReconciler(k8sClient, k8sClient, prober)
		p = writePlanPages(planner, reconcilePlan(planner, p))
		hp := hostPlanOf(p)
		Expect(approve(gitops(), p)).To(Succeed())
		_, err := planner.fleet.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}) // judges the approval
		Expect(err).NotTo(HaveOccurred())
		Expect(approvedReason(getPlan(p))).To(Equal([]string{"True", fleetv1alpha1.ReasonApprovalMatches}))

		// Both appliers, each the host plan's reconcile on an agent of its own, stop right
		// before recording the intent (their approver re-check before it) until both are
		// there, so both decided to apply from the same plan.
		release := make(chan struct{})
		type applier struct {
			r        *planReconcilers
			rec      *countingRecorder
			log      *writeLog
			arrived  chan struct{}
			holders  []string // the plan's applier, as the API server shows it, at each row
			res      ctrl.Result
			err      error
			finished chan struct{}
		}
		newApplier := func(id string, at int32) *applier {
			ap := &applier{rec: &countingRecorder{}, log: &writeLog{}, arrived: make(chan struct{}), finished: make(chan struct{})}
			ap.r = newPlanReconciler(k8sClient, k8sClient, prober)
			ap.r.ApplierID, ap.r.Recorder = id, ap.rec
			ap.r.Approvers = &meetBeforeIntent{ApproverChecker: ap.r.Approvers, at: at, arrived: ap.arrived, release: release}
			ap.r.BeforeWrite = func(ctx context.Context, worker string) {
				ap.log.reach(worker)
				holder := ""
				if pr := getPlan(hp).Status.ApplyProgress; pr != nil {
					holder = pr.Applier
				}
				ap.holders = append(ap.holders, holder)
			}
			ap.r.AfterWrite = func(_ context.Context, worker string) error { ap.log.write(worker); return nil }
			return ap
		}
		one, two := newApplier("agent-one", 1), newApplier("agent-two", 1)
		run := func(ap *applier) {
			go func() {
				defer GinkgoRecover()
				defer close(ap.finished)
				ap.res, ap.err = ap.r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hp)})
			}()
		}
		refusedBefore := counterValue("fleet_retirement_apply_refused_appliers_total", map[string]string{"stage": "intent"})
		run(one)
		Eventually(one.arrived).Should(BeClosed())
		run(two) // reads the plan after one's approval check, so both pass it
		Eventually(two.arrived).Should(BeClosed())
		close(release)
		Eventually(one.finished).Should(BeClosed())
		Eventually(two.finished).Should(BeClosed())
		Expect(one.err).NotTo(HaveOccurred())
		Expect(two.err).NotTo(HaveOccurred())

		winner, loser := one, two
		if len(two.log.Written()) > 0 {
			winner, loser = two, one
		}
		Expect(winner.log.Written()).To(Equal(names(rows)), "the winner wrote every row once")
		Expect(loser.log.Reached()).To(BeEmpty(), "the loser reached no row write")
		Expect(loser.log.Written()).To(BeEmpty())
		Expect(winner.holders).To(HaveEach(winner.r.ApplierID), "one InProgress holder throughout the apply")
		Expect(winner.res.RequeueAfter).To(BeZero())
		Expect(loser.res.RequeueAfter).To(BeNumerically(">", 0), "the loser looks again later")
		Expect(winner.rec.count("Normal", "Retired")+loser.rec.count("Normal", "Retired")).To(Equal(len(rows)), "each row retired once")
		Expect(loser.rec.count("Normal", "Retired")).To(BeZero())
		Expect(loser.rec.count("Normal", "ApplyInProgress")).To(Equal(1))
		Expect(loser.rec.count("Normal", fleetv1alpha1.ReasonApplySucceeded)).To(BeZero(), "the loser wrote no report")
		Expect(counterValue("fleet_retirement_apply_refused_appliers_total", map[string]string{"stage": "intent"})).To(Equal(refusedBefore + 1))

		hp = getPlan(hp)
		Expect(hp.Status.Outcome).To(Equal(fleetv1alpha1.OutcomeApplied))
		Expect(hp.Status.Retired).To(Equal(names(rows)))
		Expect(hp.Status.RetiredCount).To(BeEquivalentTo(len(rows)))
		Expect(hp.Status.ApplyPreserved).To(BeEmpty())
		Expect(hp.Status.Success).To(HaveValue(BeTrue()))
		Expect(hp.Status.ApplyComplete).To(HaveValue(BeTrue()))
		Expect(hp.Status.ApplyProgress.State).To(Equal(fleetv1alpha1.ApplyStateFinished))
		Expect(hp.Status.ApplyProgress.Applier).To(Equal(winner.r.ApplierID))
		expectReadiness(hp, "True", "", fleetv1alpha1.ReasonApplySucceeded)

		By("the fleet plan aggregates the one report")
		for _, ap := range []*applier{winner, loser} { // both managers' fleet-plan reconciles
			_, err := ap.r.fleet.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
			Expect(err).NotTo(HaveOccurred())
		}
		p = getPlan(p)
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomeApplied))
		Expect(p.Status.Retired).To(Equal(names(rows)))
		Expect(p.Status.RetiredCount).To(BeEquivalentTo(len(rows)))
		Expect(p.Status.ApplyPreserved).To(BeEmpty())
		Expect(p.Status.Success).To(HaveValue(BeTrue()))
		Expect(p.Status.ApplyComplete).To(HaveValue(BeTrue()))
		expectReadiness(p, "True", "", fleetv1alpha1.ReasonApplySucceeded)
		Expect(loser.rec.countAbout(p.Name, "Normal", fleetv1alpha1.ReasonApplySucceeded)).To(BeZero(), "the loser aggregated nothing")

		By("the loser, reconciling again, finds the reports written and changes nothing")
		rv, rvHost := p.ResourceVersion, hp.ResourceVersion
		for _, key := range []client.ObjectKey{client.ObjectKeyFromObject(p), client.ObjectKeyFromObject(hp)} {
			res, err := loser.r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.RequeueAfter).To(BeZero())
		}
		Expect(getPlan(p).ResourceVersion).To(Equal(rv))
		Expect(getPlan(hp).ResourceVersion).To(Equal(rvHost))
	})

	It("paces its row writes when told to (--apply-row-writes-per-second), and still retires every row", func() {
		ns := newNamespace()
		rows := deadRowsOf(ns)
		p := newPlanObj(ns, "direct-paced")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		var mu sync.Mutex
		var turns []time.Time
		const perSecond = 2
		a := startPlanManager(p, "agent-a", 0, func(r *planReconcilers, l *writeLog) {
			r.RowWrites = rate.NewLimiter(perSecond, 1)
			r.BeforeWrite = func(_ context.Context, worker string) {
				mu.Lock()
				turns = append(turns, time.Now())
				mu.Unlock()
				l.reach(worker)
			}
		})
		p = waitOutcome(p, fleetv1alpha1.OutcomePlanned)
		Expect(approve(gitops(), p)).To(Succeed())
		p = waitFleetApplied(p)
		Expect(p.Status.RetiredCount).To(BeEquivalentTo(len(rows)))
		Expect(a.log.Written()).To(Equal(names(rows)))
		mu.Lock()
		defer mu.Unlock()
		Expect(turns).To(HaveLen(len(rows)))
		// A limiter of two a second, one at a time, lets the first row go at once and each
		// next one half a second after the one before; unpaced, five rows take a fraction
		// of that.
		span := turns[len(turns)-1].Sub(turns[0])
		Expect(span).To(BeNumerically(">=", time.Duration(len(rows)-1)*time.Second/perSecond-100*time.Millisecond),
			"%d rows reached within %s", len(rows), span)
	})

	It("lets a second applier that finds the apply held change nothing, and the holder's report stands", func() {
		ns := newNamespace()
		rows := deadRowsOf(ns)
		p := newPlanObj(ns, "direct-second")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		holder := newPlanReconciler(k8sClient, k8sClient, prober)
		holder.ApplierID = "agent-holder"
		p = writePlanPages(holder, reconcilePlan(holder, p))
		hp := hostPlanOf(p)
		Expect(approve(gitops(), p)).To(Succeed())

		second := newPlanReconciler(k8sClient, k8sClient, prober)
		second.ApplierID = "agent-second"
		rec := &countingRecorder{}
		second.Recorder = rec
		var secondWrites writeLog
		second.BeforeWrite = func(_ context.Context, w string) { secondWrites.reach(w) }
		waited := counterValue("fleet_retirement_apply_refused_appliers_total", map[string]string{"stage": "wait"})
		var holderWrites writeLog
		holder.AfterWrite = func(_ context.Context, w string) error { holderWrites.write(w); return nil }
		holder.BeforeWrite = func(ctx context.Context, worker string) {
			if worker != rows[2].Name {
				return
			}
			// Mid-apply, the second applier reconciles the same fleet plan (and, through
			// it, the host plan the holder is applying), and then the host plan itself.
			before, beforeHost := getPlan(p), getPlan(hp)
			for _, key := range []client.ObjectKey{client.ObjectKeyFromObject(p), client.ObjectKeyFromObject(hp)} {
				res, err := second.Reconcile(ctx, ctrl.Request{NamespacedName: key})
				Expect(err).NotTo(HaveOccurred())
				Expect(res.RequeueAfter).To(BeNumerically(">", 0), "%s: the second applier looks again later", key.Name)
				Expect(res.RequeueAfter).To(BeNumerically("<=", retirement.DefaultTakeoverTimeout))
			}
			after, afterHost := getPlan(p), getPlan(hp)
			Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "the second applier changed nothing")
			Expect(afterHost.ResourceVersion).To(Equal(beforeHost.ResourceVersion), "the second applier changed nothing")
			Expect(afterHost.Status.ApplyProgress.Applier).To(Equal("agent-holder"))
		}
		p = reconcilePlan(holder, p)
		hp = getPlan(hp)
		Expect(secondWrites.Reached()).To(BeEmpty())
		Expect(holderWrites.Written()).To(Equal(names(rows)))
		Expect(rec.count("Normal", "ApplyInProgress")).To(Equal(2), "one for each look")
		Expect(rec.countAbout(hp.Name, "Normal", "ApplyInProgress")).To(Equal(2))
		Expect(counterValue("fleet_retirement_apply_refused_appliers_total", map[string]string{"stage": "wait"})).To(Equal(waited + 2))
		Expect(hp.Status.Outcome).To(Equal(fleetv1alpha1.OutcomeApplied))
		Expect(hp.Status.Retired).To(Equal(names(rows)))
		Expect(hp.Status.Success).To(HaveValue(BeTrue()))
		Expect(hp.Status.ApplyProgress.State).To(Equal(fleetv1alpha1.ApplyStateFinished))
		Expect(hp.Status.ApplyProgress.Applier).To(Equal("agent-holder"))
		Expect(hp.Status.ApplyProgress.RetiredSoFar).To(BeEquivalentTo(len(rows)))
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomeApplied), "the holder's report stands, aggregated")
		Expect(p.Status.Retired).To(Equal(names(rows)))
		Expect(p.Status.Success).To(HaveValue(BeTrue()))
	})

	It("writes no report when its hold was taken over after its last row, and says so", func() {
		ns := newNamespace()
		rows := deadRowsOf(ns)
		p := newPlanObj(ns, "direct-holdlost-last")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		r.ApplierID = "agent-slow"
		rec := &countingRecorder{}
		r.Recorder = rec
		p = reconcilePlan(r, p)
		hp := hostPlanOf(p)
		Expect(approve(gitops(), p)).To(Succeed())
		last := rows[len(rows)-1].Name
		r.AfterWrite = func(ctx context.Context, w string) error {
			if w != last {
				return nil
			}
			// Another applier takes the apply over between the last row and the report
			// (as after a hold that lapsed while the API server was slow).
			takeOverAs(hp, "agent-taker")
			return nil
		}
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RequeueAfter).To(BeNumerically(">", 0), "it looks again once the new hold could lapse")
		for _, wr := range rows {
			Expect(get(wr).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired), wr.Name)
		}
		hp = getPlan(hp)
		Expect(hp.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned), "no report over the new holder's apply")
		Expect(hp.Status.ApplyProgress.Applier).To(Equal("agent-taker"))
		Expect(hp.Status.ApplyProgress.State).To(Equal(fleetv1alpha1.ApplyStateInProgress))
		Expect(rec.count("Warning", "ApplyHoldLost")).To(Equal(1))
	})

	It("stops writing at once when its hold was taken over mid-apply, and writes no report", func() {
		ns := newNamespace()
		rows := deadRowsOf(ns)
		p := newPlanObj(ns, "direct-holdlost")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		r.ApplierID = "agent-slow"
		r.ApproverRecheck = retirement.Recheck{Rows: 1} // renew before every row after the first
		rec := &countingRecorder{}
		r.Recorder = rec
		p = reconcilePlan(r, p)
		hp := hostPlanOf(p)
		Expect(approve(gitops(), p)).To(Succeed())
		var writes writeLog
		r.AfterWrite = func(_ context.Context, w string) error { writes.write(w); return nil }
		r.BeforeWrite = func(ctx context.Context, worker string) {
			if worker != rows[2].Name {
				return
			}
			// Another applier takes the apply over (as after a lapsed hold).
			takeOverAs(hp, "agent-taker")
		}
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).To(MatchError(ContainSubstring("another applier holds the apply")))
		Expect(writes.Written()).To(Equal(names(rows[:2])), "no row written after the hold was lost")
		expectActive(rows[2:]...)
		p, hp = getPlan(p), getPlan(hp)
		Expect(hp.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned), "no report from an applier that lost its hold")
		Expect(hp.Status.ApplyProgress.Applier).To(Equal("agent-taker"))
		Expect(hp.Status.ApplyProgress.State).To(Equal(fleetv1alpha1.ApplyStateInProgress))
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned), "nor an aggregate")
		Expect(rec.count("Warning", "ApplyHoldLost")).To(Equal(1))
	})
})

// takeOverAs writes, as a taker named applier would, that it took hp's apply over: the
// hold's applier and a new renewedAt.
func takeOverAs(hp *fleetv1alpha1.RetirementPlan, applier string) {
	GinkgoHelper()
	Eventually(func() error {
		cur := getPlan(hp)
		cur.Status.ApplyProgress.Applier, cur.Status.ApplyProgress.TakenOverFrom = applier, cur.Status.ApplyProgress.Applier
		cur.Status.ApplyProgress.RenewedAt = metav1.NowMicro()
		return k8sClient.Status().Update(ctx, cur)
	}).Should(Succeed())
}

// meetBeforeIntent holds an applier at its approver check number at (the one right
// before the intent is recorded) until release is closed, and closes arrived when it gets
// there.
type meetBeforeIntent struct {
	retirementplan.ApproverChecker
	at      int32
	arrived chan struct{}
	release <-chan struct{}
	calls   atomic.Int32
}

func (m *meetBeforeIntent) CanApprove(ctx context.Context, s authz.Subject, ns string) (bool, string, error) {
	if m.calls.Add(1) == m.at {
		close(m.arrived)
		select {
		case <-m.release:
		case <-time.After(30 * time.Second): // the spec fails on its own expectations then
		}
	}
	return m.ApproverChecker.CanApprove(ctx, s, ns)
}
