package cli_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/cli"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

var _ = Describe("claim, release, complete and token", func() {
	It("follows the claim through a watch: it returns as soon as the claim is decided, not at the next re-read", func() {
		ns := newNamespace()
		w := register(ns, newLogin("watch"), startChild())
		n := newIssue("watched")
		// A re-read only every ten minutes: validation and activation are two waits, so a
		// claim that returns within the deadline below saw both through the watch.
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		start := time.Now()
		r := fleetPolling(wctx, kubeconfig, ns, workerEnv(w), 10*time.Minute, append(asWorker(ns, w), "claim", "issue", strconv.FormatInt(n, 10))...)
		Expect(r.code).To(Equal(cli.ExitOK), "%s", r)
		Expect(time.Since(start)).To(BeNumerically("<", time.Minute), "the claim waited for a re-read")
		r = fleetPolling(wctx, kubeconfig, ns, workerEnv(w), 10*time.Minute, append(asWorker(ns, w), "--worker", w, "release")...)
		Expect(r.code).To(Equal(cli.ExitOK), "%s", r)
		Expect(time.Since(start)).To(BeNumerically("<", time.Minute), "the release waited for a re-read")
	})

	It("lets one of two racing workers win an issue; the other gets the typed contention refusal and its exit code", func() {
		ns := newNamespace()
		a := register(ns, newLogin("a"), startChild())
		b := register(ns, newLogin("b"), startChild())
		n := newIssue("race")

		var wg sync.WaitGroup
		results := map[string]result{}
		var mu sync.Mutex
		for _, w := range []string{a, b} {
			wg.Go(func() {
				defer GinkgoRecover()
				r := fleetCmd(ctx, ns, workerEnv(w), append(asWorker(ns, w), "claim", "issue", strconv.FormatInt(n, 10))...)
				mu.Lock()
				results[w] = r
				mu.Unlock()
			})
		}
		wg.Wait()
		codes := []int{results[a].code, results[b].code}
		sort.Ints(codes)
		Expect(codes).To(Equal([]int{cli.ExitOK, cli.ExitContention}), "a: %s\nb: %s", results[a], results[b])
		winner, loser := a, b
		if results[a].code != cli.ExitOK {
			winner, loser = b, a
		}
		Expect(results[winner].stdout).To(ContainSubstring("author"))
		Expect(results[winner].stdout).To(ContainSubstring("push_branch,open_pull_request"))
		Expect(results[winner].stdout).To(ContainSubstring(repo + "#" + strconv.FormatInt(n, 10)))
		Expect(results[winner].stderr).To(BeEmpty(), "waits are quiet when stdout is not a terminal")
		Expect(results[loser].stdout).To(BeEmpty())
		Expect(results[loser].stderr).To(ContainSubstring("refused (contention, foreign_claimed)"))
		Expect(results[loser].stderr).To(ContainSubstring("losing a race is normal"))
		Expect(results[loser].stderr).NotTo(ContainSubstring(winner), "a refusal names no other worker")

		By("refusing the winner's second claim while it holds one (policy)")
		other := newIssue("second")
		r := fleetCmd(ctx, ns, workerEnv(winner), append(asWorker(ns, winner), "claim", "issue", strconv.FormatInt(other, 10))...)
		Expect(r.code).To(Equal(cli.ExitPolicy), "%s", r)
		Expect(r.stderr).To(ContainSubstring("worker_holds_claim"))

		By("releasing the winner's claim")
		r = fleet(ns, append(asWorker(ns, winner), "--worker", winner, "release")...)
		Expect(r.stdout).To(MatchRegexp(`claim \S+ released \(release\)`))
		for _, tc := range claimsOf(ns) {
			if tc.Spec.Worker == winner && tc.Spec.Target.Number == n {
				Expect(tc.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseReleased))
				Expect(meta.IsStatusConditionTrue(tc.Status.Conditions, fleetv1alpha1.RecordClearedCondition)).To(BeTrue(),
					"release returns once the Gitea record is cleared: %v", tc.Status.Conditions)
			}
		}
		By("the target is free the moment release returns: the other worker claims it at once")
		r = fleetCmd(ctx, ns, workerEnv(loser), append(asWorker(ns, loser), "claim", "issue", strconv.FormatInt(n, 10))...)
		Expect(r.code).To(Equal(cli.ExitOK), "%s", r)
		Expect(r.stdout).To(ContainSubstring(repo + "#" + strconv.FormatInt(n, 10)))
		r = fleetCmd(ctx, ns, workerEnv(winner), "release")
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("has no open claim"))

		By("completing a fresh claim as JSON")
		r = fleet(ns, append(asWorker(ns, winner), "--worker", winner, "claim", "issue", strconv.FormatInt(other, 10), "-o", "json")...)
		var tc fleetv1alpha1.TaskClaim
		Expect(json.Unmarshal([]byte(r.stdout), &tc)).To(Succeed())
		Expect(tc.Status.Capability.Role).To(Equal("author"))
		r = fleet(ns, append(asWorker(ns, winner), "--worker", winner, "complete", tc.Name, "-o", "jsonpath={.status.phase}")...)
		Expect(r.stdout).To(Equal(fleetv1alpha1.ClaimPhaseCompleted))
	})

	It("does not report a release done while the controller cannot clear the Gitea record, and frees the target once it can", func() {
		ns := newNamespace()
		a := register(ns, newLogin("a"), startChild())
		b := register(ns, newLogin("b"), startChild())
		n := strconv.FormatInt(newIssue("clear"), 10)
		r := fleetCmd(ctx, ns, workerEnv(a), append(asWorker(ns, a), "claim", "issue", n)...)
		Expect(r.code).To(Equal(cli.ExitOK), "%s", r)

		By("Gitea unreachable for the controller: release waits, and gives up without claiming success")
		giteaDown.Store(true)
		DeferCleanup(func() { giteaDown.Store(false) })
		r = fleetCmd(ctx, ns, workerEnv(a), append(asWorker(ns, a), "--worker", a, "release", "--timeout", "8s")...)
		Expect(r.code).To(Equal(cli.ExitTimeout), "%s", r)
		Expect(r.stdout).NotTo(ContainSubstring("released"), "%s", r)
		GinkgoWriter.Printf("release while Gitea is down: %s\n", r.stderr)
		var held *fleetv1alpha1.TaskClaim
		for _, tc := range claimsOf(ns) {
			if tc.Spec.Worker == a {
				held = &tc
			}
		}
		Expect(held).NotTo(BeNil())
		Expect(meta.IsStatusConditionTrue(held.Status.Conditions, fleetv1alpha1.RecordClearedCondition)).To(BeFalse(),
			"the record cannot have been cleared: %v", held.Status.Conditions)

		By("Gitea back: the record is cleared, and the other worker claims the target")
		giteaDown.Store(false)
		Eventually(func(g Gomega) {
			for _, tc := range claimsOf(ns) {
				if tc.Spec.Worker == a {
					g.Expect(meta.IsStatusConditionTrue(tc.Status.Conditions, fleetv1alpha1.RecordClearedCondition)).To(BeTrue(), "%v", tc.Status.Conditions)
				}
			}
		}, 3*time.Minute, time.Second).Should(Succeed())
		r = fleetCmd(ctx, ns, workerEnv(b), append(asWorker(ns, b), "claim", "issue", n)...)
		Expect(r.code).To(Equal(cli.ExitOK), "%s", r)
	})

	It("completes a claim its own work already ended, and says why a worker has no open claim", func() {
		ns := newNamespace()
		login := testenv.Uniq("rv") + "-" + suffix
		token, err := srv.CreateUser(ctx, login)
		Expect(err).NotTo(HaveOccurred())
		Expect(srv.AddCollaborator(ctx, repo, login)).To(Succeed())
		w := register(ns, login, startChild())
		env := workerEnv(w)
		pr, err := srv.CreatePull(ctx, ownerToken, repo, "reviewed, then completed")
		Expect(err).NotTo(HaveOccurred())
		r := fleetCmd(ctx, ns, env, append(asWorker(ns, w), "claim", "pr", strconv.FormatInt(pr.Number, 10))...)
		Expect(r.code).To(Equal(cli.ExitOK), "%s", r)
		Expect(r.stdout).To(ContainSubstring("reviewer"))

		By("the review lands (straight in Gitea here; through the gateway the claim ends before its answer), and the claim ends Completed")
		Expect(srv.Review(ctx, token, repo, pr.Number, gitea.ReviewStateComment, "Reviewed.")).To(Succeed())
		Eventually(func(g Gomega) {
			all := claimsOf(ns)
			g.Expect(all).To(HaveLen(1))
			g.Expect(all[0].Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseCompleted))
		}).Should(Succeed())

		By("complete then reports the finished cycle instead of an error")
		r = fleetCmd(ctx, ns, env, append(asWorker(ns, w), "complete")...)
		Expect(r.code).To(Equal(cli.ExitOK), "%s", r)
		Expect(r.stdout).To(MatchRegexp(`claim \S+ completed \(work_done\)`))

		By("release has nothing to give back, and says what became of the newest claim")
		r = fleetCmd(ctx, ns, env, append(asWorker(ns, w), "release")...)
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(SatisfyAll(ContainSubstring("has no open claim (its newest, "), ContainSubstring("is Completed: work_done)")))
	})

	It("exits with the code of each refusal class the controller gives", func() {
		ns := newNamespace()
		w := register(ns, newLogin("w"), startChild())
		env := workerEnv(w)
		claimAs := func(args ...string) result {
			return fleetCmd(ctx, ns, env, append(asWorker(ns, w), append([]string{"claim"}, args...)...)...)
		}

		By("eligibility: a closed issue")
		closed := newIssue("closed")
		Expect(srv.SetState(ctx, repo, closed, gitea.StateClosed)).To(Succeed())
		r := claimAs("issue", strconv.FormatInt(closed, 10))
		Expect(r.code).To(Equal(cli.ExitEligibility), "%s", r)
		Expect(r.stderr).To(ContainSubstring("(eligibility, terminal)"))

		By("stale_state: a pull request at a head it no longer has")
		pr, err := srv.CreatePull(ctx, ownerToken, repo, "moving head")
		Expect(err).NotTo(HaveOccurred())
		old := pr.HeadSHA
		_, err = srv.CommitFile(ctx, ownerToken, repo, pr.Branch, "", pr.Branch+"/more.txt", "more\n")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (string, error) { return srv.PullHead(ctx, repo, pr.Number) }).ShouldNot(Equal(old))
		r = claimAs("pr", strconv.FormatInt(pr.Number, 10), "--head", old)
		Expect(r.code).To(Equal(cli.ExitStaleState), "%s", r)
		Expect(r.stderr).To(ContainSubstring("head_sha_mismatch"))

		By("the current head, looked up in Gitea, makes the same pull request claimable (reviewer)")
		r = claimAs("pr", strconv.FormatInt(pr.Number, 10), "-o", "wide")
		Expect(r.code).To(Equal(cli.ExitOK), "%s", r)
		Expect(r.stdout).To(ContainSubstring("reviewer"))
		Expect(r.stdout).To(ContainSubstring("LEASE"))
		fleet(ns, append(asWorker(ns, w), "--worker", w, "release")...)

		By("authority: a worker without the fleet-worker role")
		bare := register(ns, newLogin("bare"), startChild(), "--service-account=false")
		r = fleetCmd(ctx, ns, workerEnv(bare), "claim", "issue", strconv.FormatInt(newIssue("authority"), 10))
		Expect(r.code).To(Equal(cli.ExitAuthority), "%s", r)
		Expect(r.stderr).To(ContainSubstring("capability_denied"))

		By("bad input: an unknown pull request, or an issue claimed as one, creates no claim")
		before := len(claimsOf(ns))
		r = claimAs("pr", "99999")
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("#99999 does not exist"))
		r = claimAs("pr", strconv.FormatInt(closed, 10))
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("is an issue, not a pull request"))
		r = fleetCmd(ctx, ns, nil, "claim", "issue", "1", "--worker", "nobody")
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("no WorkerRegistration"))
		Expect(claimsOf(ns)).To(HaveLen(before), "bad input changed nothing")

		By("a wait that times out gives the claim back")
		r = claimAs("issue", strconv.FormatInt(newIssue("timeout"), 10), "--timeout", "1ms")
		Expect(r.code).To(Equal(cli.ExitTimeout), "%s", r)
		Expect(r.stderr).To(ContainSubstring("the claim was given back"))
		Eventually(func(g Gomega) {
			var open []string
			for _, tc := range claimsOf(ns) {
				if tc.Spec.Worker == w && tc.Status.Phase != fleetv1alpha1.ClaimPhaseRejected && tc.Status.Phase != fleetv1alpha1.ClaimPhaseReleased {
					open = append(open, tc.Name+"="+tc.Status.Phase)
				}
			}
			g.Expect(open).To(BeEmpty())
		}).Should(Succeed())
	})

	It("prints a gateway token of the worker's ServiceAccount for the gateway's audience", func() {
		ns := newNamespace()
		w := register(ns, newLogin("t"), startChild())
		r := fleet(ns, "token", "--worker", w)
		parts := strings.Split(strings.TrimSpace(r.stdout), ".")
		Expect(parts).To(HaveLen(3), "a JWT")
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		Expect(err).NotTo(HaveOccurred())
		var claims struct {
			Aud []string `json:"aud"`
			Sub string   `json:"sub"`
		}
		Expect(json.Unmarshal(payload, &claims)).To(Succeed())
		Expect(claims.Aud).To(Equal([]string{cli.GatewayAudience}))
		Expect(claims.Sub).To(Equal("system:serviceaccount:" + ns + ":" + w))

		r = fleetCmd(ctx, ns, nil, "token", "--worker", "nobody")
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("no ServiceAccount"))
	})
})
