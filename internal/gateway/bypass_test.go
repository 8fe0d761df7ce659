package gateway_test

// Attacks a hostile worker tries against the gateway, each performed through the gateway
// against the real Gitea; every spec checks what Gitea holds afterwards, not only the
// gateway's answer.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/capability"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// raw POSTs a literal Content-Type and body through the manager's gateway as w.
func (w *worker) raw(path, contentType, body string) answer {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gatewayURL+path, strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+w.saToken)
	resp, err := srv.HTTP.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	a := answer{status: resp.StatusCode}
	a.body, err = io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(a.body, &a.refusal)
	}
	return a
}

// reviewsOf lists the states of the reviews Gitea holds on a pull request, by reviewer.
func reviewsOf(number int64) map[string][]string {
	GinkgoHelper()
	owner, name, _ := strings.Cut(repo, "/")
	rs, _, err := srv.Admin(ctx).ListPullReviews(owner, name, number, gitea.ListPullReviewsOptions{})
	Expect(err).NotTo(HaveOccurred())
	out := map[string][]string{}
	for _, r := range rs {
		if r.Reviewer != nil {
			out[r.Reviewer.UserName] = append(out[r.Reviewer.UserName], string(r.State))
		}
	}
	return out
}

// expectMalformed checks a 400 malformed_request.
func expectMalformed(a answer) {
	GinkgoHelper()
	Expect(a.status).To(Equal(http.StatusBadRequest), "body: %s", a.body)
	Expect(a.refusal.Reason).To(Equal(claim.ReasonMalformedRequest), "body: %s", a.body)
}

var _ = Describe("A reviewer that shows the gateway one body and Gitea another", func() {
	It("is refused: a form Content-Type, a query, duplicate or case-variant names never turn a comment into an approval", func() {
		r := newWorker(nsMain)
		pr := newPull(human.token, "smuggled approval")
		r.activate(pullTarget(pr))
		reviews := apiPath("/pulls/%d/reviews", pr.Number)
		comment := `{"event":"COMMENT","commit_id":"` + pr.HeadSHA + `","body":"looks fine"}`

		By("a JSON body under a Content-Type Gitea binds as a form, with the approval in the query")
		expectMalformed(r.raw(reviews+"?event=APPROVED&commit_id="+pr.HeadSHA,
			"application/json; charset=form-urlencoded", comment))
		By("the same as a real form body")
		expectMalformed(r.raw(reviews, "application/x-www-form-urlencoded",
			"event=APPROVED&commit_id="+pr.HeadSHA))
		By("two spellings of the event, which the two JSON decoders resolve differently")
		expectMalformed(r.raw(reviews, "application/json",
			`{"event":"APPROVED","EVENT":"COMMENT","commit_id":"`+pr.HeadSHA+`"}`))
		expectMalformed(r.raw(reviews, "application/json",
			`{"event":"COMMENT","event":"APPROVED","commit_id":"`+pr.HeadSHA+`"}`))
		expectMalformed(r.raw(reviews, "application/json",
			`{"Event":"APPROVED","commit_id":"`+pr.HeadSHA+`"}`))
		Expect(reviewsOf(pr.Number)).NotTo(HaveKey(r.identity), "refused reviews never reach Gitea")

		By("the honest request with a query appended: forwarded without it, stored as the comment it is")
		a := r.raw(reviews+"?event=APPROVED", "application/json", comment)
		Expect(a.status).To(Equal(http.StatusOK), "%s", a.body)
		Expect(reviewsOf(pr.Number)).To(HaveKeyWithValue(r.identity, []string{string(gitea.ReviewStateComment)}))
	})
})

