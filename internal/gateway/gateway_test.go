package gateway_test

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/capability"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

var _ = Describe("Workers without the gateway", func() {
	It("cannot write to Gitea with their own token, which can only read", func() {
		w := newWorker(nsMain)
		n := newIssue("direct write")
		p, body := comment(n)
		a := do(srv.URL, http.MethodPost, p, "token "+w.readToken, body)
		Expect(a.status).To(Equal(http.StatusForbidden), "Gitea must refuse a write with the read-only token: %s", a.body)
		Expect(do(srv.URL, http.MethodGet, apiPath("/issues/%d", n), "token "+w.readToken, nil).status).To(Equal(http.StatusOK),
			"the same token reads")
		Expect(commentCount(n)).To(BeZero())
	})
})

var _ = Describe("Reads through the gateway", func() {
	It("pass for any registered worker, for the canonical repository only", func() {
		w := newWorker(nsMain)
		n := newIssue("neutral read")
		a := w.via(http.MethodGet, apiPath("/issues/%d", n), nil)
		Expect(a.status).To(Equal(http.StatusOK), "%s", a.body)
		Expect(string(a.body)).To(ContainSubstring("neutral read"))
		Expect(w.via(http.MethodGet, "/api/v1/user", nil).status).To(Equal(http.StatusOK))
		expectRefused(w.via(http.MethodGet, "/api/v1/repos/"+otherRepo, nil), claim.ReasonWrongRepository)
		expectRefused(w.via(http.MethodGet, "/api/v1/repos/search", nil), claim.ReasonRouteNotPermitted)
		expectRefused(w.via(http.MethodDelete, "/api/v1/repos/"+repo, nil), claim.ReasonRouteNotPermitted)
	})
})

var _ = Describe("Comments through the gateway", func() {
	It("are forwarded for the claim's winner on its target only, as its own Gitea identity", func() {
		winner, loser := newWorker(nsMain), newWorker(nsMain)
		n, other := newIssue("contended"), newIssue("someone else's")
		t := issueTarget(n)
		tc := winner.activate(t)
		lost := loser.claim(t)
		waitPhase(lost, fleetv1alpha1.ClaimPhaseRejected)

		By("the winner comments on its issue: 201, authored by its identity")
		p, body := comment(n)
		a := winner.via(http.MethodPost, p, body)
		Expect(a.status).To(Equal(http.StatusCreated), "%s", a.body)
		Expect(author(a)).To(Equal(winner.identity))
		Eventually(func() []string { return eventNotes("TaskClaim", nsMain, tc.Name) }).Should(
			ContainElement(SatisfyAll(HavePrefix(gateway.ReasonForwarded), ContainSubstring("answered 201"))))

		By("the winner comments on another issue: wrong_target")
		p, body = comment(other)
		expectRefused(winner.via(http.MethodPost, p, body), claim.ReasonWrongTarget)
		Expect(commentCount(other)).To(BeZero())
		Eventually(func() []string { return eventNotes("TaskClaim", nsMain, tc.Name) }).Should(
			ContainElement(SatisfyAll(HavePrefix(gateway.ReasonRefused), ContainSubstring(claim.ReasonWrongTarget))))

		By("the loser comments: no_capability, naming neither the winner nor its claim")
		before := commentCount(n)
		p, body = comment(n)
		expectRefused(loser.via(http.MethodPost, p, body), claim.ReasonNoCapability, winner.name, tc.Name)
		Eventually(func() []string { return eventNotes("WorkerRegistration", nsMain, loser.name) }).Should(
			ContainElement(SatisfyAll(HavePrefix(gateway.ReasonRefused), ContainSubstring(claim.ReasonNoCapability))))

		By("neither can close the issue: no role may, and the refusal says what closes it")
		closing := loser.via(http.MethodPatch, apiPath("/issues/%d", n), map[string]string{"state": "closed"})
		expectRefused(closing, claim.ReasonEditIssueNotPermitted, winner.name, tc.Name)
		Expect(closing.refusal.Message).To(ContainSubstring("Fixes #N"))
		expectRefused(winner.via(http.MethodPatch, apiPath("/issues/%d", n), map[string]string{"state": "closed"}), claim.ReasonEditIssueNotPermitted)

		By("refusals never write to Gitea")
		Expect(commentCount(n)).To(Equal(before))

		By("after release: no_capability as soon as the claim is no longer Active")
		Expect(winner.update(tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Release = true })).To(Succeed())
		Eventually(func() string { return phaseOf(tc) }).ShouldNot(Equal(fleetv1alpha1.ClaimPhaseActive))
		p, body = comment(n)
		expectRefused(winner.via(http.MethodPost, p, body), claim.ReasonNoCapability)
	})

	It("are refused as expired once the capability's expiry passes, before any reconcile", func() {
		w := newWorker(nsMain)
		n := newIssue("expiring")
		tc := w.activate(issueTarget(n))
		expires := tc.Status.Capability.ExpiresAt.Time
		at := func(now time.Time) string {
			g := newGateway(k8s, apiReader, recorder, clocktesting.NewFakePassiveClock(now))
			h, err := g.Handler()
			Expect(err).NotTo(HaveOccurred())
			hs := httptest.NewServer(h)
			DeferCleanup(hs.Close)
			return hs.URL
		}
		p, body := comment(n)
		Expect(do(at(expires.Add(-time.Minute)), http.MethodPost, p, "Bearer "+w.saToken, body).status).To(Equal(http.StatusCreated),
			"the control: the same gateway a minute before expiry forwards")
		expectRefused(do(at(expires.Add(time.Second)), http.MethodPost, p, "Bearer "+w.saToken, body), claim.ReasonExpired)
	})
})

