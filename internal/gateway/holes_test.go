package gateway_test

// The second round of hostile-worker attacks (what Gitea does on its own because of a
// write, the fleet's own files, a push that outlives its capability, server limits, the
// comment budget, forwarded headers, audit records, token lifetimes). Each is performed
// through the gateway against the real Gitea, and what Gitea holds afterwards is read
// back.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// timelineTypes lists the types of the entries of an item's timeline.
func timelineTypes(n int64) []string {
	GinkgoHelper()
	a := do(srv.URL, http.MethodGet, apiPath("/issues/%d/timeline", n), "token "+srv.Token, nil)
	Expect(a.status).To(Equal(http.StatusOK), "%s", a.body)
	var entries []struct {
		Type string `json:"type"`
	}
	Expect(json.Unmarshal(a.body, &entries)).To(Succeed())
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Type)
	}
	return out
}

// branchExists reports whether Gitea holds the branch.
func branchExists(branch string) bool {
	GinkgoHelper()
	a := do(srv.URL, http.MethodGet, apiPath("/branches/%s", branch), "token "+srv.Token, nil)
	return a.status == http.StatusOK
}

func writeFile(dir, name, content string) func() {
	return func() {
		Expect(os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600)).To(Succeed())
	}
}

var _ = Describe("Gitea's own writes after a write", func() {
	It("act only on the claimed item: closing and reopening keywords, time tracking and references to other items are refused in pull requests, comments and pushed commits", func() {
		a := newWorker(nsMain)
		mine, other, third := newIssue("the author's task"), newIssue("another worker's task"), newIssue("a third task")
		tc := a.activate(issueTarget(mine))
		branch := claim.WorkBranch(tc.Namespace, tc.Name)
		before := timelineTypes(other)

		By("a pull request that closes other issues besides its own")
		dir := a.cloneVia()
		out, err := a.commitPush(dir, "refs/heads/"+branch, fmt.Sprintf("Work on #%d", mine), writeFile(dir, "work.txt", "work\n"))
		Expect(err).NotTo(HaveOccurred(), out)
		openPull := func(body string) answer {
			return a.via(http.MethodPost, apiPath("/pulls"), map[string]string{"head": branch, "base": "main", "title": "Work", "body": body})
		}
		expectRefused(openPull(fmt.Sprintf("Fixes #%d … also closes #%d, resolves #%d", mine, other, third)), claim.ReasonUncoveredReference)
		expectRefused(openPull(fmt.Sprintf("Fixes #%d, reopens %s#%d", mine, repo, other)), claim.ReasonUncoveredReference)
		expectRefused(openPull(fmt.Sprintf("Fixes #%d\n\nSee &#35;%d", mine, other)), claim.ReasonUncoveredReference)
		expectRefused(openPull(fmt.Sprintf("Fixes #%d, see %s/%s/issues/%d", mine, srv.URL, repo, other)), claim.ReasonUncoveredReference)

		By("a comment that reopens or logs time on another item")
		expectRefused(a.via(http.MethodPost, apiPath("/issues/%d/comments", mine), map[string]string{"body": fmt.Sprintf("reopens #%d", other)}),
			claim.ReasonUncoveredReference)
		expectRefused(a.via(http.MethodPost, apiPath("/issues/%d/comments", mine), map[string]string{"body": fmt.Sprintf("spent on #%d @1h", other)}),
			claim.ReasonUncoveredReference)

		By("a pushed commit that closes another issue")
		out, err = a.commitPush(dir, "refs/heads/"+branch, fmt.Sprintf("More work\n\ncloses #%d", other), writeFile(dir, "more.txt", "more\n"))
		Expect(err).To(HaveOccurred(), "a commit closing another issue was pushed: %s", out)
		Expect(out).To(ContainSubstring(claim.ReasonUncoveredReference))
		head, err := srv.BranchHead(ctx, repo, branch)
		Expect(err).NotTo(HaveOccurred())
		Expect(head).NotTo(Equal(headOf(dir)), "Gitea holds the refused commit")
		_, err = gitRun(dir, "reset", "-q", "--hard", "HEAD~1")
		Expect(err).NotTo(HaveOccurred())

		By("the same work naming only its own issue goes through, time tracking included")
		out, err = a.commitPush(dir, "refs/heads/"+branch, fmt.Sprintf("More work for #%d @1h", mine), writeFile(dir, "more.txt", "more\n"))
		Expect(err).NotTo(HaveOccurred(), out)
		pr := openPull(fmt.Sprintf("Fixes #%d", mine))
		Expect(pr.status).To(Equal(http.StatusCreated), "%s", pr.body)

		By("Gitea added nothing to the other items' timelines")
		Expect(timelineTypes(other)).To(Equal(before))
		Expect(timelineTypes(third)).NotTo(ContainElement(BeElementOf("pull_ref", "commit_ref", "comment_ref", "issue_ref")))
	})

	It("merges carry only covered references: a merge message naming another item is refused, and the merge closes only the pull request's own issue", func() {
		r, ap, m := newWorker(nsMain), newWorker(nsMain), newWorker(nsMain)
		fixes, other := newIssue("fixed by the pull request"), newIssue("left alone")
		pr, err := srv.CreatePullWithBody(ctx, human.token, repo, "a fix", fmt.Sprintf("Fixes #%d", fixes))
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (string, error) { return srv.PullHead(ctx, repo, pr.Number) }).Should(Equal(pr.HeadSHA))
		t := pullTarget(pr)
		reviewAndApprove(r, ap, t, pr)

		m.activate(t)
		merge := apiPath("/pulls/%d/merge", pr.Number)
		expectRefused(m.via(http.MethodPost, merge, map[string]string{"Do": "squash", "head_commit_id": pr.HeadSHA,
			"MergeMessageField": fmt.Sprintf("Squashed; closes #%d", other)}), claim.ReasonUncoveredReference)
		expectRefused(m.via(http.MethodPost, merge, map[string]string{"Do": "merge", "head_commit_id": pr.HeadSHA,
			"MergeTitleField": fmt.Sprintf("Merge (resolves #%d)", other)}), claim.ReasonUncoveredReference)
		mv := m.via(http.MethodPost, merge, map[string]string{"Do": "merge", "head_commit_id": pr.HeadSHA,
			"MergeMessageField": fmt.Sprintf("Merged; fixes #%d", fixes)})
		Expect(mv.status).To(Equal(http.StatusOK), "%s", mv.body)

		Expect(pullMerged(pr.Number)).To(BeTrue())
		owner, name, _ := strings.Cut(repo, "/")
		Eventually(func() (string, error) {
			is, _, err := srv.Admin(ctx).GetIssue(owner, name, fixes)
			if err != nil {
				return "", err
			}
			return string(is.State), nil
		}).Should(Equal("closed"), "the pull request's own issue is closed by the merge")
		is, _, err := srv.Admin(ctx).GetIssue(owner, name, other)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(is.State)).To(Equal("open"))
	})

	It("merges carrying a commit that closes another item are refused", func() {
		r, ap, m := newWorker(nsMain), newWorker(nsMain), newWorker(nsMain)
		fixes, other := newIssue("fixed"), newIssue("closed by a commit message")
		branch := "feature-" + testgitea.RandomHex(4)
		_, err := srv.CommitFile(ctx, human.token, repo, "main", branch, branch+"/a.txt", "a\n")
		Expect(err).NotTo(HaveOccurred())
		head, err := srv.Commit(ctx, human.token, repo, branch, branch+"/b.txt", "b\n", fmt.Sprintf("B\n\ncloses #%d", other), nil)
		Expect(err).NotTo(HaveOccurred())
		pr := humanPullFrom(branch, head, fmt.Sprintf("Fixes #%d", fixes))
		reviewAndApprove(r, ap, pullTarget(pr), pr)
		m.activate(pullTarget(pr))
		expectMergeRefused(m, pr, claim.ReasonUncoveredReference)
	})
})

