package taskclaim_test

import (
	"fmt"
	"sort"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// bringTo moves a fresh pull request into the state that confers role: no review
// (reviewer), a comment review (approver) or an approval (merger), by a human.
func bringTo(pr testgitea.PullRequest, role claim.Role) {
	GinkgoHelper()
	switch role {
	case claim.RoleApprover:
		Expect(srv.Review(ctx, ownerToken, repo, pr.Number, gitea.ReviewStateComment, "Looks plausible.")).To(Succeed())
	case claim.RoleMerger:
		Expect(srv.Review(ctx, ownerToken, repo, pr.Number, gitea.ReviewStateApproved, "")).To(Succeed())
	}
}

var _ = Describe("Identity independence", Ordered, func() {
	var author, pusher, other *worker
	matrix := map[string]string{}
	BeforeAll(func() {
		author, pusher, other = newWorker(nsMain), newWorker(nsMain), newWorker(nsMain)
	})
	AfterAll(func() {
		keys := make([]string, 0, len(matrix))
		for k := range matrix {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			evidence("independence %-28s %s", k, matrix[k])
		}
	})

	for _, role := range []claim.Role{claim.RoleReviewer, claim.RoleApprover, claim.RoleMerger} {
		It(fmt.Sprintf("refuses %s to the identity that authored the pull request and grants it to another", role), func() {
			pr := newPull(author.user(), "authored by a worker, "+string(role))
			bringTo(pr, role)
			t := pullTarget(pr)
			got := expectRefused(author.claim(t), refusal{"authority", "ineligible", "author_independence"})
			matrix["author->"+string(role)] = "refused " + got.Status.Result.FailedPredicate
			expectNeutral(author, t)

			By("a different identity gets the role and its capability")
			tc := other.activate(t)
			Expect(tc.Status.Capability.Role).To(Equal(string(role)))
			matrix["other(author's PR)->"+string(role)] = "allowed, capability " + tc.Status.Capability.Role
			other.release(tc)
			waitPhase(tc, fleetv1alpha1.ClaimPhaseReleased)
		})

		It(fmt.Sprintf("refuses %s to an identity that pushed to the pull request and grants it to another", role), func() {
			pr := newPull(human, "pushed to by a worker, "+string(role))
			push(pusher.user(), &pr)
			bringTo(pr, role)
			t := pullTarget(pr)
			got := expectRefused(pusher.claim(t), refusal{"authority", "ineligible", "pusher_independence"})
			matrix["pusher->"+string(role)] = "refused " + got.Status.Result.FailedPredicate
			expectNeutral(pusher, t)

			tc := other.activate(t)
			Expect(tc.Status.Capability.Role).To(Equal(string(role)))
			matrix["other(pushed PR)->"+string(role)] = "allowed, capability " + tc.Status.Capability.Role
			other.release(tc)
			waitPhase(tc, fleetv1alpha1.ClaimPhaseReleased)
		})
	}

	It("lets the author of an issue work it (the author role has no independence bar)", func() {
		n, err := srv.CreateIssue(ctx, author.token, repo, "filed by a worker", "Body.")
		Expect(err).NotTo(HaveOccurred())
		tc := author.activate(issueTarget(n))
		Expect(tc.Status.Capability.Role).To(Equal(string(claim.RoleAuthor)))
		matrix["issue author->author"] = "allowed"
	})
})
