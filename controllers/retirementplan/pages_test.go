package retirementplan_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
)

// farHost is a host no agent of this suite is on.
const farHost = "a-host-without-this-agent"

// foreignRows creates n registrations of a host this controller is not on, as fast as
// the API server takes them: each is preserved as host_binding_unproven.
func foreignRows(ns string, n int) {
	GinkgoHelper()
	hb := metav1.NewTime(time.Now().Add(-hour))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := fmt.Sprintf("far-%04d", i)
				st := int64(1000 + i)
				wr := &fleetv1alpha1.WorkerRegistration{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: fleetv1alpha1.WorkerRegistrationSpec{ClientInstanceID: "inst-" + name, WorkerNamespace: "slot-" + name,
						Identity: "bot-" + name, Remote: "origin", Repository: canonicalRepo, HeartbeatTTLSeconds: 60,
						Process: fleetv1alpha1.ProcessIdentity{HostID: farHost, BootID: "boot-far", PID: int64(100 + i), StartTime: &st}},
				}
				if err := k8sClient.Create(ctx, wr); err != nil {
					errs <- err
					continue
				}
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(wr), wr); err != nil {
						return err
					}
					wr.Status.Phase, wr.Status.LastHeartbeatAt = fleetv1alpha1.PhaseActive, &hb
					return k8sClient.Status().Update(ctx, wr)
				})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		Expect(err).NotTo(HaveOccurred())
	}
}

// hostPlanOf is the one host plan of fleet plan p, as its status.hosts names it; it
// carries the fleet-plan label its pages carry too.
func hostPlanOf(p *fleetv1alpha1.RetirementPlan) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	Expect(p.Status.Hosts).To(HaveLen(1), "fleet plan %s has one host plan", p.Name)
	hp := &fleetv1alpha1.RetirementPlan{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Status.Hosts[0].Plan}, hp)).To(Succeed())
	Expect(metav1.IsControlledBy(hp, p)).To(BeTrue())
	Expect(hp.Spec.HostID).To(Equal(host.HostID))
	Expect(hp.Labels).To(HaveKey(fleetv1alpha1.FleetPlanLabel))
	return hp
}

// writePlanPages runs each of a fleet plan's host plans once more and then the fleet
// plan, as a manager would on a later event: a host plan's pages are written in the
// reconcile that plans it, so this changes nothing unless something failed before. It
// returns p re-read.
func writePlanPages(r *planReconcilers, p *fleetv1alpha1.RetirementPlan) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	for _, h := range p.Status.Hosts {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: p.Namespace, Name: h.Plan}})
		Expect(err).NotTo(HaveOccurred())
	}
	return reconcilePlan(r, p)
}

// pagesReady is a plan's PagesReady condition as (status, reason).
func pagesReady(p *fleetv1alpha1.RetirementPlan) []string {
	c := meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.PagesReadyCondition)
	if c == nil {
		return nil
	}
	return []string{string(c.Status), c.Reason}
}

// fleetPages lists every page reachable through fleet plan p's status.pages selector,
// sorted by list, then plan, then page.
func fleetPages(p *fleetv1alpha1.RetirementPlan) []fleetv1alpha1.RetirementPlanPage {
	GinkgoHelper()
	Expect(p.Status.Pages).NotTo(BeNil())
	sel, err := labels.Parse(p.Status.Pages.Selector)
	Expect(err).NotTo(HaveOccurred())
	var pages fleetv1alpha1.RetirementPlanPageList
	Expect(k8sClient.List(ctx, &pages, client.InNamespace(p.Namespace), client.MatchingLabelsSelector{Selector: sel})).To(Succeed())
	sort.Slice(pages.Items, func(i, j int) bool {
		a, b := pages.Items[i], pages.Items[j]
		if a.List != b.List {
			return a.List < b.List
		}
		if a.Plan != b.Plan {
			return a.Plan < b.Plan
		}
		return a.Page < b.Page
	})
	return pages.Items
}