var _ = Describe("A reviewer capability", func() {
	It("reviews at the bound head only, and can neither approve nor merge", func() {
		r := newWorker(nsMain)
		pr := newPull(human.token, "to review")
		tc := r.activate(pullTarget(pr))
		Expect(tc.Status.Capability.Role).To(Equal(string(claim.RoleReviewer)))
		reviews := apiPath("/pulls/%d/reviews", pr.Number)
		otherHead, err := srv.CommitFile(ctx, ownerToken, repo, "main", "other-"+testgitea.RandomHex(3), "x.txt", "x\n")
		Expect(err).NotTo(HaveOccurred())

		approving := r.via(http.MethodPost, reviews, map[string]string{"event": "APPROVED", "commit_id": pr.HeadSHA, "body": "lgtm"})
		expectRefused(approving, claim.ReasonOperationNotPermitted)
		Expect(approving.refusal.Message).To(ContainSubstring("approving a pull request is the approver's operation, not the reviewer's"))
		expectRefused(r.via(http.MethodPost, apiPath("/pulls/%d/merge", pr.Number), map[string]string{"Do": "merge", "head_commit_id": pr.HeadSHA}),
			claim.ReasonOperationNotPermitted)
		expectRefused(r.via(http.MethodPost, reviews, map[string]string{"event": "COMMENT", "commit_id": otherHead, "body": "x"}),
			claim.ReasonWrongHead)
		expectRefused(r.via(http.MethodPost, reviews, map[string]string{"event": "PENDING", "commit_id": pr.HeadSHA}),
			claim.ReasonReviewEventNotPermitted)

		By("a review naming no commit is made at the bound head, as the gateway fills it in")
		a := r.via(http.MethodPost, reviews, map[string]string{"event": "COMMENT", "body": "reviewed"})
		Expect(a.status).To(Equal(http.StatusOK), "%s", a.body)
		Expect(author(a)).To(Equal(r.identity))
		var stored struct {
			CommitID string `json:"commit_id"`
		}
		Expect(json.Unmarshal(a.body, &stored)).To(Succeed())
		Expect(stored.CommitID).To(Equal(pr.HeadSHA))
		// What went to Gitea named the head (Gitea's own default would be its head at that
		// moment): the audit Event's digest is the filled body's.
		filled, err := json.Marshal(map[string]string{"body": "reviewed", "commit_id": pr.HeadSHA, "event": "COMMENT"})
		Expect(err).NotTo(HaveOccurred())
		sum := sha256.Sum256(filled)
		Eventually(func() []string { return eventNotes("TaskClaim", nsMain, tc.Name) }).Should(
			ContainElement(ContainSubstring("request sha256:" + hex.EncodeToString(sum[:]))))
	})
})

