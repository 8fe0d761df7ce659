package retirementplan_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// gauge reads one fleet gauge of namespace ns from the manager's metrics registry
// (-1 when it is not there).
func gauge(name, ns string, labels map[string]string) float64 {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["namespace"] != ns {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue metric
				}
			}
			return valueOf(m)
		}
	}
	return -1
}

func valueOf(m *dto.Metric) float64 { return m.GetGauge().GetValue() }

var _ = Describe("RetirementPlan fleet snapshot", func() {
	It("shows the fleet at plan time, before any apply, in status and as gauges", func() {
		ns := newNamespace()
		eligible(ns, "dead")
		register(ns, "live", startChild(), 0, fleetv1alpha1.OwnershipLive)
		register(ns, "legacy-live", startChild(), 0, fleetv1alpha1.OwnershipLive,
			func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.ClientInstanceID = "pid-4711" })
		p := createPlan(ns)

		s := p.Status.Snapshot
		Expect(s).NotTo(BeNil(), "the snapshot is in status from the plan on")
		Expect(p.Status.PostApply).To(BeNil(), "nothing was applied")
		Expect(s.StaleWorkerCount).To(BeEquivalentTo(1))
		Expect(s.LiveWorkerCount).To(BeEquivalentTo(2))
		Expect(s.HistoricalWorkerCount).To(BeEquivalentTo(0))
		Expect(s.LiveFleetSafe).To(BeFalse(), "a live legacy worker blocks")
		Expect(s.Blockers).To(ContainElement(SatisfyAll(HaveField("Code", "legacy_incomplete_identity"), HaveField("WorkerIdentity", "legacy-live"))))
		Expect(s.BlockerCount).To(BeEquivalentTo(len(s.Blockers)))

		Expect(gauge("fleet_workers", ns, map[string]string{"state": fleetv1alpha1.OwnershipStale})).To(Equal(1.0))
		Expect(gauge("fleet_workers", ns, map[string]string{"state": fleetv1alpha1.OwnershipLive})).To(Equal(2.0))
		Expect(gauge("fleet_workers", ns, map[string]string{"state": fleetv1alpha1.OwnershipHistorical})).To(Equal(0.0))
		Expect(gauge("fleet_live_fleet_safe", ns, nil)).To(Equal(0.0))
		Expect(gauge("fleet_blockers", ns, map[string]string{"code": "legacy_incomplete_identity"})).To(BeNumerically(">=", 1))

		By("after the apply the gauges follow the fleet")
		Expect(approve(gitops(), p)).To(Succeed())
		p = waitOutcome(p, "applied")
		Expect(p.Status.PostApply.StaleWorkerCount).To(BeEquivalentTo(0))
		Expect(p.Status.Snapshot.StaleWorkerCount).To(BeEquivalentTo(1), "the plan-time snapshot stays as it was")
		Expect(gauge("fleet_workers", ns, map[string]string{"state": fleetv1alpha1.OwnershipStale})).To(Equal(0.0))
		Expect(gauge("fleet_workers", ns, map[string]string{"state": fleetv1alpha1.OwnershipHistorical})).To(Equal(1.0))
	})
})
