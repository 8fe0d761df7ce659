package taskclaim_test

import (
	"regexp"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

var pinPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// mainHead is the current head of the repository's base branch (the parity revision).
func mainHead() string {
	GinkgoHelper()
	owner, name := splitRepo(repo)
	br, _, err := srv.Admin(ctx).GetRepoBranch(owner, name, "main")
	Expect(err).NotTo(HaveOccurred())
	return br.Commit.ID
}

var _ = Describe("Validation", Ordered, func() {
	var w *worker
	BeforeAll(func() { w = newWorker(nsMain) })

	// expectValidatedAs waits for a validation and checks the pinned components and that no
	// role or capability exists before the claim.
	expectValidatedAs := func(tc *fleetv1alpha1.TaskClaim, role claim.Role) *fleetv1alpha1.ClaimValidation {
		GinkgoHelper()
		got := waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
		v := got.Status.Validation
		Expect(v).NotTo(BeNil())
		Expect(v.Role).To(Equal(string(role)))
		Expect(v.Operations).To(Equal(claim.OperationsFor(role)))
		Expect(v.Pin).To(MatchRegexp(pinPattern.String()))
		Expect(v.Identity).To(Equal(w.name))
		Expect(v.CapabilityVerdict).To(Equal(claim.VerdictAllowed))
		Expect(v.RepositoryBinding).To(Equal(repo))
		Expect(v.ParityRevision).To(Equal(mainHead()))
		Expect(v.RuleSetDigest).To(Equal(claim.RuleSetDigest()))
		free := lease(tc.Namespace, tc.Spec.Target)
		Expect(free).NotTo(BeNil(), "the controller makes a free lock before it validates")
		Expect(holderOf(free)).To(BeEmpty())
		Expect(v.ClaimGeneration).To(Equal(free.ResourceVersion), "the pin names that lock's generation")
		Expect(v.Target).NotTo(BeNil())
		Expect(*v.Target).To(Equal(tc.Spec.Target), "the validated target is on record")
		Expect(got.Status.Result.Outcome).To(Equal(string(claim.OutcomeValidated)))
		expectReadiness(got, "False", "", fleetv1alpha1.ReasonAwaitingPin)

		By("holding no capability before the pin: validation is not activation")
		Expect(got.Spec.Pin).To(BeEmpty())
		Expect(got.Status.Capability).To(BeNil())
		Expect(got.Status.Role).To(BeEmpty(), "no role is adopted by validation")
		for _, op := range claim.OperationsFor(role) {
			ans := authorize(nsMain, w.name, tc.Spec.Target, op)
			Expect(ans.Allowed).To(BeFalse())
			Expect(ans.Reason).To(Equal(claim.ReasonNoCapability))
		}
		return v
	}

	It("derives author for an open issue", func() {
		tc := w.claim(issueTarget(newIssue("author role")))
		v := expectValidatedAs(tc, claim.RoleAuthor)
		Expect(v.HeadSHA).To(BeEmpty())
	})

	It("derives reviewer for an open pull request without reviews", func() {
		pr := newPull(human, "reviewer role")
		v := expectValidatedAs(w.claim(pullTarget(pr)), claim.RoleReviewer)
		Expect(v.HeadSHA).To(Equal(pr.HeadSHA))
	})

	It("derives approver for a reviewed pull request", func() {
		pr := newPull(human, "approver role")
		Expect(srv.Review(ctx, ownerToken, repo, pr.Number, gitea.ReviewStateComment, "A remark.")).To(Succeed())
		expectValidatedAs(w.claim(pullTarget(pr)), claim.RoleApprover)
	})

	It("derives merger for an approved pull request", func() {
		pr := newPull(human, "merger role")
		Expect(srv.Review(ctx, ownerToken, repo, pr.Number, gitea.ReviewStateApproved, "")).To(Succeed())
		expectValidatedAs(w.claim(pullTarget(pr)), claim.RoleMerger)
	})

	It("refuses a closed issue or pull request as terminal", func() {
		n := newIssue("closed issue")
		Expect(srv.SetState(ctx, repo, n, gitea.StateClosed)).To(Succeed())
		expectRefused(w.claim(issueTarget(n)), refusal{"eligibility", "terminal", "target_terminal"})

		pr := newPull(human, "closed pull request")
		Expect(srv.SetState(ctx, repo, pr.Number, gitea.StateClosed)).To(Succeed())
		expectRefused(w.claim(pullTarget(pr)), refusal{"eligibility", "terminal", "target_terminal"})
	})

	It("ignores any role a worker tries to ask for", func() {
		n := newIssue("worker asks for a role")
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": fleetv1alpha1.GroupVersion.String(), "kind": "TaskClaim",
			"metadata": map[string]any{"name": testenv.Uniq("tc"), "namespace": nsMain},
			"spec": map[string]any{"worker": w.name, "role": "merger", "operations": []any{"merge"},
				"target": map[string]any{"repository": repo, "kind": "Issue", "number": n}},
		}}
		if err := w.c.Create(ctx, u); err != nil {
			// Strict field validation refuses the unknown fields outright: equally fine.
			Expect(err.Error()).To(ContainSubstring("unknown field"))
			return
		}
		tc := &fleetv1alpha1.TaskClaim{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), tc)).To(Succeed())
		DeferCleanup(endIfOpen, tc)
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(fleetv1alpha1.GroupVersion.WithKind("TaskClaim"))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(u), stored)).To(Succeed())
		Expect(stored.Object["spec"]).NotTo(HaveKey("role"), "the API does not even store a requested role")
		expectValidatedAs(tc, claim.RoleAuthor)
	})
})
