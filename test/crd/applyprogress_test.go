package crd_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

var _ = Describe("RetirementPlan status.applyProgress", func() {
	It("accepts a recorded intent and refuses an unknown state or an empty applier", func() {
		p := newPlan()
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		now := metav1.Now()
		p.Status.ApplyProgress = &fleetv1alpha1.ApplyProgress{State: fleetv1alpha1.ApplyStateInProgress, Applier: "host-a-x1y2z",
			StartedAt: now, RenewedAt: metav1.NowMicro(), IntendedCount: 2,
			IntendedRows: []fleetv1alpha1.IntendedRow{{Name: "a", ResourceVersion: "17", Fingerprint: "sha256:" + strings.Repeat("a", 64)},
				{Name: "b", ResourceVersion: "18", Fingerprint: "sha256:" + strings.Repeat("b", 64)}}}
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
		rv := p.ResourceVersion

		paused := p.DeepCopy()
		paused.Status.ApplyProgress.State = "Paused"
		expectInvalid(k8sClient.Status().Update(ctx, paused), "status.applyProgress.state")
		anonymous := p.DeepCopy()
		anonymous.Status.ApplyProgress.Applier = ""
		expectInvalid(k8sClient.Status().Update(ctx, anonymous), "status.applyProgress.applier")
		unversioned := p.DeepCopy()
		unversioned.Status.ApplyProgress.IntendedRows[1].ResourceVersion = ""
		expectInvalid(k8sClient.Status().Update(ctx, unversioned), "status.applyProgress.intendedRows[1].resourceVersion")
		vague := p.DeepCopy()
		vague.Status.ApplyProgress.IntendedRows[0].Fingerprint = "sha256:ABC"
		expectInvalid(k8sClient.Status().Update(ctx, vague), "status.applyProgress.intendedRows[0].fingerprint")
		twice := p.DeepCopy()
		twice.Status.ApplyProgress.IntendedRows[1].Name = "a"
		expectInvalid(k8sClient.Status().Update(ctx, twice), "status.applyProgress.intendedRows[1]")
		finished := p.DeepCopy()
		finished.Status.ApplyProgress.Takeover = "Finished"
		expectInvalid(k8sClient.Status().Update(ctx, finished), "status.applyProgress.takeover")
		expectUnchanged(p, rv)
	})

	It("is explained by kubectl explain", func() {
		text := kubectlExplain("retirementplan.status.applyProgress")
		for _, want := range []string{"exactly one applier", "compare-and-swap", "takeover timeout", "resumes the apply",
			"row_changed_since_plan", "ApplyResumed", "apply_interrupted", "ApplyInterrupted"} {
			Expect(text).To(ContainSubstring(want))
		}
		Expect(kubectlExplain("retirementplan.status.applyProgress.renewedAt")).To(ContainSubstring("take the apply over"))
		Expect(kubectlExplain("retirementplan.status.applyProgress.startedAt")).To(ContainSubstring("retiredAt"))
		Expect(kubectlExplain("retirementplan.status.applyProgress.intendedRows")).To(ContainSubstring("guarded by that resourceVersion"))
		Expect(kubectlExplain("retirementplan.status.applyProgress.takeover")).To(ContainSubstring("Resumed"))
	})

	It("explains the approval a host plan records, narrowed to its host", func() {
		text := kubectlExplain("retirementplan.status.hostApproval")
		for _, want := range []string{"narrowed to this host", "recorded once", "Approved condition"} {
			Expect(text).To(ContainSubstring(want))
		}
	})

	It("explains the view of the registrations a fleet plan's host plans plan at", func() {
		text := kubectlExplain("retirementplan.status.registryResourceVersion")
		for _, want := range []string{"exactly this", "one view of the namespace", "compacted"} {
			Expect(text).To(ContainSubstring(want))
		}
	})
})
