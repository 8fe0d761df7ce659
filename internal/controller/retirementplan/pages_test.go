package retirementplan_test

import (
	"fmt"
	"sort"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

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
						Process: fleetv1alpha1.ProcessIdentity{HostID: "a-host-without-this-agent", BootID: "boot-far", PID: int64(100 + i), StartTime: &st}},
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

var _ = Describe("RetirementPlan pages", func() {
	It("keeps status bounded and every row's verdict in pages owned by the plan", func() {
		ns := newNamespace()
		dead := eligible(ns, "dead")
		const far = 45
		foreignRows(ns, far)
		p := newPlanObj(ns, "direct-pages")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		r.PageRows = 20 // pages of 20 rows: 45 preserved rows fill three
		p = reconcilePlan(r, p)

		By("keeping the counts in status complete")
		Expect(p.Status.CandidateCount).To(Equal(int32(1)))
		Expect(p.Status.PreservedCount).To(Equal(int32(far)))
		Expect(p.Status.PreservedReasonCounts).To(HaveKeyWithValue("host_binding_unproven", int32(far)))
		Expect(p.Status.Pages).NotTo(BeNil())
		Expect(*p.Status.Pages).To(Equal(fleetv1alpha1.RetirementPlanPages{Candidates: 1, Preserved: 3, Selector: fleetv1alpha1.PlanLabel + "=" + p.Name}))

		By("holding every row, in order, in the pages")
		var pages fleetv1alpha1.RetirementPlanPageList
		Expect(k8sClient.List(ctx, &pages, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.PlanLabel: p.Name})).To(Succeed())
		Expect(pages.Items).To(HaveLen(4))
		sort.Slice(pages.Items, func(i, j int) bool {
			a, b := pages.Items[i], pages.Items[j]
			return a.List < b.List || a.List == b.List && a.Page < b.Page
		})
		var candidates, preserved []string
		for _, pg := range pages.Items {
			Expect(pg.Plan).To(Equal(p.Name))
			Expect(pg.PlanUID).To(Equal(string(p.UID)))
			Expect(metav1.IsControlledBy(&pg, p)).To(BeTrue(), "a page is deleted with its plan")
			Expect(pg.RowCount).To(Equal(int32(len(pg.Rows))))
			for _, row := range pg.Rows {
				switch pg.List {
				case fleetv1alpha1.PageListCandidates:
					Expect(row.ReasonCode).To(Equal("eligible_stale_orphan"))
					Expect(row.Evidence).NotTo(BeEmpty())
					candidates = append(candidates, row.WorkerIdentity)
				case fleetv1alpha1.PageListPreserved:
					Expect(row.ReasonCode).To(Equal("host_binding_unproven"))
					preserved = append(preserved, row.WorkerIdentity)
				}
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

		By("removing the pages a later attempt no longer fills")
		r.PageRows = 100 // the same rows now fit one page
		p.Status.Outcome = ""
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
		p = reconcilePlan(r, p)
		Expect(p.Status.Pages.Preserved).To(Equal(int32(1)))
		Expect(k8sClient.List(ctx, &pages, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.PlanLabel: p.Name})).To(Succeed())
		Expect(pages.Items).To(HaveLen(2))
	})
})
