package taskclaim_test

import (
	"fmt"
	"sync"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// expectWorkDone waits for an active claim to end Completed because its identity's own
// work landed: endedReason work_done, no capability (neutral again), the Gitea record
// completed, the lock freed, and the trail claimed → activated → completed (never
// revoked).
func expectWorkDone(w *worker, tc *fleetv1alpha1.TaskClaim) {
	GinkgoHelper()
	got := waitPhase(tc, fleetv1alpha1.ClaimPhaseCompleted)
	Expect(got.Status.EndedReason).To(Equal(string(claim.ExpiryWorkDone)))
	Expect(got.Status.Capability).To(BeNil())
	expectReadiness(got, "True", "", fleetv1alpha1.ClaimPhaseCompleted)
	expectNeutral(w, tc.Spec.Target)
	rec := readRecord(tc.Spec.Target)
	Expect(rec).NotTo(BeNil())
	Expect(rec.ClaimID).To(Equal(string(tc.UID)))
	Expect(rec.State).To(Equal(claim.RecordStateCompleted))
	Expect(holderOf(lease(tc.Namespace, tc.Spec.Target))).To(BeEmpty())
	Expect(eventsOf(transitionsOf(got))).To(Equal([]string{"claimed", "completed"}))
}

// commitAs pushes one commit to the pull request's branch through pusher's account, with
// the given message and, when who is set, that author and committer; it waits for the new
// head.
func commitAs(pusher gitUser, pr *testgitea.PullRequest, message string, who *gitea.Identity) {
	GinkgoHelper()
	sha, err := srv.Commit(ctx, pusher.token, repo, pr.Branch, pr.Branch+"/"+testgitea.RandomHex(3)+".txt", "content\n", message, who)
	Expect(err).NotTo(HaveOccurred())
	waitHead(pr.Number, sha)
	pr.HeadSHA = sha
}

func email(login string) string { return login + "@example.invalid" }

var _ = Describe("Completion: the bound identity's own work ends the claim Completed", func() {
	It("completes a reviewer's claim when it submits its review (not revoked as the role moves on)", func() {
		w := newWorker(nsMain)
		pr := newPull(human, "reviewed by the claim holder")
		tc := w.activate(pullTarget(pr))
		Expect(tc.Status.Capability.Role).To(Equal(string(claim.RoleReviewer)))
		Expect(srv.Review(ctx, w.token, repo, pr.Number, gitea.ReviewStateComment, "Reviewed.")).To(Succeed())
		expectWorkDone(w, tc)
	})

	It("completes an approver's claim when it approves", func() {
		w := newWorker(nsMain)
		pr := newPull(human, "approved by the claim holder")
		bringTo(pr, claim.RoleApprover)
		tc := w.activate(pullTarget(pr))
		Expect(tc.Status.Capability.Role).To(Equal(string(claim.RoleApprover)))
		Expect(srv.Review(ctx, w.token, repo, pr.Number, gitea.ReviewStateApproved, "")).To(Succeed())
		expectWorkDone(w, tc)
	})

	It("completes a merger's claim when it merges (not revoked as the base moves and the pull request closes)", func() {
		w := newWorker(nsMain)
		pr := newPull(human, "merged by the claim holder")
		bringTo(pr, claim.RoleMerger)
		tc := w.activate(pullTarget(pr))
		Expect(tc.Status.Capability.Role).To(Equal(string(claim.RoleMerger)))
		Eventually(func() error { return srv.Merge(ctx, w.token, repo, pr.Number) }).Should(Succeed(),
			"Gitea checks mergeability asynchronously")
		expectWorkDone(w, tc)
	})

	It("completes an author's claim when it opens a pull request referencing the issue", func() {
		w := newWorker(nsMain)
		n := newIssue("fixed by the claim holder")
		tc := w.activate(issueTarget(n))
		Expect(tc.Status.Capability.Role).To(Equal(string(claim.RoleAuthor)))

		By("a pull request by someone else that references the issue is not this claim's work")
		_, err := srv.CreatePullWithBody(ctx, human.token, repo, "someone else's fix", "Fixes #"+itoa(n)+"\n")
		Expect(err).NotTo(HaveOccurred())
		Consistently(func() string { return fetch(tc).Status.Phase }).Should(Equal(fleetv1alpha1.ClaimPhaseActive))

		_, err = srv.CreatePullWithBody(ctx, w.token, repo, "the fix", "Fixes #"+itoa(n)+"\n")
		Expect(err).NotTo(HaveOccurred())
		expectWorkDone(w, tc)
	})

	It("still revokes when someone else does the work (failed validation)", func() {
		w := newWorker(nsMain)
		pr := newPull(human, "reviewed by someone else")
		tc := w.activate(pullTarget(pr))
		Expect(srv.Review(ctx, ownerToken, repo, pr.Number, gitea.ReviewStateComment, "Beat you to it.")).To(Succeed())
		got := waitPhase(tc, fleetv1alpha1.ClaimPhaseRevoked)
		Expect(got.Status.EndedReason).To(Equal(string(claim.TriggerFailedValidation)))
	})
})

var _ = Describe("Independence escape attempts", func() {
	It("refuses review of a pull request with a commit whose e-mail maps to no account", func() {
		w := newWorker(nsMain)
		pr := newPull(human, "forged e-mail")
		commitAs(human, &pr, "Nobody wrote this", &gitea.Identity{Name: "nobody", Email: "nobody-" + testgitea.RandomHex(3) + "@forged.invalid"})
		expectRefused(w.claim(pullTarget(pr)), refusal{"authority", "ineligible", "independence_unprovable"})
		expectNeutral(w, pullTarget(pr))
	})

	It("refuses review to an identity named in a Co-authored-by trailer", func() {
		w := newWorker(nsMain)
		pr := newPull(human, "co-authored")
		commitAs(human, &pr, "Pair work\n\nCo-authored-by: A Worker <"+email(w.identity)+">\n", nil)
		expectRefused(w.claim(pullTarget(pr)), refusal{"authority", "ineligible", "pusher_independence"})
	})

	It("refuses review to the account that pushed commits authored by another (Gitea's push record)", func() {
		w := newWorker(nsMain)
		pr := newPull(human, "pushed under another name")
		as := &gitea.Identity{Name: human.login, Email: email(human.login)}
		commitAs(w.user(), &pr, "Looks like the human's work", as)
		// Gitea moves the head a moment before it writes its push record; the record is
		// what names the pusher here (the commit names only the human).
		Eventually(func() ([]string, error) {
			st, err := gc.ReadTarget(ctx, apiconv.Target(pullTarget(pr)))
			return st.Pushers, err
		}).Should(ContainElement(w.identity), "Gitea never recorded the push")
		expectRefused(w.claim(pullTarget(pr)), refusal{"authority", "ineligible", "pusher_independence"})

		By("the same commits by the human's own account leave a third identity free to review")
		other := newWorker(nsMain)
		pr2 := newPull(human, "really the human's work")
		commitAs(human, &pr2, "The human's own work", as)
		tc := other.activate(pullTarget(pr2))
		other.release(tc)
		waitPhase(tc, fleetv1alpha1.ClaimPhaseReleased)
	})

	It("keeps one identity from reviewing, then approving, then merging one pull request", func() {
		w, approver := newWorker(nsMain), newWorker(nsMain)
		pr := newPull(human, "one identity, three roles")
		t := pullTarget(pr)
		rev := w.activate(t)
		Expect(srv.Review(ctx, w.token, repo, pr.Number, gitea.ReviewStateComment, "Reviewed.")).To(Succeed())
		expectWorkDone(w, rev)

		By("the reviewer asks for the approver role")
		expectRefused(w.claim(t), refusal{"authority", "ineligible", "role_independence"})

		By("a distinct identity approves")
		app := approver.activate(t)
		Expect(app.Status.Capability.Role).To(Equal(string(claim.RoleApprover)))
		Expect(srv.Review(ctx, approver.token, repo, pr.Number, gitea.ReviewStateApproved, "")).To(Succeed())
		expectWorkDone(approver, app)

		By("neither the reviewer nor the approver may merge")
		expectRefused(w.claim(t), refusal{"authority", "ineligible", "role_independence"})
		expectRefused(approver.claim(t), refusal{"authority", "ineligible", "role_independence"})
	})

	It("gives a second registration of the same identity nothing the first lacks", func() {
		first := newWorker(nsMain)
		second := newWorker(nsMain, sameIdentityAs(first))
		Expect(second.name).NotTo(Equal(first.name))

		By("pushing as the identity bars both registrations")
		pr := newPull(human, "pushed by a shared identity")
		push(first.user(), &pr)
		expectRefused(second.claim(pullTarget(pr)), refusal{"authority", "ineligible", "pusher_independence"})

		By("reviewing as the identity bars both from the next role")
		pr2 := newPull(human, "reviewed by a shared identity")
		rev := first.activate(pullTarget(pr2))
		Expect(srv.Review(ctx, first.token, repo, pr2.Number, gitea.ReviewStateComment, "Reviewed.")).To(Succeed())
		expectWorkDone(first, rev)
		expectRefused(second.claim(pullTarget(pr2)), refusal{"authority", "ineligible", "role_independence"})

		By("a claim held through one registration is held by the identity")
		held := first.activate(issueTarget(newIssue("held by a shared identity")))
		expectRefused(second.claim(issueTarget(newIssue("wanted by the same identity"))), refusal{"policy", "", "worker_holds_claim"})
		first.release(held)
		waitPhase(held, fleetv1alpha1.ClaimPhaseReleased)
	})
})

var _ = Describe("Revocation and limits", func() {
	It("revokes an active claim when the worker's capability verdict is lost (failed validation)", func() {
		w := newWorker(nsMain)
		t := issueTarget(newIssue("verdict withdrawn"))
		tc := w.activate(t)
		Expect(k8s.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fleet-worker-" + w.name, Namespace: w.ns}})).To(Succeed())
		got := waitPhase(tc, fleetv1alpha1.ClaimPhaseRevoked)
		Expect(got.Status.EndedReason).To(Equal(string(claim.TriggerFailedValidation)))
		Expect(got.Status.Capability).To(BeNil())
		expectNeutral(w, t)
		rec := readRecord(t)
		Expect(rec).NotTo(BeNil())
		Expect(rec.State).To(Equal(claim.RecordStateRevoked))
		Expect(holderOf(lease(tc.Namespace, t))).To(BeEmpty())
		Expect(eventsOf(transitionsOf(got))).To(Equal([]string{"claimed", "revoked/failed_validation"}))
	})

	It("refuses a worker's claims beyond its limit of open claims without reading Gitea, and takes new ones once it gives back", func() {
		w := newWorker(nsMain)
		t := issueTarget(newIssue("wanted by a flood of claims"))
		By("a worker creates twelve claims on one issue, one after another")
		prefix := testenv.Uniq("flood")
		var flood []*fleetv1alpha1.TaskClaim
		for i := range 12 {
			tc := &fleetv1alpha1.TaskClaim{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%02d", prefix, i), Namespace: w.ns},
				Spec:       fleetv1alpha1.TaskClaimSpec{Worker: w.name, Target: t},
			}
			Expect(w.c.Create(ctx, tc)).To(Succeed())
			DeferCleanup(endIfOpen, tc)
			flood = append(flood, tc)
		}
		By("the first four are validated; the other eight are refused worker_claim_limit, unvalidated")
		for _, tc := range flood[:claim.DefaultMaxOpenClaims] {
			Expect(waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated).Status.Validation).NotTo(BeNil())
		}
		for _, tc := range flood[claim.DefaultMaxOpenClaims:] {
			got := expectRefused(tc, refusal{"policy", "", "worker_claim_limit"})
			Expect(got.Status.Result.RuleID).To(Equal("TC014"))
			Expect(got.Status.Validation).To(BeNil(), "a claim beyond the limit was validated: %s", describe(got))
			expectNothingTaken(got)
		}
		By("once the worker gives back the open ones, its next claim is validated")
		for _, tc := range flood[:claim.DefaultMaxOpenClaims] {
			Expect(updateSpec(w.c, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Release = true })).To(Succeed())
			waitPhase(tc, fleetv1alpha1.ClaimPhaseReleased)
		}
		next := w.claim(t)
		Expect(waitPhase(next, fleetv1alpha1.ClaimPhaseValidated).Status.Validation).NotTo(BeNil())
	})

	It("finds a claim held by the identity in another namespace, spelled in another case", func() {
		first := newWorker(nsMain)
		held := first.activate(issueTarget(newIssue("held in one namespace")))
		key := claim.IdentityKey(first.identity)
		Expect(fetch(held).Status.IdentityKey).To(Equal(key))

		By("the held claim is selected by its identity key in every namespace")
		list := &fleetv1alpha1.TaskClaimList{}
		Expect(k8s.List(ctx, list, client.MatchingFields{"status.identityKey": key})).To(Succeed())
		Expect(list.Items).To(ContainElement(HaveField("UID", held.UID)))

		By("a registration of the same identity in upper case, in another namespace, is refused")
		second := newWorker(nsDirect, sameIdentityAs(first), upperCaseIdentity())
		Expect(second.identity).NotTo(Equal(first.identity))
		tc := second.claim(issueTarget(newIssue("wanted in another namespace")))
		_, err := reconcileOnce(directReconciler(gc, k8s, clock.RealClock{}), tc)
		Expect(err).NotTo(HaveOccurred())
		got := fetch(tc)
		Expect(got.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseRejected), describe(got))
		Expect(got.Status.Result.FailedPredicate).To(Equal("worker_holds_claim"))

		first.release(held)
		waitPhase(held, fleetv1alpha1.ClaimPhaseReleased)
	})

	It("lets at most one of two claims of one worker, pinned at the same instant, become active", func() {
		w := newWorker(nsMain)
		for round := range 4 {
			claims := []*fleetv1alpha1.TaskClaim{
				w.claim(issueTarget(newIssue(fmt.Sprintf("first of a pair, round %d", round)))),
				w.claim(issueTarget(newIssue(fmt.Sprintf("second of a pair, round %d", round)))),
			}
			pins := make([]string, len(claims))
			for i, tc := range claims {
				pins[i] = waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated).Status.Validation.Pin
			}
			start := make(chan struct{})
			errs := make([]error, len(claims))
			var wg sync.WaitGroup
			for i, tc := range claims {
				wg.Go(func() {
					<-start
					errs[i] = updateSpec(w.c, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Pin = pins[i] })
				})
			}
			close(start)
			wg.Wait()
			Expect(errs).To(HaveEach(Not(HaveOccurred())))
			active := 0
			for _, tc := range claims {
				Eventually(func() string { return fetch(tc).Status.Phase }).Should(
					BeElementOf(fleetv1alpha1.ClaimPhaseActive, fleetv1alpha1.ClaimPhaseRejected), "round %d", round)
				if got := fetch(tc); got.Status.Phase == fleetv1alpha1.ClaimPhaseActive {
					active++
				} else {
					Expect(got.Status.Result.FailedPredicate).To(Equal("worker_holds_claim"), "round %d: %s", round, describe(got))
					expectNothingTaken(got)
				}
			}
			Expect(active).To(BeNumerically("<=", 1), "round %d: both claims of one worker became active", round)
			for _, tc := range claims {
				if fetch(tc).Status.Phase == fleetv1alpha1.ClaimPhaseActive {
					w.release(tc)
					waitPhase(tc, fleetv1alpha1.ClaimPhaseReleased)
				}
			}
		}
	})

	It("refuses a second claim while the worker holds one, naming no other task", func() {
		w := newWorker(nsMain)
		first := issueTarget(newIssue("the one claim"))
		held := w.activate(first)
		second := newIssue("a second claim")
		got := expectRefused(w.claim(issueTarget(second)), refusal{"policy", "", "worker_holds_claim"})
		Expect(got.Status.Result.Message).NotTo(ContainSubstring(itoa(first.Number)))
		Expect(fetch(held).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive), "the held claim is untouched")

		By("once the first is given back, a new claim may be made")
		w.release(held)
		waitPhase(held, fleetv1alpha1.ClaimPhaseReleased)
		next := w.activate(issueTarget(second))
		w.release(next)
		waitPhase(next, fleetv1alpha1.ClaimPhaseReleased)
	})
})