// humanPullFrom opens a pull request of the human collaborator from branch, whose head
// is head, and waits until Gitea reports that head.
func humanPullFrom(branch, head, body string) testgitea.PullRequest {
	GinkgoHelper()
	owner, name, _ := strings.Cut(repo, "/")
	opened, _, err := srv.SDK(ctx, human.token).CreatePullRequest(owner, name,
		gitea.CreatePullRequestOption{Head: branch, Base: "main", Title: "change on " + branch, Body: body})
	Expect(err).NotTo(HaveOccurred())
	pr := testgitea.PullRequest{Number: opened.Index, Branch: branch, HeadSHA: head}
	Eventually(func() (string, error) { return srv.PullHead(ctx, repo, pr.Number) }).Should(Equal(head))
	return pr
}

// expectMergeRefused checks that m's merge at the head is refused for reason and that
// Gitea did not merge.
func expectMergeRefused(m *worker, pr testgitea.PullRequest, reason string) {
	GinkgoHelper()
	expectRefused(m.via(http.MethodPost, apiPath("/pulls/%d/merge", pr.Number), map[string]string{"Do": "merge", "head_commit_id": pr.HeadSHA}), reason)
	Expect(pullMerged(pr.Number)).To(BeFalse())
}

// pullMerged reports whether Gitea merged the pull request.
func pullMerged(n int64) bool {
	GinkgoHelper()
	owner, name, _ := strings.Cut(repo, "/")
	got, _, err := srv.Admin(ctx).GetPullRequest(owner, name, n)
	Expect(err).NotTo(HaveOccurred())
	return got.HasMerged
}