var _ = Describe("Approver and merger capabilities", func() {
	It("approve and merge at the bound head through the gateway, as their own identities", func() {
		r, ap, m := newWorker(nsMain), newWorker(nsMain), newWorker(nsMain)
		pr := newPull(human.token, "to approve and merge")
		t := pullTarget(pr)
		owner, name, _ := strings.Cut(repo, "/")

		rc := r.activate(t)
		rv := r.via(http.MethodPost, apiPath("/pulls/%d/reviews", pr.Number), map[string]string{"event": "COMMENT", "commit_id": pr.HeadSHA, "body": "looks fine"})
		Expect(rv.status).To(Equal(http.StatusOK), "%s", rv.body)
		end(r, rc)

		apc := ap.activate(t)
		Expect(apc.Status.Capability.Role).To(Equal(string(claim.RoleApprover)))
		expectRefused(ap.via(http.MethodPost, apiPath("/pulls/%d/merge", pr.Number), map[string]string{"Do": "merge", "head_commit_id": pr.HeadSHA}),
			claim.ReasonOperationNotPermitted)
		av := ap.via(http.MethodPost, apiPath("/pulls/%d/reviews", pr.Number), map[string]string{"event": "APPROVED", "commit_id": pr.HeadSHA, "body": "approved"})
		Expect(av.status).To(Equal(http.StatusOK), "%s", av.body)
		Expect(author(av)).To(Equal(ap.identity))
		end(ap, apc)

		mc := m.activate(t)
		Expect(mc.Status.Capability.Role).To(Equal(string(claim.RoleMerger)))
		expectRefused(m.via(http.MethodPost, apiPath("/pulls/%d/merge", pr.Number), map[string]string{"Do": "merge", "head_commit_id": strings.Repeat("0", 40)}),
			claim.ReasonWrongHead)
		expectRefused(m.via(http.MethodPost, apiPath("/pulls/%d/reviews", pr.Number), map[string]string{"event": "APPROVED", "commit_id": pr.HeadSHA}),
			claim.ReasonOperationNotPermitted)
		// Naming no head merges at the bound head: the gateway fills it in.
		mv := m.via(http.MethodPost, apiPath("/pulls/%d/merge", pr.Number), map[string]string{"Do": "merge"})
		Expect(mv.status).To(Equal(http.StatusOK), "%s", mv.body)
		merged, _, err := srv.Admin(ctx).GetPullRequest(owner, name, pr.Number)
		Expect(err).NotTo(HaveOccurred())
		Expect(merged.HasMerged).To(BeTrue())
		Expect(merged.MergedBy).NotTo(BeNil())
		Expect(merged.MergedBy.UserName).To(Equal(m.identity), "Gitea records the merger's own identity")
	})
})