var _ = Describe("An author's pull request", func() {
	It("carries only what an author needs: its work branch into the default branch, no labels, assignees, reviewers, milestone or claim record", func() {
		a := newWorker(nsMain)
		n := newIssue("pull request fields")
		tc := a.activate(issueTarget(n))
		branch := claim.WorkBranch(tc.Namespace, tc.Name)
		dir := a.cloneVia()
		out, err := a.commitAndPush(dir, "refs/heads/"+branch)
		Expect(err).NotTo(HaveOccurred(), "push to the work branch: %s", out)
		release := "release-" + testgitea.RandomHex(3)
		_, err = srv.CommitFile(ctx, ownerToken, repo, "main", release, "r.txt", "r\n")
		Expect(err).NotTo(HaveOccurred())
		labelID, err := srv.EnsureLabel(ctx, repo, "priority")
		Expect(err).NotTo(HaveOccurred())
		pulls := apiPath("/pulls")
		base := map[string]any{"head": branch, "base": "main", "title": "Implement", "body": "Fixes #" + itoa(n)}
		with := func(k string, v any) map[string]any {
			m := map[string]any{}
			for bk, bv := range base {
				m[bk] = bv
			}
			m[k] = v
			return m
		}
		openPulls := func() int {
			owner, name, _ := strings.Cut(repo, "/")
			ps, _, err := srv.Admin(ctx).ListRepoPullRequests(owner, name, gitea.ListPullRequestsOptions{State: gitea.StateAll})
			Expect(err).NotTo(HaveOccurred())
			count := 0
			for _, p := range ps {
				if p.Head != nil && p.Head.Ref == branch {
					count++
				}
			}
			return count
		}

		for field, value := range map[string]any{"labels": []int64{labelID}, "assignees": []string{a.identity},
			"assignee": a.identity, "reviewers": []string{human.login}, "milestone": 1, "due_date": time.Now().Add(time.Hour)} {
			By("setting " + field)
			expectRefused(a.via(http.MethodPost, pulls, with(field, value)), claim.ReasonFieldNotPermitted)
		}
		By("into another base branch")
		expectRefused(a.via(http.MethodPost, pulls, with("base", release)), claim.ReasonWrongBranch)
		By("with a claim record forged into its body")
		forged := "Fixes #" + itoa(n) + "\n\n" + claim.RecordMarker + `{"claimID":"x","number":` + itoa(n+1000) + `} -->`
		expectRefused(a.via(http.MethodPost, pulls, with("body", forged)), claim.ReasonReservedMarker)
		By("as a form, whose labels the gateway would not see")
		expectMalformed(a.raw(pulls, "application/x-www-form-urlencoded",
			"head="+branch+"&base=main&title=Implement&body=Fixes+%23"+itoa(n)+"&labels="+itoa(labelID)))
		Expect(openPulls()).To(BeZero(), "no refused pull request was created")

		By("the honest pull request, as the SDK sends it (every field, zero values included)")
		ans := a.via(http.MethodPost, pulls, gitea.CreatePullRequestOption{Head: branch, Base: "main", Title: "Implement", Body: "Fixes #" + itoa(n)})
		Expect(ans.status).To(Equal(http.StatusCreated), "%s", ans.body)
		owner, name, _ := strings.Cut(repo, "/")
		pr, _, err := srv.Admin(ctx).GetPullRequest(owner, name, numberOf(ans))
		Expect(err).NotTo(HaveOccurred())
		Expect(pr.Labels).To(BeEmpty())
		Expect(pr.Assignees).To(BeEmpty())
	})

	It("cannot create a second branch by a ref name with a Unicode space after the work branch", func() {
		a := newWorker(nsMain)
		tc := a.activate(issueTarget(newIssue("no-break space")))
		branch := claim.WorkBranch(tc.Namespace, tc.Name)
		dir := a.cloneVia()
		out, err := a.commitAndPush(dir, "refs/heads/"+branch+"\u00a0")
		Expect(err).To(HaveOccurred(), "the push went through: %s", out)
		Expect(out).To(ContainSubstring(claim.ReasonWrongBranch))
		owner, name, _ := strings.Cut(repo, "/")
		bs, _, err := srv.Admin(ctx).ListRepoBranches(owner, name, gitea.ListRepoBranchesOptions{ListOptions: gitea.ListOptions{PageSize: 50}})
		Expect(err).NotTo(HaveOccurred())
		for _, b := range bs {
			Expect(b.Name).NotTo(HavePrefix(branch), "a branch beside the work branch exists: %q", b.Name)
		}
	})
})