// reviewAndApprove takes the pull request through a review by r and an approval by ap.
func reviewAndApprove(r, ap *worker, t fleetv1alpha1.TaskTarget, pr testgitea.PullRequest) {
	GinkgoHelper()
	rc := r.activate(t)
	rv := r.via(http.MethodPost, apiPath("/pulls/%d/reviews", pr.Number), map[string]string{"event": "COMMENT", "commit_id": pr.HeadSHA, "body": "fine"})
	Expect(rv.status).To(Equal(http.StatusOK), "%s", rv.body)
	end(r, rc)
	apc := ap.activate(t)
	av := ap.via(http.MethodPost, apiPath("/pulls/%d/reviews", pr.Number), map[string]string{"event": "APPROVED", "commit_id": pr.HeadSHA, "body": "ok"})
	Expect(av.status).To(Equal(http.StatusOK), "%s", av.body)
	end(ap, apc)
}

var _ = Describe("The fleet's own files", func() {
	It("cannot be changed by a push or a merge", func() {
		a := newWorker(nsMain)
		tc := a.activate(issueTarget(newIssue("touch the rules")))
		branch := claim.WorkBranch(tc.Namespace, tc.Name)
		Eventually(func() error { _, err := srv.ReadFile(ctx, repo, "main", claim.RuleSetPath); return err }).Should(Succeed(),
			"the controller published the rule set")
		dir := a.cloneVia()
		_, err := os.Stat(filepath.Join(dir, claim.RuleSetPath))
		Expect(err).NotTo(HaveOccurred(), "the clone holds the rule set")

		for _, attack := range []struct {
			name   string
			change func()
		}{
			{"replace the rule set with a directory", func() {
				Expect(os.Remove(filepath.Join(dir, claim.RuleSetPath))).To(Succeed())
				writeFile(dir, claim.RuleSetPath+"/x", "{}\n")()
			}},
			{"edit the rule set", writeFile(dir, claim.RuleSetPath, "{}\n")},
			{"add a file beside it", writeFile(dir, ".fleet/extra.json", "{}\n")},
			{"delete the directory", func() { Expect(os.RemoveAll(filepath.Join(dir, ".fleet"))).To(Succeed()) }},
		} {
			By(attack.name)
			out, err := a.commitPush(dir, "refs/heads/"+branch, "Rules", attack.change)
			Expect(err).To(HaveOccurred(), "%s: pushed: %s", attack.name, out)
			Expect(out).To(ContainSubstring(claim.ReasonProtectedPath), attack.name)
			Expect(branchExists(branch)).To(BeFalse(), attack.name)
			_, err = gitRun(dir, "reset", "-q", "--hard", "origin/main")
			Expect(err).NotTo(HaveOccurred())
		}
		out, err := a.commitPush(dir, "refs/heads/"+branch, "Unrelated work", writeFile(dir, "work.txt", "w\n"))
		Expect(err).NotTo(HaveOccurred(), "an unrelated change: %s", out)

		By("a pull request that changes .fleet/ cannot be merged")
		r, ap, m := newWorker(nsMain), newWorker(nsMain), newWorker(nsMain)
		prBranch := "feature-" + testgitea.RandomHex(4)
		head, err := srv.CommitFile(ctx, human.token, repo, "main", prBranch, ".fleet/extra.json", "{}\n")
		Expect(err).NotTo(HaveOccurred())
		pr := humanPullFrom(prBranch, head, "Tweak the rules")
		reviewAndApprove(r, ap, pullTarget(pr), pr)
		m.activate(pullTarget(pr))
		expectMergeRefused(m, pr, claim.ReasonProtectedPath)
	})
})