var _ = Describe("The author role", func() {
	It("pushes its work branch with git through the gateway and opens the PR; its author can never approve or merge it", func() {
		a := newWorker(nsMain)
		n := newIssue("implement me")
		tc := a.activate(issueTarget(n))
		branch := claim.WorkBranch(tc.Namespace, tc.Name)
		mainBefore, err := srv.BranchHead(ctx, repo, "main")
		Expect(err).NotTo(HaveOccurred())

		By("a clone through the gateway (git-upload-pack is a read)")
		dir := a.cloneVia()

		By("pushes to the default branch and to another branch are refused")
		out, err := a.commitAndPush(dir, "refs/heads/main")
		Expect(err).To(HaveOccurred(), "push to main went through: %s", out)
		// git shows the gateway's reason for the rejected ref, not a hung-up connection.
		Expect(out).To(SatisfyAll(ContainSubstring("[remote rejected]"), ContainSubstring(claim.ReasonWrongBranch)), "git's output: %s", out)
		Expect(out).NotTo(ContainSubstring("hung up"))
		Expect(out).To(ContainSubstring("your claim's work branch is "+branch), "git shows the worker its own work branch")
		out, err = a.commitAndPush(dir, "refs/heads/elsewhere")
		Expect(err).To(HaveOccurred(), "push to another branch went through: %s", out)
		Expect(srv.BranchHead(ctx, repo, "main")).To(Equal(mainBefore))
		_, err = srv.BranchHead(ctx, repo, "elsewhere")
		Expect(err).To(HaveOccurred(), "the refused branch exists")

		By("the push to the work branch lands, pushed by the worker")
		out, err = a.commitAndPush(dir, "refs/heads/"+branch)
		Expect(err).NotTo(HaveOccurred(), "push to the work branch: %s", out)
		head := headOf(dir)
		Expect(srv.BranchHead(ctx, repo, branch)).To(Equal(head))

		By("a pull request from another branch, or not referencing the issue, is refused")
		pulls := apiPath("/pulls")
		wrong := a.via(http.MethodPost, pulls, map[string]string{"head": "main", "base": "main", "title": "x", "body": "Fixes #" + itoa(n)})
		expectRefused(wrong, claim.ReasonWrongBranch)
		Expect(wrong.refusal.Message).To(ContainSubstring(branch), "the refusal names the caller's own work branch")
		expectRefused(a.via(http.MethodPost, pulls, map[string]string{"head": branch, "base": "main", "title": "x", "body": "no reference"}),
			claim.ReasonMissingReference)

		By("the pull request from the work branch is opened as the worker")
		ans := a.via(http.MethodPost, pulls, map[string]string{"head": branch, "base": "main", "title": "Implement", "body": "Fixes #" + itoa(n)})
		Expect(ans.status).To(Equal(http.StatusCreated), "%s", ans.body)
		Expect(author(ans)).To(Equal(a.identity))
		prNumber := numberOf(ans)

		By("another worker reviews it; then its author's approver claim is refused, and the gateway refuses the author")
		r := newWorker(nsMain)
		rc := r.activate(fleetv1alpha1.TaskTarget{Repository: repo, Kind: fleetv1alpha1.TargetKindPullRequest, Number: prNumber, HeadSHA: head})
		Expect(rc.Status.Capability.Role).To(Equal(string(claim.RoleReviewer)))
		rv := r.via(http.MethodPost, apiPath("/pulls/%d/reviews", prNumber), map[string]string{"event": "COMMENT", "commit_id": head, "body": "ok"})
		Expect(rv.status).To(Equal(http.StatusOK), "%s", rv.body)
		end(r, rc)
		end(a, tc)
		own := a.claim(fleetv1alpha1.TaskTarget{Repository: repo, Kind: fleetv1alpha1.TargetKindPullRequest, Number: prNumber, HeadSHA: head})
		rejected := waitPhase(own, fleetv1alpha1.ClaimPhaseRejected)
		Expect(rejected.Status.Result.FailedPredicate).To(Equal("author_independence"))
		expectRefused(a.via(http.MethodPost, apiPath("/pulls/%d/reviews", prNumber), map[string]string{"event": "APPROVED", "commit_id": head}),
			claim.ReasonNoCapability)
		expectRefused(a.via(http.MethodPost, apiPath("/pulls/%d/merge", prNumber), map[string]string{"Do": "merge", "head_commit_id": head}),
			claim.ReasonNoCapability)

		By("even an Active approver or merger capability forged for the author's identity is refused at the write")
		forger := newWorkerAs(nsDirect, a.identity)
		for _, role := range []claim.Role{claim.RoleApprover, claim.RoleMerger} {
			forged := forgeActive(forger, prNumber, head, role)
			expectRefused(forger.via(http.MethodPost, apiPath("/pulls/%d/reviews", prNumber), map[string]string{"event": "APPROVED", "commit_id": head}),
				map[claim.Role]string{claim.RoleApprover: claim.ReasonIndependence, claim.RoleMerger: claim.ReasonOperationNotPermitted}[role])
			expectRefused(forger.via(http.MethodPost, apiPath("/pulls/%d/merge", prNumber), map[string]string{"Do": "merge", "head_commit_id": head}),
				map[claim.Role]string{claim.RoleApprover: claim.ReasonOperationNotPermitted, claim.RoleMerger: claim.ReasonIndependence}[role])
			Expect(k8s.Delete(ctx, forged)).To(Succeed())
		}
		pr, _, err := srv.Admin(ctx).GetPullRequest(strings.Split(repo, "/")[0], strings.Split(repo, "/")[1], prNumber)
		Expect(err).NotTo(HaveOccurred())
		Expect(pr.HasMerged).To(BeFalse())
	})
})