var _ = Describe("A claim record forged into a pull request's body", func() {
	It("about another item does not block the pull request", func() {
		pr := newPull(human.token, "forged block")
		at := time.Now().UTC().Truncate(time.Second)
		body, err := giteaclaim.WithRecord("Please review.", claim.Record{ClaimID: "forged-" + testgitea.RandomHex(3), Worker: "nobody",
			Identity: human.login, Role: "author", Repository: repo, Kind: claim.KindIssue, Number: pr.Number + 1000,
			State: claim.RecordStateActive, ClaimedAt: at, ExpiresAt: at.Add(24 * 365 * time.Hour)})
		Expect(err).NotTo(HaveOccurred())
		Expect(srv.EditBody(ctx, repo, pr.Number, body)).To(Succeed())
		r := newWorker(nsMain)
		tc := r.activate(pullTarget(pr))
		Expect(tc.Status.Capability.Role).To(Equal(string(claim.RoleReviewer)))
	})
})

var _ = Describe("A merger", func() {
	It("can neither schedule, force nor fake a merge", func() {
		pr := newPull(human.token, "merge options")
		m := newWorker(nsDirect)
		forgeActive(m, pr.Number, pr.HeadSHA, claim.RoleMerger)
		merge := apiPath("/pulls/%d/merge", pr.Number)
		for field, value := range map[string]any{"merge_when_checks_succeed": true, "force_merge": true, "delete_branch_after_merge": true} {
			By("setting " + field)
			expectRefused(m.via(http.MethodPost, merge, map[string]any{"Do": "merge", "head_commit_id": pr.HeadSHA, field: value}),
				claim.ReasonFieldNotPermitted)
		}
		By("marking it manually merged")
		expectRefused(m.via(http.MethodPost, merge, map[string]any{"Do": "manually-merged", "MergeCommitID": pr.HeadSHA, "head_commit_id": pr.HeadSHA}),
			claim.ReasonFieldNotPermitted)
		owner, name, _ := strings.Cut(repo, "/")
		got, _, err := srv.Admin(ctx).GetPullRequest(owner, name, pr.Number)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.HasMerged).To(BeFalse())
	})
})

var _ = Describe("Comments", func() {
	It("reach Gitea as JSON only, so a form body's sudo or token never does", func() {
		w := newWorker(nsMain)
		n := newIssue("form comment")
		w.activate(issueTarget(n))
		p := apiPath("/issues/%d/comments", n)
		before := commentCount(n)
		expectMalformed(w.raw(p, "application/x-www-form-urlencoded", "body=hi&sudo="+srv.AdminLogin))
		expectMalformed(w.raw(p, "multipart/form-data; boundary=x", "--x\r\n"))
		Expect(commentCount(n)).To(Equal(before))
		a := w.raw(p+"?sudo="+srv.AdminLogin+"&token="+srv.Token, "application/json", `{"body":"hi"}`)
		Expect(a.status).To(Equal(http.StatusCreated), "%s", a.body)
		Expect(author(a)).To(Equal(w.identity), "the comment is the worker's, whatever the query asked")
	})

	It("stop when the capability's budget is used up, counted in Gitea", func() {
		w := newWorker(nsMain)
		n := newIssue("budget")
		w.activate(issueTarget(n))
		small := func(b claim.CommentBudget) string {
			g := newGateway(k8s, apiReader, recorder, clock.RealClock{})
			g.CommentBudget = b
			h, err := g.Handler()
			Expect(err).NotTo(HaveOccurred())
			hs := httptest.NewServer(h)
			DeferCleanup(hs.Close)
			return hs.URL
		}
		byCount, byBytes := small(claim.CommentBudget{Comments: 2, Bytes: 1 << 20}), small(claim.CommentBudget{Comments: 100, Bytes: 12})
		p := apiPath("/issues/%d/comments", n)
		before := commentCount(n)
		for range 2 {
			Expect(do(byCount, http.MethodPost, p, "Bearer "+w.saToken, map[string]string{"body": "note"}).status).To(Equal(http.StatusCreated))
		}
		expectRefused(do(byCount, http.MethodPost, p, "Bearer "+w.saToken, map[string]string{"body": "note"}), claim.ReasonCommentBudget)
		By("the bytes already written count too (8 of 12), in another gateway replica")
		expectRefused(do(byBytes, http.MethodPost, p, "Bearer "+w.saToken, map[string]string{"body": "12345"}), claim.ReasonCommentBudget)
		Expect(do(byBytes, http.MethodPost, p, "Bearer "+w.saToken, map[string]string{"body": "1234"}).status).To(Equal(http.StatusCreated))
		Expect(commentCount(n)).To(Equal(before + 3))
	})
})