var _ = Describe("A push", func() {
	It("is decided on all of it: a pack held back until its capability was released is refused when it arrives", func() {
		a := newWorker(nsMain)
		tc := a.activate(issueTarget(newIssue("slow push")))
		ref := claim.WorkRef(tc.Namespace, tc.Name)
		dir := a.cloneVia()
		_, err := gitRun(dir, "-c", "user.name=x", "-c", "user.email=x@example.invalid", "commit", "-q", "--allow-empty", "-m", "slow")
		Expect(err).NotTo(HaveOccurred())
		newID := headOf(dir)
		pack := packOf(dir, "HEAD\n^origin/main\n")

		pr, pw := io.Pipe()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, gatewayURL+"/"+repo+".git/git-receive-pack", pr)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
		req.Header.Set("Authorization", "Bearer "+a.saToken)
		type result struct {
			status int
			body   string
			err    error
		}
		done := make(chan result, 1)
		go func() {
			resp, err := srv.HTTP.Do(req)
			if err != nil {
				done <- result{err: err}
				return
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			done <- result{status: resp.StatusCode, body: string(b)}
		}()
		_, err = io.WriteString(pw, pktLine(strings.Repeat("0", 40)+" "+newID+" "+ref+"\x00report-status\n")+"0000")
		Expect(err).NotTo(HaveOccurred())

		By("the claim ends while the pack is held back")
		end(a, tc)
		_, err = pw.Write(pack)
		Expect(err).NotTo(HaveOccurred())
		Expect(pw.Close()).To(Succeed())
		var res result
		Eventually(done, time.Minute).Should(Receive(&res))
		Expect(res.err).NotTo(HaveOccurred())
		Expect(res.body).To(ContainSubstring("ng " + ref))
		Expect(res.body).To(ContainSubstring(claim.ReasonNoCapability))
		Expect(branchExists(strings.TrimPrefix(ref, "refs/heads/"))).To(BeFalse(), "Gitea took the late pack")
	})
})

var _ = Describe("Pushes that edit files", func() {
	It("go through as complete packs: the gateway asks git for no thin pack, which it could not read on its own", func() {
		a := newWorker(nsMain)
		tc := a.activate(issueTarget(newIssue("edit a large file")))
		ref := "refs/heads/" + claim.WorkBranch(tc.Namespace, tc.Name)
		dir := a.cloneVia()
		var big strings.Builder
		for i := range 2000 {
			fmt.Fprintf(&big, "line %d of a file large enough for git to store its next version as a delta\n", i)
		}
		out, err := a.commitPush(dir, ref, "Add a large file", writeFile(dir, "large.txt", big.String()))
		Expect(err).NotTo(HaveOccurred(), out)
		// A one-line change: a thin pack would carry only a delta against the blob Gitea
		// already holds.
		out, err = a.commitPush(dir, ref, "Edit one line", writeFile(dir, "large.txt", big.String()+"one more line\n"))
		Expect(err).NotTo(HaveOccurred(), "an edit of a file Gitea holds: %s", out)
		head, err := srv.BranchHead(ctx, repo, strings.TrimPrefix(ref, "refs/heads/"))
		Expect(err).NotTo(HaveOccurred())
		Expect(head).To(Equal(headOf(dir)))
	})
})

// packOf builds a pack of the objects revs names (git pack-objects --revs) in dir.
func packOf(dir, revs string) []byte {
	GinkgoHelper()
	cmd := execIn(dir, "git", "pack-objects", "--stdout", "--revs")
	cmd.Stdin = strings.NewReader(revs)
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred())
	return out
}

