package taskclaim_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// lostPublication is the real Gitea client whose rule-set publication never lands: the
// publisher believes it wrote, and only its read-back can tell.
type lostPublication struct{ taskclaim.RuleFiles }

func (lostPublication) PublishFile(context.Context, string, string, []byte, string) (giteaclaim.FileCommit, error) {
	return giteaclaim.FileCommit{Changed: true, CommitSHA: "lost"}, nil
}

var _ = Describe("The rule set in force", Ordered, func() {
	var w *worker
	BeforeAll(func() { w = newWorker(nsDirect) })

	It("is in the record and in every audit comment of a claim", func() {
		t := issueTarget(newIssue("rule set: in the record"))
		r := directReconciler(gc, k8s, clock.RealClock{})
		tc := validateDirect(r, w, t)
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive), describe(fetch(tc)))
		Expect(readRecord(t).RuleSet).To(Equal(claim.RuleSetDigest()))
		w.release(tc)
		_, err = reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		trs := transitionsOf(tc)
		Expect(eventsOf(trs)).To(Equal([]string{"claimed", "released"}))
		for _, tr := range trs {
			Expect(tr.RuleSet).To(Equal(claim.RuleSetDigest()), "audit comment %d", tr.CommentID)
		}
	})

	It("refuses validations and claims while the published copy differs, until it is published again", func() {
		By("changing the published file behind the controller's back")
		_, err := gc.PublishFile(ctx, repo, claim.RuleSetPath, []byte(`{"tampered": true}`), "Tamper with the rule set")
		Expect(err).NotTo(HaveOccurred())
		// Whatever happens, the shared repository gets its rule set back.
		DeferCleanup(func() { Expect((&taskclaim.RulePublisher{Files: gc, Repository: repo}).Sync(ctx)).To(Succeed()) })
		p := &taskclaim.RulePublisher{Files: lostPublication{gc}, Repository: repo}
		Expect(p.Sync(ctx)).To(MatchError(ContainSubstring("does not have digest")))
		verified, checked := p.Verified()
		Expect(checked).To(BeTrue())
		Expect(verified).To(BeFalse())

		r := directReconciler(gc, k8s, clock.RealClock{})
		r.Rules = p
		refused := w.claim(issueTarget(newIssue("rule set: differs at validation")))
		_, err = reconcileOnce(r, refused)
		Expect(err).NotTo(HaveOccurred())
		got := expectRefused(refused, refusal{"policy", "", "rule_set_unpublished"})
		Expect(got.Status.Validation).To(BeNil(), "nothing was validated under unpublished rules")
		expectNamesOnlyRequested(got)

		By("publishing it again: the next claim is decided")
		p.Files = gc
		Expect(p.Sync(ctx)).To(Succeed())
		verified, _ = p.Verified()
		Expect(verified).To(BeTrue())
		ok := w.claim(issueTarget(newIssue("rule set: published again")))
		_, err = reconcileOnce(r, ok)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(ok).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseValidated), describe(fetch(ok)))
	})

	It("refuses a pinned claim when the rule set stopped being in force after its validation", func() {
		t := issueTarget(newIssue("rule set: differs at claim"))
		p := &taskclaim.RulePublisher{Files: gc, Repository: repo}
		Expect(p.Sync(ctx)).To(Succeed())
		r := directReconciler(gc, k8s, clock.RealClock{})
		r.Rules = p
		tc := validateDirect(r, w, t)

		_, err := gc.PublishFile(ctx, repo, claim.RuleSetPath, []byte(`{"tampered": 2}`), "Tamper with the rule set")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect((&taskclaim.RulePublisher{Files: gc, Repository: repo}).Sync(ctx)).To(Succeed()) })
		p.Files = lostPublication{gc}
		Expect(p.Sync(ctx)).NotTo(Succeed())

		_, err = reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		expectRefused(tc, refusal{"policy", "", "rule_set_unpublished"})
		Expect(readRecord(t)).To(BeNil(), "nothing was published")
		// The validation created the target's lock, free, so its pin names a real
		// generation; the refused claim never took it.
		Expect(holderOf(lease(nsDirect, t))).To(BeEmpty(), "no lock was taken")
	})
})
