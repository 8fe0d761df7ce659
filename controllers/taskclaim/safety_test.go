package taskclaim_test

import (
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

// expectNothingTaken asserts that a refused claim left no lock and no Gitea record behind.
// A claim refused on its re-read has won the lock before it re-read (reserve comes
// first); it gives the lock back before its finalizer goes, so this waits for that first.
func expectNothingTaken(tc *fleetv1alpha1.TaskClaim) {
	GinkgoHelper()
	Eventually(func() []string { return fetch(tc).Finalizers }).Should(BeEmpty(), "the refused claim never finished")
	Expect(holderOf(lease(tc.Namespace, tc.Spec.Target))).NotTo(Equal(string(tc.UID)))
	if rec := readRecord(tc.Spec.Target); rec != nil {
		Expect(rec.ClaimID).NotTo(Equal(string(tc.UID)))
	}
}

var _ = Describe("Claim-safety clauses", Ordered, func() {
	var w, rival *worker
	BeforeAll(func() { w, rival = newWorker(nsMain), newWorker(nsMain) })

	Context("(a) no claim without the validation pin", func() {
		It("waits, holding nothing, while no pin is presented", func() {
			t := issueTarget(newIssue("never pinned"))
			tc := w.claim(t)
			waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
			Consistently(func(g Gomega) {
				cur := &fleetv1alpha1.TaskClaim{}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur)).To(Succeed())
				g.Expect(cur.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseValidated))
				g.Expect(cur.Status.Capability).To(BeNil())
				g.Expect(holderOf(lease(nsMain, t))).To(BeEmpty())
			}).Should(Succeed())
			Expect(readRecord(t)).To(BeNil())
			expectReadiness(fetch(tc), "False", "", fleetv1alpha1.ReasonAwaitingPin)
			expectNeutral(w, t)
		})

		It("refuses a pin other than the one issued", func() {
			t := issueTarget(newIssue("wrong pin"))
			tc := w.claim(t)
			waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
			Expect(updateSpec(w.c, tc, func(c *fleetv1alpha1.TaskClaim) {
				c.Spec.Pin = "sha256:" + strings.Repeat("ab", 32)
			})).To(Succeed())
			expectNothingTaken(expectRefused(tc, refusal{"stale_state", "stale", "pin_mismatch"}))
		})
	})

	Context("(b) everything is re-read inside the claim", func() {
		It("refuses a deliberate time-of-check/time-of-use substitution: the head moved after validation", func() {
			pr := newPull(human, "toctou")
			t := pullTarget(pr)
			tc := w.claim(t)
			v := waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated).Status.Validation
			Expect(v.HeadSHA).To(Equal(pr.HeadSHA))
			validatedHead := pr.HeadSHA
			push(human, &pr) // new content under the validated pull request number
			Expect(pr.HeadSHA).NotTo(Equal(validatedHead))
			w.pin(tc)
			got := expectRefused(tc, refusal{"stale_state", "stale", "head_sha_moved"})
			Expect(got.Status.Result.Outcome).To(Equal(string(claim.OutcomeNotAcquired)))
			expectNothingTaken(got)
			evidence("substitution attempt: head %s -> %s between validation and claim: %s/%s (%s)",
				validatedHead[:8], pr.HeadSHA[:8], got.Status.Result.Class, got.Status.Result.FailedPredicate, got.Status.Result.RuleID)
		})

		It("refuses when the base branch moved after validation", func() {
			t := issueTarget(newIssue("base moves"))
			tc := w.claim(t)
			waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
			moveMain()
			w.pin(tc)
			expectNothingTaken(expectRefused(tc, refusal{"stale_state", "stale", "parity_revision_moved"}))
		})

		It("refuses when a dependency appeared after validation", func() {
			t := issueTarget(newIssue("dependency appears"))
			tc := w.claim(t)
			waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
			Expect(srv.AddDependency(ctx, repo, t.Number, repo, newIssue("late prerequisite"))).To(Succeed())
			w.pin(tc)
			expectNothingTaken(expectRefused(tc, refusal{"stale_state", "stale", "dependency_state_moved"}))
		})

		It("refuses when the role the target confers changed after validation", func() {
			pr := newPull(human, "role moves")
			tc := w.claim(pullTarget(pr))
			Expect(waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated).Status.Validation.Role).To(Equal("reviewer"))
			Expect(srv.Review(ctx, ownerToken, repo, pr.Number, gitea.ReviewStateComment, "Reviewed meanwhile.")).To(Succeed())
			w.pin(tc)
			expectNothingTaken(expectRefused(tc, refusal{"stale_state", "stale", "role_moved"}))
		})

		It("refuses when the worker's capability verdict changed after validation", func() {
			u := newWorker(nsMain)
			t := issueTarget(newIssue("verdict changes"))
			tc := u.claim(t)
			waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
			Expect(k8s.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fleet-worker-" + u.name, Namespace: nsMain}})).To(Succeed())
			Eventually(func() (string, error) {
				return authz.Reviewer{Client: k8s}.Verdict(ctx, nsMain, u.name)
			}).Should(Equal("denied"))
			// The unbound worker can no longer write its claim; an operator presents the pin.
			err := updateSpec(u.c, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Pin = c.Status.Validation.Pin })
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "pinning without the fleet-worker role: %v", err)
			Expect(updateSpec(k8s, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Pin = c.Status.Validation.Pin })).To(Succeed())
			expectNothingTaken(expectRefused(tc, refusal{"stale_state", "stale", "capability_verdict_changed"}))
		})

		It("refuses when the worker was retired after validation", func() {
			r := newWorker(nsMain)
			tc := r.claim(issueTarget(newIssue("worker retires")))
			waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
			retire(r)
			r.pin(tc)
			expectNothingTaken(expectRefused(tc, refusal{"authority", "", "worker_retired"}))
		})
	})

	Context("(c) compare-and-swap against the pinned generation", func() {
		It("loses deterministically when another claim took and released the lock between pin and claim", func() {
			t := issueTarget(newIssue("generation advances"))
			tc := w.claim(t)
			pinned := waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated).Status.Validation
			Expect(pinned.ClaimGeneration).To(Equal(lease(nsMain, t).ResourceVersion), "the pin names the free lock's generation")

			other := rival.activate(t)
			rival.release(other)
			waitPhase(other, fleetv1alpha1.ClaimPhaseReleased)
			l := lease(nsMain, t)
			Expect(l).NotTo(BeNil())
			Expect(holderOf(l)).To(BeEmpty(), "the lock is free again, at a newer generation")

			w.pin(tc)
			got := expectRefused(tc, refusal{"contention", "foreign_claimed", "claim_generation_advanced"})
			Expect(lease(nsMain, t).ResourceVersion).To(Equal(l.ResourceVersion), "the loser wrote nothing")
			expectNothingTaken(got)

			By("a validation at the new generation claims normally")
			again := w.activate(t)
			Expect(again.Status.Validation.ClaimGeneration).To(Equal(l.ResourceVersion))
		})

		It("loses when the lock was bumped directly between pin and claim", func() {
			t := issueTarget(newIssue("lock bumped"))
			tc := w.claim(t)
			waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
			l := lease(nsMain, t)
			Expect(l).NotTo(BeNil(), "the controller made the lock before it validated")
			l.Annotations = map[string]string{"bumped-by": "someone"}
			Expect(k8s.Update(ctx, l)).To(Succeed())
			w.pin(tc)
			expectNothingTaken(expectRefused(tc, refusal{"contention", "foreign_claimed", "claim_generation_advanced"}))
		})
	})

	Context("(d) the claimed target is the validated target", func() {
		It("refuses to change the target of a claim", func() {
			t := issueTarget(newIssue("substitution by edit"))
			tc := w.claim(t)
			waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
			err := updateSpec(w.c, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Target.Number++ })
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "changing spec.target: %v", err)
			Expect(err.Error()).To(ContainSubstring("spec.target is immutable"))
			err = updateSpec(w.c, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Worker = rival.name })
			Expect(err).To(HaveOccurred(), "changing spec.worker")
		})

		It("refuses a pin issued for another target, and keeps that pin valid for its own claim", func() {
			a := w.claim(issueTarget(newIssue("pin source")))
			b := w.claim(issueTarget(newIssue("pin transplant")))
			pinA := waitPhase(a, fleetv1alpha1.ClaimPhaseValidated).Status.Validation.Pin
			waitPhase(b, fleetv1alpha1.ClaimPhaseValidated)
			Expect(updateSpec(w.c, b, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Pin = pinA })).To(Succeed())
			expectNothingTaken(expectRefused(b, refusal{"stale_state", "stale", "pin_mismatch"}))

			w.pin(a)
			waitPhase(a, fleetv1alpha1.ClaimPhaseActive)
			err := updateSpec(w.c, a, func(c *fleetv1alpha1.TaskClaim) {
				c.Spec.Pin = "sha256:" + strings.Repeat("0", 64)
			})
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "re-pinning: %v", err)
			Expect(err.Error()).To(ContainSubstring("spec.pin can be set only once"))
		})
	})

	Context("(e) typed contention and read-only interleaving", func() {
		It("keeps a claim valid across read-only calls between validation and pin", func() {
			t := issueTarget(newIssue("read-only interleaving"))
			tc := w.claim(t)
			validated := waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)

			By("interleaving read-only calls of every kind")
			own, err := giteaclaim.New(srv.URL, w.token, giteaclaim.WithHTTPClient(srv.HTTP))
			Expect(err).NotTo(HaveOccurred())
			for range 3 {
				Expect(w.c.Get(ctx, client.ObjectKeyFromObject(tc), &fleetv1alpha1.TaskClaim{})).To(Succeed())
				Expect(w.c.List(ctx, &fleetv1alpha1.TaskClaimList{}, client.InNamespace(nsMain))).To(Succeed())
				Expect(w.c.List(ctx, &fleetv1alpha1.WorkerRegistrationList{}, client.InNamespace(nsMain))).To(Succeed())
				_, err := own.ReadTarget(ctx, apiconv.Target(t))
				Expect(err).NotTo(HaveOccurred())
				_, _, err = own.Read(ctx, apiconv.Target(t))
				Expect(err).NotTo(HaveOccurred())
				_, err = own.ListTransitions(ctx, apiconv.Target(t))
				Expect(err).NotTo(HaveOccurred())
				Expect(authorize(nsMain, w.name, t, claim.OpPushBranch).Reason).To(Equal(claim.ReasonNoCapability))
			}
			By("and validating (then dropping) another task in between")
			side := w.claim(issueTarget(newIssue("looked at meanwhile")))
			waitPhase(side, fleetv1alpha1.ClaimPhaseValidated)
			w.release(side)
			waitPhase(side, fleetv1alpha1.ClaimPhaseReleased)

			Expect(fetch(tc).ResourceVersion).To(Equal(validated.ResourceVersion), "reads changed nothing")
			w.pin(tc)
			got := waitPhase(tc, fleetv1alpha1.ClaimPhaseActive)
			Expect(got.Status.Capability.Pin).To(Equal(validated.Status.Validation.Pin))
		})

		It("decides a pin that arrives with the claim itself without waiting forever", func() {
			// A worker cannot know the pin before validation, but a pin set at creation must
			// still be decided (here: refused), never left pending.
			t := issueTarget(newIssue("pin at creation"))
			tc := &fleetv1alpha1.TaskClaim{
				ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("tc"), Namespace: nsMain},
				Spec: fleetv1alpha1.TaskClaimSpec{Worker: w.name, Target: t,
					Pin: "sha256:" + strings.Repeat("1", 64)},
			}
			Expect(w.c.Create(ctx, tc)).To(Succeed())
			DeferCleanup(endIfOpen, tc)
			expectRefused(tc, refusal{"stale_state", "stale", "pin_mismatch"})
		})

		It("never retries a refused claim", func() {
			t := issueTarget(newIssue("refused once"))
			tc := w.claim(t)
			waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
			moveMain()
			w.pin(tc)
			got := expectRefused(tc, refusal{"stale_state", "stale", "parity_revision_moved"})
			// Nudge the controller with a spec change; the refusal stays as it is.
			Expect(updateSpec(w.c, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.CycleComplete = true })).To(Succeed())
			Consistently(func(g Gomega) {
				cur := &fleetv1alpha1.TaskClaim{}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur)).To(Succeed())
				g.Expect(cur.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseRejected))
				g.Expect(cur.Status.Result).To(Equal(got.Status.Result))
				g.Expect(cur.Status.ObservedGeneration).To(Equal(got.Status.ObservedGeneration))
			}, 2*time.Second).Should(Succeed())
			Expect(commentCount(t)).To(BeZero(), "a refusal before publication posts nothing in Gitea")
			Expect(eventReasons(tc)).To(ContainElement(fleetv1alpha1.ReasonRejected))
		})
	})
})