var _ = Describe("Authentication", func() {
	It("answers 401 to missing, malformed, wrong-audience and expired tokens, and never lets one worker act as another", func() {
		w1, w2 := newWorker(nsMain), newWorker(nsMain)
		n := newIssue("auth")
		p := apiPath("/issues/%d", n)
		for name, auth := range map[string]string{"missing": "", "malformed": "Bearer not-a-token", "garbage JWT": "Bearer a.b.c"} {
			a := do(gatewayURL, http.MethodGet, p, auth, nil)
			Expect(a.status).To(Equal(http.StatusUnauthorized), "%s token: %s", name, a.body)
		}
		wrongAud, err := env.ServiceAccountToken(ctx, nsMain, w1.name, "https://kubernetes.default.svc")
		Expect(err).NotTo(HaveOccurred())
		Expect(do(gatewayURL, http.MethodGet, p, "Bearer "+wrongAud, nil).status).To(Equal(http.StatusUnauthorized), "wrong audience")

		now := time.Now()
		expired, err := env.SignServiceAccountToken(ctx, nsMain, w1.name, gateway.Audience, now.Add(-2*time.Hour), now.Add(-time.Hour))
		Expect(err).NotTo(HaveOccurred())
		Expect(do(gatewayURL, http.MethodGet, p, "Bearer "+expired, nil).status).To(Equal(http.StatusUnauthorized), "expired")
		valid, err := env.SignServiceAccountToken(ctx, nsMain, w1.name, gateway.Audience, now.Add(-time.Minute), now.Add(59*time.Minute))
		Expect(err).NotTo(HaveOccurred())
		Expect(do(gatewayURL, http.MethodGet, p, "Bearer "+valid, nil).status).To(Equal(http.StatusOK),
			"the control: the same signing with a future expiry authenticates")
		Expect(do(gatewayURL, http.MethodGet, p, "token "+w1.saToken, nil).status).To(Equal(http.StatusOK), "Gitea's token scheme")

		By("a ServiceAccount without a registration")
		Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "unregistered", Namespace: nsMain}})).To(Succeed())
		stray, err := env.ServiceAccountToken(ctx, nsMain, "unregistered", gateway.Audience)
		Expect(err).NotTo(HaveOccurred())
		expectRefused(do(gatewayURL, http.MethodGet, p, "Bearer "+stray, nil), claim.ReasonNotRegistered)

		By("w1's token cannot use w2's capability")
		w2.activate(issueTarget(n))
		cp, body := comment(n)
		expectRefused(w1.via(http.MethodPost, cp, body), claim.ReasonNoCapability, w2.name)

		By("POST /v1/authorize answers only about its caller")
		hs := httptest.NewServer((&capability.Server{Reader: k8s, Clock: clocktesting.NewFakePassiveClock(time.Now()), Authn: gateway.NewAuthenticator(k8s)}).Handler())
		DeferCleanup(hs.Close)
		q := map[string]any{"repository": repo, "kind": "Issue", "number": n, "operation": claim.OpComment}
		Expect(do(hs.URL, http.MethodPost, "/v1/authorize", "", q).status).To(Equal(http.StatusUnauthorized))
		q["worker"] = w2.name
		Expect(do(hs.URL, http.MethodPost, "/v1/authorize", "Bearer "+w1.saToken, q).status).To(Equal(http.StatusForbidden))
		Expect(string(do(hs.URL, http.MethodPost, "/v1/authorize", "Bearer "+w2.saToken, q).body)).To(ContainSubstring(`"allowed":true`))
		delete(q, "worker")
		Expect(string(do(hs.URL, http.MethodPost, "/v1/authorize", "Bearer "+w1.saToken, q).body)).To(ContainSubstring(claim.ReasonNoCapability))
	})
})

var _ = Describe("The metrics endpoint", func() {
	It("refuses unauthenticated and unauthorized scrapes and serves a ServiceAccount allowed to read metrics", func() {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test certificate
		scrape := func(token string) (int, string) {
			GinkgoHelper()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
			Expect(err).NotTo(HaveOccurred())
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := hc.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		Eventually(func() int { s, _ := scrape(""); return s }).Should(Equal(http.StatusUnauthorized))

		ns := nsMain
		for _, name := range []string{"prometheus", "nosy"} {
			Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})).To(Succeed())
		}
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("metrics-reader")},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "fleet-controller-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: ns}},
		})).To(Succeed())
		nosy, err := env.ServiceAccountToken(ctx, ns, "nosy", "")
		Expect(err).NotTo(HaveOccurred())
		status, _ := scrape(nosy)
		Expect(status).To(Equal(http.StatusForbidden))
		prom, err := env.ServiceAccountToken(ctx, ns, "prometheus", "")
		Expect(err).NotTo(HaveOccurred())
		// A request of this spec's own, so the gateway's counter has a series whatever
		// order the specs run in.
		Expect(do(gatewayURL, http.MethodGet, "/api/v1/user", "", nil).status).To(Equal(http.StatusUnauthorized))
		Eventually(func(g Gomega) {
			status, body := scrape(prom)
			g.Expect(status).To(Equal(http.StatusOK))
			g.Expect(body).To(MatchRegexp(gateway.RequestsMetric + `\{[^}]*verdict="unauthenticated"[^}]*\} [1-9]`))
		}).Should(Succeed())
	})
})