var _ = Describe("Server limits", func() {
	It("close connections beyond the per-address cap before reading them", func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		closed := 0
		for range 80 {
			c, err := net.Dial("tcp", strings.TrimPrefix(gatewayURL, "http://"))
			Expect(err).NotTo(HaveOccurred())
			conns = append(conns, c)
		}
		// All read at once, with one deadline well inside the server's header timeout: a
		// connection the server kept times out, one over the cap reads EOF at once.
		deadline := time.Now().Add(time.Second)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Go(func() {
				_ = c.SetReadDeadline(deadline)
				if _, err := c.Read(make([]byte, 1)); err == io.EOF {
					mu.Lock()
					closed++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		Expect(time.Now()).To(BeTemporally("<", deadline.Add(2*time.Second)), "the reads outlasted the check")
		// Other specs' keep-alive connections from this address count too.
		Expect(closed).To(BeNumerically(">=", 80-64), "the gateway kept more idle connections from one address than its cap")
	})
})

var _ = Describe("The comment budget", func() {
	It("is exact under parallel comments: reserved before forwarding, counted once across replicas", func() {
		w := newWorker(nsMain)
		n := newIssue("budgeted")
		w.activate(issueTarget(n))
		// Two gateway replicas with a budget of 8 comments, sharing the API server.
		var bases []string
		for range 2 {
			bases = append(bases, budgetReplica(8))
		}
		post := func(i int) answer {
			return do(bases[i%2], http.MethodPost, apiPath("/issues/%d/comments", n), "Bearer "+w.saToken,
				map[string]string{"body": fmt.Sprintf("note %d", i)})
		}
		for i := range 3 {
			Expect(post(i).status).To(Equal(http.StatusCreated))
		}
		var mu sync.Mutex
		statuses := map[int]int{}
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				defer GinkgoRecover()
				a := post(3 + i)
				mu.Lock()
				statuses[a.status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		Expect(statuses).To(Equal(map[int]int{http.StatusCreated: 5, http.StatusForbidden: 7}))
		Expect(commentsBy(n, w.identity)).To(Equal(8), "Gitea holds exactly the budget")
	})
})

var _ = Describe("The comment budget's blocks", func() {
	It("reserves comments ahead in one write and gives back what it did not use", func() {
		w := newWorker(nsMain)
		n := newIssue("blocks")
		tc := w.activate(issueTarget(n))
		base := budgetReplica(100)
		key := client.ObjectKey{Namespace: tc.Namespace, Name: "fleet-budget-" + string(tc.UID)}
		counted := func() int {
			GinkgoHelper()
			lease := &coordinationv1.Lease{}
			Expect(apiReader.Get(ctx, key, lease)).To(Succeed())
			c, err := strconv.Atoi(lease.Annotations["fleet.giteatools.dev/comments"])
			Expect(err).NotTo(HaveOccurred())
			return c
		}
		By("three comments in a row: the first reserves a block, the next two come from it")
		for i := range 3 {
			a := do(base, http.MethodPost, apiPath("/issues/%d/comments", n), "Bearer "+w.saToken, map[string]string{"body": fmt.Sprintf("note %d", i)})
			Expect(a.status).To(Equal(http.StatusCreated), "%s", a.body)
		}
		Expect(counted()).To(Equal(claim.CommentBlockMax), "the Lease counts the whole block while the replica holds it")
		By("once idle, the replica gives back the five it did not use: the Lease counts what Gitea stored")
		Eventually(counted).WithTimeout(5 * time.Second).Should(Equal(3))
		Expect(commentsBy(n, w.identity)).To(Equal(3))
	})
})

// budgetReplica starts one more gateway replica, sharing the suite's API server and
// Gitea, with a comment budget of comments (1 MiB) and no rate limit, and returns its URL.
func budgetReplica(comments int) string {
	GinkgoHelper()
	g := newGateway(k8s, apiReader, recorder, clock.RealClock{})
	g.Cache = k8s
	g.Rate, g.Burst = 1e6, 1e6
	g.CommentBudget = claim.CommentBudget{Comments: comments, Bytes: 1 << 20}
	h, err := g.Handler()
	Expect(err).NotTo(HaveOccurred())
	hs := httptest.NewServer(h)
	DeferCleanup(hs.Close)
	return hs.URL
}

// commentsBy counts the comments login wrote on issue n.
func commentsBy(n int64, login string) int {
	GinkgoHelper()
	owner, name, _ := strings.Cut(repo, "/")
	cs, _, err := srv.Admin(ctx).ListIssueComments(owner, name, n, giteaListComments())
	Expect(err).NotTo(HaveOccurred())
	count := 0
	for _, c := range cs {
		if c.Poster != nil && c.Poster.UserName == login {
			count++
		}
	}
	return count
}

var _ = Describe("Headers a worker sends", func() {
	It("never reach Gitea: no forged client address, no reverse-proxy login", func() {
		w := newWorker(nsMain)
		n := newIssue("headers")
		w.activate(issueTarget(n))
		body, _ := json.Marshal(map[string]string{"body": "with forged headers"})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, gatewayURL+apiPath("/issues/%d/comments", n), bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+w.saToken)
		for _, h := range []string{"X-Real-IP", "X-Forwarded-For", "True-Client-IP", "CF-Connecting-IP"} {
			req.Header.Set(h, "203.0.113.66")
		}
		req.Header.Set("Forwarded", "for=203.0.113.66")
		req.Header.Set("X-WEBAUTH-USER", srv.AdminLogin)
		resp, err := srv.HTTP.Do(req)
		Expect(err).NotTo(HaveOccurred())
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusCreated), "%s", b)
		Expect(author(answer{body: b})).To(Equal(w.identity))
		Eventually(func() (string, error) {
			log, err := os.ReadFile(filepath.Join(srv.RunDir(), "log", "gitea.log"))
			return string(log), err
		}).Should(ContainSubstring(fmt.Sprintf("/issues/%d/comments", n)), "Gitea logged the comment")
		log, err := os.ReadFile(filepath.Join(srv.RunDir(), "log", "gitea.log"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(log)).NotTo(ContainSubstring("203.0.113.66"), "Gitea believed a client address the worker forged")
	})
})

var _ = Describe("The audit of forwarded writes", func() {
	It("is one Event per forwarded write, none merged, each naming the capability and the request's digest", func() {
		w := newWorker(nsMain)
		n := newIssue("audited")
		tc := w.activate(issueTarget(n))
		const writes = 30
		for i := range writes {
			a := w.via(http.MethodPost, apiPath("/issues/%d/comments", n), map[string]string{"body": fmt.Sprintf("audited %d", i)})
			Expect(a.status).To(Equal(http.StatusCreated))
		}
		var notes []string
		Eventually(func(g Gomega) {
			list := &eventsv1.EventList{}
			g.Expect(k8s.List(ctx, list, client.InNamespace(tc.Namespace))).To(Succeed())
			notes = nil
			for _, e := range list.Items {
				if e.Regarding.Name == tc.Name && e.Reason == gateway.ReasonForwarded {
					g.Expect(e.Series).To(BeNil(), "a forwarded write's Event became a series")
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(HaveLen(writes))
		}).Should(Succeed())
		digests := map[string]bool{}
		for _, note := range notes {
			Expect(note).To(ContainSubstring(tc.Status.Capability.ClaimID))
			_, d, ok := strings.Cut(note, "sha256:")
			Expect(ok).To(BeTrue(), note)
			digests[d] = true
		}
		Expect(digests).To(HaveLen(writes), "every write's own digest")
	})
})

var _ = Describe("Worker limits", func() {
	It("refuse long-lived gateway tokens, upper-case commit ids and large claim metadata", func() {
		w := newWorker(nsMain)

		By("a worker cannot mint itself a token longer than an hour")
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: w.ns}}
		long := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{gateway.Audience}, ExpirationSeconds: ptr.To[int64](10 * 365 * 24 * 3600)}}
		err := w.c.SubResource("token").Create(ctx, sa, long)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("at most 3600 seconds"))

		By("and the gateway refuses one an operator minted")
		long = &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{gateway.Audience}, ExpirationSeconds: ptr.To[int64](2 * 3600)}}
		Expect(k8s.SubResource("token").Create(ctx, sa, long)).To(Succeed())
		a := do(gatewayURL, http.MethodGet, "/api/v1/user", "Bearer "+long.Status.Token, nil)
		Expect(a.status).To(Equal(http.StatusUnauthorized), "%s", a.body)
		Expect(w.via(http.MethodGet, "/api/v1/user", nil).status).To(Equal(http.StatusOK))

		By("an upper-case commit id is not a head Gitea should store")
		pr := newPull(human.token, "upper case")
		w.activate(pullTarget(pr))
		expectMalformed(w.via(http.MethodPost, apiPath("/pulls/%d/reviews", pr.Number),
			map[string]string{"event": "COMMENT", "commit_id": strings.ToUpper(pr.HeadSHA), "body": "x"}))
		Expect(reviewsOf(pr.Number)).To(BeEmpty())

		By("claim metadata is bounded")
		big := &fleetv1alpha1.TaskClaim{
			ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("tc"), Namespace: w.ns, Annotations: map[string]string{"note": strings.Repeat("x", 200<<10)}},
			Spec:       fleetv1alpha1.TaskClaimSpec{Worker: w.name, Target: issueTarget(1)},
		}
		err = w.c.Create(ctx, big)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("at most 16 annotations"))
	})
})

func giteaListComments() gitea.ListIssueCommentOptions {
	return gitea.ListIssueCommentOptions{ListOptions: gitea.ListOptions{PageSize: 50}}
}
