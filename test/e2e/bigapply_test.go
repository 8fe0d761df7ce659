//go:build e2e

package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/retirementplan"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// freePIDs are n pid numbers no process of this machine holds now, from the top of the
// pid space, which this machine never reaches in a test run.
func freePIDs(n int) []int64 {
	GinkgoHelper()
	out := make([]int64, 0, n)
	for pid := int64(4_000_000); len(out) < n; pid++ {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			out = append(out, pid)
		}
	}
	return out
}

var _ = Describe("An apply of 1,000 rows whose manager pod is deleted in the middle", Ordered, func() {
	const (
		ns   = "e2e-big"
		rows = 1000
		plan = "big"
	)

	It("ends with a report that says exactly which rows were retired", func() {
		ids := nodeMachineIDs()
		bootID, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		Expect(err).NotTo(HaveOccurred())
		boot := strings.TrimSpace(string(bootID))
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())

		By(fmt.Sprintf("registering %d workers of node1 whose processes are gone and whose heartbeats lapsed", rows))
		old := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
		var g errgroup.Group
		g.SetLimit(16)
		for i, pid := range freePIDs(rows) {
			g.Go(func() error {
				name := fmt.Sprintf("gone-%04d", i)
				wr := &fleetv1alpha1.WorkerRegistration{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: fleetv1alpha1.WorkerRegistrationSpec{
						ClientInstanceID: fmt.Sprintf("inst-%016x", pid), WorkerNamespace: "slot-" + name, Identity: "worker-" + name,
						Remote: "origin", Repository: "fleet/demo", HeartbeatTTLSeconds: 60,
						Process:      fleetv1alpha1.ProcessIdentity{HostID: ids["node1"], BootID: boot, PID: pid, StartTime: ptr.To[int64](1)},
						GenerationID: "gen-" + name, SessionID: "sess-" + name,
					},
				}
				if err := k8s.Create(ctx, wr); err != nil {
					return err
				}
				// A merge patch: the controller may have written the status meanwhile.
				base := wr.DeepCopy()
				wr.Status.LastHeartbeatAt = &old
				return k8s.Status().Patch(ctx, wr, client.MergeFrom(base))
			})
		}
		Expect(g.Wait()).To(Succeed())
		Eventually(func(g Gomega) {
			list := &fleetv1alpha1.WorkerRegistrationList{}
			g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			stale := 0
			for _, wr := range list.Items {
				if wr.Status.OwnershipState == fleetv1alpha1.OwnershipStale {
					stale++
				}
			}
			g.Expect(stale).To(Equal(rows))
		}).Should(Succeed())

		By("planning and approving through one kubectl apply")
		kubectlFleet("plan", "-n", ns, "--name", plan, "--canonical-repository", "fleet/demo")
		fleetPlan := &fleetv1alpha1.RetirementPlan{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: plan}, fleetPlan)).To(Succeed())
		Expect(fleetPlan.Status.CandidateCount).To(BeEquivalentTo(rows))
		approval := filepath.Join(GinkgoT().TempDir(), "approval.yaml")
		Expect(os.WriteFile(approval, []byte(kubectlFleet("approve", "-n", ns, plan)), 0o600)).To(Succeed())
		kubectl("apply", "-f", approval)

		By("deleting node1's manager pod once the apply has written some rows")
		victim := managerPods()["node1"]
		retired := func() int {
			list := &fleetv1alpha1.WorkerRegistrationList{}
			Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			n := 0
			for _, wr := range list.Items {
				if wr.Status.Phase == fleetv1alpha1.PhaseRetired {
					n++
				}
			}
			return n
		}
		Eventually(retired).WithPolling(50 * time.Millisecond).Should(BeNumerically(">=", 10))
		Expect(k8s.Delete(ctx, &victim, client.GracePeriodSeconds(0))).To(Succeed())
		atKill := retired()
		GinkgoWriter.Printf("manager pod %s deleted with %d of %d rows retired\n", victim.Name, atKill, rows)

		By("moving the heartbeat of the last row further back, unless the apply reached it before the kill")
		// The apply writes rows in name order, so the last one is written last. A takeover
		// that resumes must keep it: it is no longer the row that was approved.
		touched := &fleetv1alpha1.WorkerRegistration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("gone-%04d", rows-1)}, touched)).To(Succeed())
		if touched.Status.Phase == fleetv1alpha1.PhaseRetired {
			touched = nil
		} else {
			base := touched.DeepCopy()
			older := metav1.NewTime(old.Add(-2 * time.Hour))
			touched.Status.LastHeartbeatAt = &older
			Expect(k8s.Status().Patch(ctx, touched, client.MergeFrom(base))).To(Succeed())
		}

		By("waiting for the report, written by whoever holds the apply afterwards")
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: plan}, fleetPlan)).To(Succeed())
			g.Expect(fleetPlan.Status.Outcome).NotTo(BeElementOf("", retirement.OutcomePlanned))
		}).WithTimeout(6 * time.Minute).Should(Succeed())
		hostPlan := &fleetv1alpha1.RetirementPlan{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: retirementplan.HostPlanName(plan, ids["node1"])}, hostPlan)).To(Succeed())

		list := &fleetv1alpha1.WorkerRegistrationList{}
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var retiredNames []string
		for _, wr := range list.Items {
			if wr.Status.Phase == fleetv1alpha1.PhaseRetired {
				Expect(wr.Status.RetiredBy).To(Equal(ns+"/"+plan), wr.Name)
				retiredNames = append(retiredNames, wr.Name)
			}
		}
		GinkgoWriter.Printf("outcome %s: %d retired (report says %d), %d at the kill\n", fleetPlan.Status.Outcome, len(retiredNames), fleetPlan.Status.RetiredCount, atKill)
		Expect(len(retiredNames)).To(BeNumerically(">=", atKill), "nothing written before the kill is lost")
		Expect(fleetPlan.Status.RetiredCount).To(BeEquivalentTo(len(retiredNames)), "the fleet report counts exactly the rows retired")
		Expect(hostPlan.Status.RetiredCount).To(BeEquivalentTo(len(retiredNames)), "the host report counts exactly the rows retired")
		Expect(hostPlan.Status.Retired).To(ConsistOf(retiredNames), "the host report names exactly the rows retired")
		progress := hostPlan.Status.ApplyProgress
		Expect(progress).NotTo(BeNil())
		if progress.TakenOverFrom != "" {
			// node1's new manager, back within seconds, took the apply over on the rows'
			// host once the hold lapsed (60 s), long before the coordinator's stand-in may
			// (twice that), and resumed it: every row was as approved, so every row is
			// retired, once.
			GinkgoWriter.Printf("taken over by %s from %s (%s)\n", progress.Applier, progress.TakenOverFrom, progress.Takeover)
			Expect(progress.Takeover).To(Equal(fleetv1alpha1.TakeoverResumed), "the host's own returning agent resumes the apply")
			Expect(touched).NotTo(BeNil(), "the apply was taken over, so it had not reached its last row at the kill")
			Expect(retiredNames).To(HaveLen(rows-1), "a resumed apply retires every approved row nobody changed")
			Expect(retiredNames).NotTo(ContainElement(touched.Name))
			kept := map[string]string{}
			for _, a := range fleetPlan.Status.ApplyPreserved {
				kept[a.WorkerIdentity] = a.ReasonCode
			}
			Expect(kept).To(Equal(map[string]string{touched.Name: retirement.ReasonRowChangedSincePlan}),
				"the row changed after the kill is kept, and only it")
			Expect(fleetPlan.Status.Success).To(HaveValue(BeTrue()))
			Expect(fleetPlan.Status.ApplyComplete).To(HaveValue(BeTrue()))
			Expect(hostPlan.Status.Message).To(ContainSubstring(progress.Applier + " resumed the apply held by " + progress.TakenOverFrom))
			cond := meta.FindStatusCondition(fleetPlan.Status.Conditions, "Ready")
			Expect(cond).NotTo(BeNil())
			Expect(cond.Reason).To(Equal(fleetv1alpha1.ReasonApplyResumed))
		} else {
			// Only an apply that finished before the kill is never taken over: it had
			// written the last row too, so nothing was touched.
			Expect(touched).To(BeNil(), "an apply nobody took over finished before the kill")
			Expect(retiredNames).To(HaveLen(rows), "an apply nobody took over finished before the kill")
		}

		By("the DaemonSet brings node1's manager back")
		Eventually(func(g Gomega) {
			p, ok := managerPods()["node1"]
			g.Expect(ok).To(BeTrue())
			g.Expect(p.UID).NotTo(Equal(victim.UID))
			g.Expect(ready(p)).To(BeTrue())
		}).Should(Succeed())
	})
})