// forgeActive writes, by hand, an Active claim of w on the pull request with role: the
// state a bug or a stale capability could leave; the gateway must still refuse what
// independence forbids.
func forgeActive(w *worker, number int64, head string, role claim.Role) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	t := fleetv1alpha1.TaskTarget{Repository: repo, Kind: fleetv1alpha1.TargetKindPullRequest, Number: number, HeadSHA: head}
	tc := &fleetv1alpha1.TaskClaim{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("forged"), Namespace: w.ns},
		Spec:       fleetv1alpha1.TaskClaimSpec{Worker: w.name, Target: t},
	}
	Expect(k8s.Create(ctx, tc)).To(Succeed())
	tc.Status = fleetv1alpha1.TaskClaimStatus{
		Phase: fleetv1alpha1.ClaimPhaseActive, Role: string(role),
		Capability: &fleetv1alpha1.TaskCapability{
			Worker: w.name, Identity: w.identity, Repository: repo,
			Target: fleetv1alpha1.ClaimTargetRef{Kind: fleetv1alpha1.TargetKindPullRequest, Number: number, HeadSHA: head},
			Role:   string(role), Operations: claim.OperationsFor(role), Pin: "sha256:" + strings.Repeat("0", 64),
			ClaimID: string(tc.UID), LeaseName: "forged", LeaseGeneration: "1", ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour)),
		},
	}
	Expect(k8s.Status().Update(ctx, tc)).To(Succeed())
	return tc
}

// end ends a claim (its own work completes it, else it is released) and waits for that.
func end(w *worker, tc *fleetv1alpha1.TaskClaim) {
	GinkgoHelper()
	Expect(w.update(tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Release = true })).To(Succeed())
	// Final first (the capability is gone), then the record and lock are freed: only then
	// may another claim take the target.
	Eventually(func() bool {
		cur := &fleetv1alpha1.TaskClaim{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur)).To(Succeed())
		return claim.FinalPhase(cur.Status.Phase) && meta.IsStatusConditionTrue(cur.Status.Conditions, fleetv1alpha1.RecordClearedCondition)
	}).Should(BeTrue(), "claim %s ends and clears its record", tc.Name)
}

func phaseOf(tc *fleetv1alpha1.TaskClaim) string {
	GinkgoHelper()
	cur := &fleetv1alpha1.TaskClaim{}
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur)).To(Succeed())
	return cur.Status.Phase
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// numberOf reads the number of a created issue or pull request from Gitea's answer.
func numberOf(a answer) int64 {
	GinkgoHelper()
	var v struct {
		Number int64 `json:"number"`
	}
	Expect(json.Unmarshal(a.body, &v)).To(Succeed())
	Expect(v.Number).To(BeNumerically(">", 0), "%s", a.body)
	return v.Number
}

var _ = Describe("Limits", func() {
	It("limits each worker's request rate and the size of request bodies", func() {
		w, other := newWorker(nsMain), newWorker(nsMain)
		n := newIssue("limits")
		w.activate(issueTarget(n))
		g := newGateway(k8s, apiReader, recorder, clocktesting.NewFakePassiveClock(time.Now()))
		g.Rate, g.Burst, g.MaxBody = 0.001, 2, 64
		h, err := g.Handler()
		Expect(err).NotTo(HaveOccurred())
		hs := httptest.NewServer(h)
		DeferCleanup(hs.Close)

		p := apiPath("/issues/%d/comments", n)
		a := do(hs.URL, http.MethodPost, p, "Bearer "+w.saToken, map[string]string{"body": strings.Repeat("x", 100)})
		Expect(a.status).To(Equal(http.StatusRequestEntityTooLarge), "%s", a.body)
		Expect(do(hs.URL, http.MethodPost, p, "Bearer "+w.saToken, map[string]string{"body": "short"}).status).To(Equal(http.StatusCreated))
		a = do(hs.URL, http.MethodGet, apiPath("/issues/%d", n), "Bearer "+w.saToken, nil)
		Expect(a.status).To(Equal(http.StatusTooManyRequests), "%s", a.body)
		Expect(a.refusal.Reason).To(Equal("rate_limited"))
		Expect(do(hs.URL, http.MethodGet, apiPath("/issues/%d", n), "Bearer "+other.saToken, nil).status).To(Equal(http.StatusOK),
			"the limit is per worker")
	})
})
