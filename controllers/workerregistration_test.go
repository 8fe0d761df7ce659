package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

var _ = Describe("WorkerRegistration ownership", func() {
	It("turns a live worker stale at the instant its heartbeat expires, with no other event", func() {
		ns := newNamespace()
		wr := register(ns, "short", startChild(), 0, fleetv1alpha1.OwnershipLive,
			func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.HeartbeatTTLSeconds = 3 })
		Expect(meta.IsStatusConditionTrue(get(wr).Status.Conditions, "Ready")).To(BeTrue())
		// Nothing touches the object from here on: only the requeue at expiry can move it.
		Consistently(func() string { return get(wr).Status.OwnershipState }, time.Second, 100*time.Millisecond).
			Should(Equal(fleetv1alpha1.OwnershipLive))
		Eventually(func() string { return get(wr).Status.OwnershipState }, 10*time.Second).
			Should(Equal(fleetv1alpha1.OwnershipStale))
	})

	It("lets a process probe withdraw liveness but never grant it", func() {
		ns := newNamespace()
		// Fresh heartbeat, process gone: the probe withdraws liveness.
		gone := register(ns, "gone", deadChild(), 0, fleetv1alpha1.OwnershipStale)
		Expect(get(gone).Status.Conditions[0].Message).To(ContainSubstring("gone"))
		// Lapsed heartbeat, process alive: the probe cannot make it live.
		register(ns, "hung", startChild(), hour, fleetv1alpha1.OwnershipStale)
		// Unprobeable (another host), fresh heartbeat: unknown withdraws nothing.
		register(ns, "remote", deadChild(), 0, fleetv1alpha1.OwnershipLive,
			func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.Process.HostID = "another-machine" })
	})

	It("classifies retired rows as historical", func() {
		ns := newNamespace()
		wr := eligible(ns, "old")
		p := createPlan(ns)
		Expect(approve(gitops(), p)).To(Succeed())
		waitOutcome(p, "applied")
		Eventually(func() string { return get(wr).Status.OwnershipState }).Should(Equal(fleetv1alpha1.OwnershipHistorical))
	})
})
