package workerregistration_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/test/support/testworker"
)

var _ = Describe("WorkerRegistration ownership", func() {
	It("turns a live worker stale at the instant its heartbeat expires, with no other event", func() {
		ns := newNamespace()
		wr := fleet.Register(ctx, ns, "short", testworker.Start(), 0, fleetv1alpha1.OwnershipLive,
			func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.HeartbeatTTLSeconds = 3 })
		ready := meta.FindStatusCondition(get(wr).Status.Conditions, fleetv1alpha1.ReadyCondition)
		Expect(ready).NotTo(BeNil())
		Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonReconciled))
		Expect(meta.FindStatusCondition(get(wr).Status.Conditions, fleetv1alpha1.StalledCondition)).To(BeNil())
		// Nothing touches the object from here on: only the requeue at expiry can move it.
		Consistently(func() string { return get(wr).Status.OwnershipState }, time.Second, 100*time.Millisecond).
			Should(Equal(fleetv1alpha1.OwnershipLive))
		Eventually(func() string { return get(wr).Status.OwnershipState }, 10*time.Second).
			Should(Equal(fleetv1alpha1.OwnershipStale))
	})

	It("lets a process probe withdraw liveness but never grant it", func() {
		ns := newNamespace()
		// Fresh heartbeat, process gone: the probe withdraws liveness.
		gone := fleet.Register(ctx, ns, "gone", testworker.Exited(), 0, fleetv1alpha1.OwnershipStale)
		Expect(get(gone).Status.Conditions[0].Message).To(ContainSubstring("gone"))
		// Lapsed heartbeat, process alive: the probe cannot make it live.
		fleet.Register(ctx, ns, "hung", testworker.Start(), hour, fleetv1alpha1.OwnershipStale)
		// Unprobeable (another host), fresh heartbeat: unknown withdraws nothing.
		fleet.Register(ctx, ns, "remote", testworker.Exited(), 0, fleetv1alpha1.OwnershipLive,
			func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.Process.HostID = "another-machine" })
	})

	It("classifies retired rows as historical", func() {
		// A RetirementPlan's apply retires rows; the RetirementPlan suite covers that path
		// end to end. Here the row is retired by hand with its ownership state left stale,
		// so only this reconciler can make it historical.
		ns := newNamespace()
		wr := fleet.Register(ctx, ns, "old", testworker.Exited(), hour, fleetv1alpha1.OwnershipStale)
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := get(wr)
			cur.Status.Phase = fleetv1alpha1.PhaseRetired
			cur.Status.RetiredAt = ptr.To(metav1.Now())
			cur.Status.RetiredBy = ns + "/by-hand"
			return k8sClient.Status().Update(ctx, cur)
		})).To(Succeed())
		Eventually(func() string { return get(wr).Status.OwnershipState }).Should(Equal(fleetv1alpha1.OwnershipHistorical))
	})
})