var _ = Describe("Unauthenticated load", func() {
	It("costs one TokenReview per refused token, and a client that keeps failing is held off before the API server", func() {
		w := newWorker(nsMain)
		var reviews atomic.Int32
		counting := interceptor.NewClient(k8s, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*authenticationv1.TokenReview); ok {
				reviews.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		}})
		g := &gateway.Gateway{GiteaURL: srv.URL, Repository: repo, Reader: apiReader, Authn: gateway.NewAuthenticator(counting),
			Credentials: gateway.NewCredentials(apiReader, credsNS, gc), Gitea: gc, Recorder: recorder, Client: k8s, Clock: clock.RealClock{}}
		h, err := g.Handler()
		Expect(err).NotTo(HaveOccurred())
		hs := httptest.NewServer(h)
		DeferCleanup(hs.Close)
		get := func(token string) int {
			return do(hs.URL, http.MethodGet, "/api/v1/user", "Bearer "+token, nil).status
		}
		fake := func(i int) string { return "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.sig" + strings.Repeat("x", i) }

		Expect(get(w.saToken)).To(Equal(http.StatusOK))
		Expect(reviews.Load()).To(BeEquivalentTo(1))
		for range 20 {
			Expect(get(fake(0))).To(Equal(http.StatusUnauthorized))
		}
		Expect(reviews.Load()).To(BeEquivalentTo(2), "a refused token is reviewed once")
		statuses := map[int]int{}
		for i := 1; i <= 20; i++ {
			statuses[get(fake(i))]++
		}
		Expect(statuses[http.StatusTooManyRequests]).To(BeNumerically(">=", 8), "%v", statuses)
		Expect(reviews.Load()).To(BeNumerically("<=", 2+gateway.DefaultAuthFailureBurst+2), "new refused tokens stop reaching the API server")
		Expect(get(w.saToken)).To(Equal(http.StatusOK), "a worker whose token is known is not held off with the failing client")
	})
})

var _ = Describe("Token cache", func() {
	It("knows each worker by its own whole token: two workers' tokens, sent in turn to one gateway, are never taken for each other", func() {
		a, b := newWorker(nsMain), newWorker(nsMain)
		// A gateway of its own: its cache starts empty, and then holds both tokens.
		h, err := newGateway(k8s, apiReader, recorder, clock.RealClock{}).Handler()
		Expect(err).NotTo(HaveOccurred())
		hs := httptest.NewServer(h)
		DeferCleanup(hs.Close)
		// ServiceAccount tokens of one issuer share their first segment (the JWT header)
		// and much of the rest: only the whole token tells two workers apart.
		Expect(strings.SplitN(a.saToken, ".", 2)[0]).To(Equal(strings.SplitN(b.saToken, ".", 2)[0]))
		loginOf := func(w *worker) string {
			GinkgoHelper()
			ans := do(hs.URL, http.MethodGet, "/api/v1/user", "Bearer "+w.saToken, nil)
			Expect(ans.status).To(Equal(http.StatusOK), string(ans.body))
			var u struct{ Login string }
			Expect(json.Unmarshal(ans.body, &u)).To(Succeed())
			return u.Login
		}
		for range 2 { // the second round answers from the cache
			Expect(loginOf(a)).To(Equal(a.identity))
			Expect(loginOf(b)).To(Equal(b.identity))
		}
	})
})

