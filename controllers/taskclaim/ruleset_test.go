package taskclaim_test

import (
	"crypto/sha256"
	"encoding/hex"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
)

var _ = Describe("The published rule set", func() {
	It("is the reviewable file in the repository, and every decision records its digest", func() {
		w := newWorker(nsMain)
		ok := w.claim(issueTarget(newIssue("rule set: validated")))
		waitPhase(ok, fleetv1alpha1.ClaimPhaseValidated)
		expectRefused(newClaim(k8s, nsMain, "nobody-"+suffix, issueTarget(newIssue("rule set: refused"))),
			refusal{"authority", "", "worker_not_registered"})

		By("reading " + claim.RuleSetPath + " from the default branch")
		var published []byte
		Eventually(func() error {
			var err error
			published, err = srv.ReadFile(ctx, repo, "main", claim.RuleSetPath)
			return err
		}).Should(Succeed())
		sum := sha256.Sum256(published)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		Expect(digest).To(Equal(claim.RuleSetDigest()))
		embedded, _ := claim.RuleSet()
		Expect(published).To(Equal(embedded), "the file is published byte for byte")
		rules, err := claim.ParseRules(published)
		Expect(err).NotTo(HaveOccurred())
		Expect(rules.Version).NotTo(BeEmpty())
		evidence("rule set: %s at %s in %s, version %s, %d rules, digest %s", claim.RuleSetPath, "main", repo, rules.Version, len(rules.Rules), digest)

		By("finding that digest in every validation and every result")
		seen := 0
		for _, ns := range []string{nsMain, nsDirect} {
			list := &fleetv1alpha1.TaskClaimList{}
			Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			for _, tc := range list.Items {
				if tc.Status.Validation != nil {
					Expect(tc.Status.Validation.RuleSetDigest).To(Equal(digest), "validation of %s", tc.Name)
				}
				if tc.Status.Result != nil {
					Expect(tc.Status.Result.RuleSetDigest).To(Equal(digest), "result of %s", tc.Name)
					seen++
				}
			}
		}
		Expect(seen).To(BeNumerically(">=", 2))
	})
})
