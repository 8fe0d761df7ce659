package retirementplan_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/liveness"
)

// fakeProcRoot lays out a directory like the parts of / a ProcProber reads: the
// machine's real boot id (so the boot verifies) and a mountinfo with a procfs at
// <root>/proc mounted with superOpts. With sentinel, pid 1 is listed; the workers'
// pids never are, so every one of them looks free.
func fakeProcRoot(superOpts string, sentinel bool) string {
	GinkgoHelper()
	root := GinkgoT().TempDir()
	write := func(rel, content string) {
		path := filepath.Join(root, rel)
		Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
		Expect(os.WriteFile(path, []byte(content), 0o644)).To(Succeed())
	}
	write("proc/sys/kernel/random/boot_id", host.BootID+"\n")
	dir, err := filepath.EvalSymlinks(filepath.Join(root, "proc"))
	Expect(err).NotTo(HaveOccurred())
	write("proc/self/mountinfo", "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"+
		fmt.Sprintf("57 22 0:52 / %s rw,nosuid,nodev,noexec,relatime - proc proc %s\n", dir, superOpts))
	if sentinel {
		write("proc/1/stat", "1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 1 1000 100 0 0\n")
	}
	return root
}

var _ = Describe("RetirementPlan on a host that hides processes", func() {
	It("retires nothing when /proc is mounted with hidepid=2 or pid 1 is invisible, at plan and at apply", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		b := eligible(ns, "b")

		for name, root := range map[string]string{
			"direct-hidepid":     fakeProcRoot("rw,hidepid=invisible", false),
			"direct-nosentinel":  fakeProcRoot("rw", false),
			"direct-subset":      fakeProcRoot("rw,subset=pid", true),
			"direct-hidepid-one": fakeProcRoot("rw,hidepid=1", true),
		} {
			hidden := &liveness.ProcProber{Root: root, Facts: prober.Facts}
			p := newPlanObj(ns, name)
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			p = reconcilePlan(newPlanReconciler(k8sClient, k8sClient, hidden), p)
			Expect(p.Status.CandidateWorkerIdentities).To(BeEmpty(), name)
			Expect(reasonOf(p.Status.Preserved, a.Name)).To(Equal("pid_liveness_unknown"), name)
			Expect(reasonOf(p.Status.Preserved, b.Name)).To(Equal("pid_liveness_unknown"), name)
			Expect(evidenceOf(p.Status.Preserved, a.Name)["probeDetail"]).To(ContainSubstring("visibility is not proven"), name)
		}

		// A tree that proves visibility retires the same rows at plan time; if the
		// re-probe right before the write finds /proc hiding processes, nothing is written.
		visible := &liveness.ProcProber{Root: fakeProcRoot("rw", true), Facts: prober.Facts}
		p := newPlanObj(ns, "direct-hidepid-apply")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, visible)
		p = reconcilePlan(r, p)
		Expect(p.Status.CandidateWorkerIdentities).To(ConsistOf(a.Name, b.Name))
		Expect(approve(gitops(), p)).To(Succeed())
		r.Reprober = &liveness.ProcProber{Root: fakeProcRoot("rw,hidepid=2", false), Facts: prober.Facts}
		p = reconcilePlan(r, p)
		Expect(p.Status.RetiredCount).To(BeZero())
		Expect(reasonOf(p.Status.ApplyPreserved, a.Name)).To(Equal("pid_liveness_unknown"))
		Expect(reasonOf(p.Status.ApplyPreserved, b.Name)).To(Equal("pid_liveness_unknown"))
		expectActive(a, b)
	})

	It("counts a free pid of another boot as gone only when its heartbeat predates this boot", func() {
		ns := newNamespace()
		// Heartbeats an hour old, on a boot id that is not this machine's.
		earlier := eligible(ns, "earlier", func(w *fleetv1alpha1.WorkerRegistration) {
			w.Spec.Process.BootID = "00000000-0000-0000-0000-00000000e001"
		})

		// This boot began after that heartbeat: the process belonged to an earlier boot.
		p := newPlanObj(ns, "direct-boot-before")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		r.Host.BootTime = time.Now().Add(-30 * time.Minute)
		p = reconcilePlan(r, p)
		Expect(p.Status.CandidateWorkerIdentities).To(Equal([]string{earlier.Name}))
		Expect(evidenceOf(p.Status.Candidates, earlier.Name)).To(HaveKey("hostBootTime"))

		// This boot began before that heartbeat (a machine id cloned onto another
		// machine): the process may run there, so the row is kept.
		p = newPlanObj(ns, "direct-boot-after")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r = newPlanReconciler(k8sClient, k8sClient, prober)
		r.Host.BootTime = time.Now().Add(-2 * time.Hour)
		p = reconcilePlan(r, p)
		Expect(p.Status.CandidateWorkerIdentities).To(BeEmpty())
		Expect(reasonOf(p.Status.Preserved, earlier.Name)).To(Equal("pid_liveness_unknown"))

		// Without a known boot time the row is kept too.
		p = newPlanObj(ns, "direct-boot-unknown")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r = newPlanReconciler(k8sClient, k8sClient, prober)
		r.Host.BootTime = time.Time{}
		p = reconcilePlan(r, p)
		Expect(reasonOf(p.Status.Preserved, earlier.Name)).To(Equal("pid_liveness_unknown"))
		expectActive(earlier)
	})
})