var _ = Describe("A git push the gateway refuses", func() {
	It("counts the decompressed pack against the push limit", func() {
		a := newWorker(nsMain)
		tc := a.activate(issueTarget(newIssue("gzip push")))
		g := newGateway(k8s, apiReader, recorder, clock.RealClock{})
		g.MaxPush = 64 << 10
		h, err := g.Handler()
		Expect(err).NotTo(HaveOccurred())
		hs := httptest.NewServer(h)
		DeferCleanup(hs.Close)
		zero := strings.Repeat("0", 40)
		cmd := zero + " " + strings.Repeat("a", 40) + " " + claim.WorkRef(tc.Namespace, tc.Name) + "\x00report-status\n"
		var plain bytes.Buffer
		plain.WriteString(pktLine(cmd) + "0000PACK")
		plain.Write(make([]byte, 1<<20)) // a megabyte of zeros: a few kilobytes compressed
		body := gzipped(plain.Bytes())
		Expect(len(body)).To(BeNumerically("<", g.MaxPush), "compressed, the push is under the limit")
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/"+repo+".git/git-receive-pack", bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Encoding", "gzip")
		req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
		req.Header.Set("Authorization", "Bearer "+a.saToken)
		resp, err := srv.HTTP.Do(req)
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		// Without the limit on the decompressed bytes Gitea would read the whole (bogus) pack
		// and answer 200 with an unpack error; with it the gateway cuts the body off.
		Expect(resp.StatusCode).To(BeNumerically(">=", 400), "a pack over the limit once decompressed is not accepted")
		_, err = srv.BranchHead(ctx, repo, claim.WorkBranch(tc.Namespace, tc.Name))
		Expect(err).To(HaveOccurred(), "no branch was created")
		Expect(phaseOf(tc)).To(Equal(fleetv1alpha1.ClaimPhaseActive))
	})
})

func pktLine(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

func gzipped(b []byte) []byte {
	GinkgoHelper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, err := zw.Write(b)
	Expect(err).NotTo(HaveOccurred())
	Expect(zw.Close()).To(Succeed())
	return out.Bytes()
}

var _ = Describe("The Gitea doctor", func() {
	It("finds nothing in the setup docs/gateway.md asks for, and warns of an unprotected default branch", func() {
		newWorker(nsMain) // at least one worker identity with gateway credentials
		doctor := func(r string) *gateway.Doctor {
			return &gateway.Doctor{Repository: r, Gitea: gc, Credentials: gateway.NewCredentials(apiReader, credsNS, gc)}
		}
		// A token of another GiteaServer is that server's business: this server's
		// administrator login, labelled for another server, is no finding here.
		other := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "gitea-other-server-" + suffix, Namespace: credsNS,
				Labels: map[string]string{gateway.LoginLabel: srv.AdminLogin, gateway.ServerLabel: "another-server"}},
			Data: map[string][]byte{gateway.TokenKey: []byte("not-a-token-of-this-server")},
		}
		Expect(k8s.Create(ctx, other)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, other)).To(Succeed()) })
		findings, err := doctor(repo).Check(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(findings).To(BeEmpty(), "main is protected and only the controller may push")
		findings, err = doctor(otherRepo).Check(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(findings).To(ConsistOf(ContainSubstring("default branch main is not protected")))
	})
})

var _ = Describe("The capability endpoint", func() {
	It("limits each caller's questions", func() {
		w := newWorker(nsMain)
		n := newIssue("capability rate")
		w.activate(issueTarget(n))
		cs := &capability.Server{Reader: apiReader, Cache: k8s, Clock: clock.RealClock{}, Authn: gateway.NewAuthenticator(k8s), Rate: 0.001, Burst: 2}
		hs := httptest.NewServer(cs.Handler())
		DeferCleanup(hs.Close)
		q := map[string]any{"repository": repo, "kind": "Issue", "number": n, "operation": claim.OpComment}
		for range 2 {
			a := do(hs.URL, http.MethodPost, "/v1/authorize", "Bearer "+w.saToken, q)
			Expect(a.status).To(Equal(http.StatusOK), "%s", a.body)
			Expect(string(a.body)).To(ContainSubstring(`"allowed":true`))
		}
		a := do(hs.URL, http.MethodPost, "/v1/authorize", "Bearer "+w.saToken, q)
		Expect(a.status).To(Equal(http.StatusTooManyRequests), "%s", a.body)
		Expect(a.refusal.Reason).To(Equal("rate_limited"))
	})
})