var _ = Describe("RetirementPlan pages", func() {
	It("keeps status bounded and every row's verdict in pages that one selector of the fleet plan lists", func() {
		ns := newNamespace()
		dead := eligible(ns, "dead")
		const far = 45
		foreignRows(ns, far)
		p := newPlanObj(ns, "direct-pages")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		// The host plan's reconcile plans and then writes its pages; the fleet plan's
		// reconcile, which that plan write enqueues, runs meanwhile on a manager. Here it
		// runs when the host plan's first page is written.
		var r *planReconcilers
		var during struct {
			hostPages, fleetPages []string
			hostOutcome, fleet    string
			candidates            []string
			early                 int
		}
		var once sync.Once
		paging := interceptor.NewClient(k8sClient.(client.WithWatch), interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if pg, ok := obj.(*fleetv1alpha1.RetirementPlanPage); ok && pg.Plan != p.Name {
					once.Do(func() {
						defer GinkgoRecover()
						_, err := r.fleet.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
						Expect(err).NotTo(HaveOccurred())
						fp, hp := &fleetv1alpha1.RetirementPlan{}, &fleetv1alpha1.RetirementPlan{}
						Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), fp)).To(Succeed())
						Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: pg.Plan}, hp)).To(Succeed())
						during.hostPages, during.fleetPages = pagesReady(hp), pagesReady(fp)
						during.hostOutcome, during.fleet = hp.Status.Outcome, fp.Status.Outcome
						during.candidates = fp.Status.CandidateWorkerIdentities
						var early fleetv1alpha1.RetirementPlanPageList
						Expect(k8sClient.List(ctx, &early, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.PlanLabel: hp.Name})).To(Succeed())
						during.early = len(early.Items)
						Expect(hp.Status.Pages).To(BeNil())
						Expect(fp.Status.Pages).To(BeNil(), "status.pages appears once every page is written")
						Expect(meta.FindStatusCondition(fp.Status.Conditions, fleetv1alpha1.PagesReadyCondition).Message).To(ContainSubstring(host.HostID))
					})
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		r = newPlanReconciler(paging, k8sClient, prober)
		r.PageRows = 20 // pages of 20 rows: the 45 rows of the host without an agent fill three
		p = reconcilePlan(r, p)
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned))
		hp := hostPlanOf(p)
		Expect(hp.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned))

		By("recording the plan as planned before its host plan's pages are written")
		Expect(during.hostOutcome).To(Equal(fleetv1alpha1.OutcomePlanned))
		Expect(during.hostPages).To(Equal([]string{"False", fleetv1alpha1.ReasonWritingPages}))
		Expect(during.fleet).To(Equal(fleetv1alpha1.OutcomePlanned))
		Expect(during.fleetPages).To(Equal([]string{"False", fleetv1alpha1.ReasonWritingPages}))
		Expect(during.candidates).To(Equal([]string{dead.Name}), "what an approval copies is there already")
		Expect(during.early).To(BeZero())

		By("writing them in the host plan's own reconcile, and recording them on both plans")
		Expect(pagesReady(hp)).To(Equal([]string{"True", fleetv1alpha1.ReasonPagesWritten}))
		Expect(pagesReady(p)).To(Equal([]string{"True", fleetv1alpha1.ReasonPagesWritten}))

		By("keeping the counts in status complete")
		Expect(p.Status.CandidateCount).To(Equal(int32(1)))
		Expect(p.Status.PreservedCount).To(Equal(int32(far)))
		Expect(p.Status.PreservedReasonCounts).To(HaveKeyWithValue("host_binding_unproven", int32(far)))
		Expect(p.Status.HostsWithoutAgentCount).To(Equal(int32(1)))
		Expect(*p.Status.Pages).To(Equal(fleetv1alpha1.RetirementPlanPages{Candidates: 1, Preserved: 3,
			Selector: fleetv1alpha1.FleetPlanLabel + "=" + p.Name}), "the host plan's pages and the fleet plan's own, summed")
		Expect(*hp.Status.Pages).To(Equal(fleetv1alpha1.RetirementPlanPages{Candidates: 1, Preserved: 0,
			Selector: fleetv1alpha1.PlanLabel + "=" + hp.Name}), "a host plan's own pages")

		By("holding every row of the fleet, in order, in the pages the fleet plan's selector lists")
		pages := fleetPages(p)
		Expect(pages).To(HaveLen(4))
		owners := map[string]*fleetv1alpha1.RetirementPlan{p.Name: p, hp.Name: hp}
		var candidates, preserved []string
		for _, pg := range pages {
			owner := owners[pg.Plan]
			Expect(owner).NotTo(BeNil(), "page %s belongs to the fleet plan or its host plan", pg.Name)
			Expect(pg.PlanUID).To(Equal(string(owner.UID)))
			Expect(pg.Labels).To(HaveKeyWithValue(fleetv1alpha1.PlanLabel, owner.Name))
			Expect(metav1.IsControlledBy(&pg, owner)).To(BeTrue(), "a page is deleted with its plan (a host plan with its fleet plan)")
			Expect(pg.RowCount).To(Equal(int32(len(pg.Rows))))
			for _, row := range apiconv.PageVerdicts(&pg) {
				switch pg.List {
				case fleetv1alpha1.PageListCandidates:
					Expect(pg.Plan).To(Equal(hp.Name), "candidates are planned by the host's agent")
					Expect(row.ReasonCode).To(Equal("eligible_stale_orphan"))
					Expect(row.Evidence).NotTo(BeEmpty())
					candidates = append(candidates, row.WorkerIdentity)
				case fleetv1alpha1.PageListPreserved:
					Expect(pg.Plan).To(Equal(p.Name), "rows of a host without an agent are the fleet plan's own")
					Expect(row.ReasonCode).To(Equal("host_binding_unproven"))
					preserved = append(preserved, row.WorkerIdentity)
				}
			}
		}
		By("storing once what every row of a page shares")
		for _, pg := range pages {
			if pg.List != fleetv1alpha1.PageListPreserved {
				continue
			}
			Expect(pg.Shared).NotTo(BeNil(), "page %s", pg.Name)
			Expect(pg.Shared.ReasonCode).To(Equal("host_binding_unproven"))
			Expect(pg.Shared.Evidence).To(HaveKeyWithValue("rowHostID", farHost))
			for _, row := range pg.Rows {
				Expect(row.ReasonCode).To(BeEmpty(), "the shared reason code is not repeated in row %s", row.WorkerIdentity)
				Expect(row.Evidence).NotTo(HaveKey("rowHostID"))
			}
		}
		Expect(candidates).To(Equal([]string{dead.Name}))
		Expect(preserved).To(HaveLen(far))
		Expect(sort.StringsAreSorted(preserved)).To(BeTrue(), "rows are sorted across the pages of a list")
		Expect(preserved).To(Equal(func() (out []string) {
			for _, a := range p.Status.Preserved {
				out = append(out, a.WorkerIdentity)
			}
			return out
		}()), "status lists the same rows (up to its 500)")
		Expect(int32(len(candidates)+len(preserved))).To(Equal(p.Status.AssessedCount), "every assessed row is on a page")

		By("removing the pages a later attempt no longer fills")
		r.PageRows = 100                                        // the same rows now fit one page
		p.Status.Outcome, p.Status.RegistryFingerprint = "", "" // plan the fleet plan afresh, fan-out included
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
		hp.Status.Outcome = "" // and its host plan
		Expect(k8sClient.Status().Update(ctx, hp)).To(Succeed())
		p = writePlanPages(r, reconcilePlan(r, p))
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned))
		Expect(*p.Status.Pages).To(Equal(fleetv1alpha1.RetirementPlanPages{Candidates: 1, Preserved: 1,
			Selector: fleetv1alpha1.FleetPlanLabel + "=" + p.Name}))
		Expect(fleetPages(p)).To(HaveLen(2))
	})

	It("writes the pages of plans whose names are longer than a label value", func() {
		ns := newNamespace()
		dead := eligible(ns, "dead")
		p := newPlanObj(ns, "direct-pages-"+strings.Repeat("long", 13)) // 65 characters; its host plan's 75
		Expect(len(p.Name)).To(BeNumerically(">", 63))
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		p = writePlanPages(r, reconcilePlan(r, p))
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned))
		hp := hostPlanOf(p)
		Expect(hp.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned))
		Expect(p.Status.Pages.Candidates).To(Equal(int32(1)))
		pages := fleetPages(p)
		Expect(pages).To(HaveLen(1))
		Expect(pages[0].Plan).To(Equal(hp.Name), "the page names its plan in full")
		Expect(pages[0].Rows).To(HaveLen(1))
		Expect(pages[0].Rows[0].WorkerIdentity).To(Equal(dead.Name))
		sel, err := labels.Parse(hp.Status.Pages.Selector)
		Expect(err).NotTo(HaveOccurred())
		Expect(sel.Matches(labels.Set(pages[0].Labels))).To(BeTrue(), "the host plan's own selector lists its page")
	})

	It("reports the pages an agent never wrote when it stops between the plan and its pages, removes the part it wrote, and still applies the plan", func() {
		ns := newNamespace()
		dead := []*fleetv1alpha1.WorkerRegistration{eligible(ns, "dead-1"), eligible(ns, "dead-2")}
		p := newPlanObj(ns, "direct-pages-lost")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())

		By("an agent that writes one page of two, then stops")
		stopped, stop := context.WithCancel(ctx)
		defer stop()
		var creates atomic.Int32
		firstStored := make(chan struct{})
		dying := interceptor.NewClient(k8sClient.(client.WithWatch), interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*fleetv1alpha1.RetirementPlanPage); !ok {
					return c.Create(ctx, obj, opts...)
				}
				if creates.Add(1) > 1 {
					<-firstStored // pages are written concurrently: the first is stored before the agent stops
					return context.Canceled
				}
				defer close(firstStored)
				defer stop()
				return c.Create(ctx, obj, opts...)
			},
		})
		first := newPlanReconciler(dying, k8sClient, prober)
		first.PageRows = 1
		_, err := first.fleet.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}) // the fan-out alone
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		hp := hostPlanOf(p)
		_, err = first.Reconcile(stopped, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hp)})
		Expect(err).To(HaveOccurred(), "the agent stopped while it wrote the pages")
		var part fleetv1alpha1.RetirementPlanPageList
		Expect(k8sClient.List(ctx, &part, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.FleetPlanLabel: p.Name})).To(Succeed())
		Expect(part.Items).To(HaveLen(1), "one page of two was written before the agent stopped")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(hp), hp)).To(Succeed())
		Expect(pagesReady(hp)).To(Equal([]string{"False", fleetv1alpha1.ReasonWritingPages}), "nothing recorded the pages yet")

		By("a new agent process, which never held the verdicts, taking over the host plan")
		restarted := newPlanReconciler(k8sClient, k8sClient, prober)
		p = writePlanPages(restarted, p)
		hp = hostPlanOf(p)
		Expect(pagesReady(hp)).To(Equal([]string{"False", fleetv1alpha1.ReasonPagesNotWritten}))
		msg := meta.FindStatusCondition(hp.Status.Conditions, fleetv1alpha1.PagesReadyCondition).Message
		Expect(msg).To(ContainSubstring("stopped before it wrote the pages"))
		Expect(msg).NotTo(ContainSubstring("remain"))
		Expect(hp.Status.Pages).To(BeNil())
		Expect(pagesReady(p)).To(Equal([]string{"False", fleetv1alpha1.ReasonPagesNotWritten}))
		Expect(p.Status.Pages).To(BeNil())
		var none fleetv1alpha1.RetirementPlanPageList
		Expect(k8sClient.List(ctx, &none, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.FleetPlanLabel: p.Name})).To(Succeed())
		Expect(none.Items).To(BeEmpty(), "the page the stopped agent wrote is removed: part of the rows would read as all of them")

		By("keeping the plan itself whole: counts, identities, and an apply that retires the rows")
		Expect(p.Status.CandidateCount).To(Equal(int32(2)))
		Expect(p.Status.CandidateWorkerIdentities).To(ConsistOf(dead[0].Name, dead[1].Name))
		Expect(approve(gitops(), p)).To(Succeed())
		p = reconcilePlan(restarted, p)
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomeApplied))
		for _, d := range dead {
			Expect(get(d).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired))
		}
		Expect(pagesReady(p)).To(Equal([]string{"False", fleetv1alpha1.ReasonPagesNotWritten}), "the report says what is missing after the apply too")
	})

	It("keeps the report of an agent that took over while the first one still wrote the pages, and removes the first one's pages", func() {
		ns := newNamespace()
		eligible(ns, "dead-1")
		eligible(ns, "dead-2")
		p := newPlanObj(ns, "direct-pages-late")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		restarted := newPlanReconciler(k8sClient, k8sClient, prober)
		var hostPlan client.ObjectKey
		var takeover sync.Once
		late := interceptor.NewClient(k8sClient.(client.WithWatch), interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*fleetv1alpha1.RetirementPlanPage); ok {
					// The new agent reports the pages while the first writes its first one.
					takeover.Do(func() {
						defer GinkgoRecover()
						_, err := restarted.Reconcile(ctx, ctrl.Request{NamespacedName: hostPlan})
						Expect(err).NotTo(HaveOccurred())
					})
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		first := newPlanReconciler(late, k8sClient, prober)
		first.PageRows = 1
		_, err := first.fleet.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}) // the fan-out alone
		Expect(err).NotTo(HaveOccurred())
		hp := hostPlanOf(getPlan(p))
		hostPlan = client.ObjectKeyFromObject(hp)

		_, err = first.Reconcile(ctx, ctrl.Request{NamespacedName: hostPlan}) // plans, then writes the pages
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Get(ctx, hostPlan, hp)).To(Succeed())
		Expect(pagesReady(hp)).To(Equal([]string{"False", fleetv1alpha1.ReasonPagesNotWritten}), "the taking-over agent's report stands")
		Expect(hp.Status.Pages).To(BeNil())
		var none fleetv1alpha1.RetirementPlanPageList
		Expect(k8sClient.List(ctx, &none, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.PlanLabel: hp.Name})).To(Succeed())
		Expect(none.Items).To(BeEmpty(), "pages no status names are removed")
	})

	It("gives up pages whose writes keep failing, says why, and leaves the plan whole", func() {
		ns := newNamespace()
		dead := eligible(ns, "dead")
		eligible(ns, "dead-too")
		p := newPlanObj(ns, "direct-pages-fail")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		var attempts, tries atomic.Int32
		var stored atomic.Bool
		firstStored := make(chan struct{})
		failing := interceptor.NewClient(k8sClient.(client.WithWatch), interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if page, ok := obj.(*fleetv1alpha1.RetirementPlanPage); ok {
					// The first page is stored, every other write fails: after it, since
					// pages are written concurrently and a failure cancels the others.
					if page.Page == 1 && tries.Add(1) == 1 {
						defer close(firstStored)
						err := c.Create(ctx, obj, opts...)
						stored.Store(err == nil)
						return err
					}
					<-firstStored
					attempts.Add(1)
					return apierrors.NewServiceUnavailable("injected: pages cannot be stored")
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		r := newPlanReconciler(failing, k8sClient, prober)
		r.PageRows = 1
		rec := &countingRecorder{}
		r.Recorder = rec
		p = writePlanPages(r, reconcilePlan(r, p))
		hp := hostPlanOf(p)
		Expect(attempts.Load()).To(BeNumerically(">=", 4), "the page write was retried")
		Expect(pagesReady(hp)).To(Equal([]string{"False", fleetv1alpha1.ReasonPagesNotWritten}))
		Expect(meta.FindStatusCondition(hp.Status.Conditions, fleetv1alpha1.PagesReadyCondition).Message).To(
			And(ContainSubstring("Writing the pages failed"), ContainSubstring("pages cannot be stored")))
		Expect(hp.Status.Pages).To(BeNil())
		Expect(stored.Load()).To(BeTrue(), "a first page was stored")
		var none fleetv1alpha1.RetirementPlanPageList
		Expect(k8sClient.List(ctx, &none, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.FleetPlanLabel: p.Name})).To(Succeed())
		Expect(none.Items).To(BeEmpty(), "the page stored before the writes failed is removed")
		Expect(rec.count("Warning", fleetv1alpha1.ReasonPagesNotWritten)).To(Equal(1))
		Expect(pagesReady(p)).To(Equal([]string{"False", fleetv1alpha1.ReasonPagesNotWritten}))
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomePlanned))
		Expect(p.Status.CandidateWorkerIdentities).To(ContainElement(dead.Name))
		Expect(p.Status.CandidateCount).To(Equal(int32(2)))
	})
})
