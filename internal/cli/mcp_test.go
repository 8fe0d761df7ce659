package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"code.gitea.io/sdk/gitea"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/cli"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// agent is one MCP client session with a worker's kubectl fleet mcp server.
type agent struct {
	name string
	cs   *mcp.ClientSession
}

// newAgent serves worker name's tools to an SDK client over an in-memory transport. The
// server acts as the worker's ServiceAccount and reads Gitea as the controller does.
func newAgent(ns, name string) *agent {
	GinkgoHelper()
	user, groups := testenv.ServiceAccount(ns, name)
	c, err := env.Impersonate(user, groups...)
	Expect(err).NotTo(HaveOccurred())
	o := cli.NewOptions(genericiooptions.NewTestIOStreamsDiscard())
	s := o.NewMCPServer(cli.MCPConfig{Client: c, Namespace: ns, Worker: name, GiteaURL: srv.URL, GiteaToken: srv.Token})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(ss.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent-" + name, Version: "v0"}, nil).Connect(ctx, ct, nil)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cs.Close)
	return &agent{name: name, cs: cs}
}

// call calls a tool and returns whether it failed, its structured payload and its text.
func (a *agent) call(tool string, args map[string]any) (isError bool, payload map[string]any, text string) {
	GinkgoHelper()
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	Expect(err).NotTo(HaveOccurred(), "%s: protocol error", tool)
	b, err := json.Marshal(res.StructuredContent)
	Expect(err).NotTo(HaveOccurred())
	_ = json.Unmarshal(b, &payload)
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	return res.IsError, payload, text
}

var _ = Describe("kubectl fleet mcp", func() {
	It("serves inspect, claim and release to two racing agents: one wins, the other gets the typed refusal", func() {
		ns := newNamespace()
		aName := register(ns, newLogin("mcp-a"), startChild())
		bName := register(ns, newLogin("mcp-b"), startChild())
		a, b := newAgent(ns, aName), newAgent(ns, bName)
		n := newIssue("mcp race")

		tools, err := a.cs.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, t := range tools.Tools {
			names = append(names, t.Name)
		}
		Expect(names).To(ConsistOf("inspect", "claim", "release", "complete", "comment", "review", "approve", "merge", "open_pr",
			"write_file", "delete_file", "read_issue", "read_pr", "read_diff", "read_file", "list_comments", "read_timeline", "search_issues"))

		By("inspecting neutral state")
		isErr, out, text := a.call("inspect", map[string]any{"kind": "issue", "number": n})
		Expect(isErr).To(BeFalse(), text)
		Expect(out["worker"]).To(HaveKeyWithValue("ownershipState", "live"))
		Expect(out["claims"]).To(BeEmpty())
		Expect(out["target"]).To(SatisfyAll(HaveKeyWithValue("derivedRole", "author"), HaveKeyWithValue("claimed", false),
			HaveKeyWithValue("state", "open")))

		By("racing both agents for the issue")
		type answer struct {
			isErr   bool
			payload map[string]any
			text    string
		}
		answers := map[string]answer{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, ag := range []*agent{a, b} {
			wg.Go(func() {
				defer GinkgoRecover()
				e, p, t := ag.call("claim", map[string]any{"kind": "issue", "number": n})
				mu.Lock()
				answers[ag.name] = answer{e, p, t}
				mu.Unlock()
			})
		}
		wg.Wait()
		Expect(answers[aName].isErr).NotTo(Equal(answers[bName].isErr), "exactly one wins: %+v", answers)
		winner, loser := a, b
		if answers[aName].isErr {
			winner, loser = b, a
		}
		won, lost := answers[winner.name], answers[loser.name]
		Expect(won.payload["capability"]).To(SatisfyAll(HaveKeyWithValue("role", "author"), HaveKeyWithValue("worker", winner.name)))
		Expect(won.payload).To(HaveKeyWithValue("workBranch", "fleet/"+ns+"/"+fmt.Sprint(won.payload["claim"])), "the author is told its work branch")
		Expect(lost.payload).NotTo(HaveKey("workBranch"))
		Expect(lost.payload).To(SatisfyAll(HaveKeyWithValue("refused", true), HaveKeyWithValue("class", "contention"),
			HaveKeyWithValue("blocker", "foreign_claimed"), HaveKeyWithValue("contentionIsNormal", true),
			HaveKeyWithValue("reassessFromFreshState", true), HaveKeyWithValue("retryPermitted", false)))
		raw, _ := json.Marshal(lost.payload)
		Expect(string(raw)).NotTo(ContainSubstring(winner.name), "the refusal names no other worker")
		Expect(lost.text).To(ContainSubstring("refused (contention"))

		By("each agent sees only its own claims")
		_, out, _ = winner.call("inspect", map[string]any{"kind": "issue", "number": n})
		Expect(out["target"]).To(SatisfyAll(HaveKeyWithValue("claimed", true), HaveKeyWithValue("claimedByYou", true)))
		Expect(out["claims"]).To(ConsistOf(SatisfyAll(HaveKeyWithValue("phase", fleetv1alpha1.ClaimPhaseActive),
			HaveKeyWithValue("workBranch", won.payload["workBranch"]))))
		_, out, _ = loser.call("inspect", map[string]any{"kind": "issue", "number": n})
		Expect(out["target"]).To(SatisfyAll(HaveKeyWithValue("claimed", true), HaveKeyWithValue("claimedByYou", false)))
		Expect(out["claims"]).To(ConsistOf(HaveKeyWithValue("phase", fleetv1alpha1.ClaimPhaseRejected)))

		By("no write succeeds without a gateway")
		isErr, out, _ = winner.call("comment", map[string]any{"body": "on it"})
		Expect(isErr).To(BeTrue())
		Expect(out["error"]).To(ContainSubstring("no gateway"))

		By("releasing")
		isErr, out, text = winner.call("release", map[string]any{})
		Expect(isErr).To(BeFalse(), text)
		Expect(out).To(SatisfyAll(HaveKeyWithValue("phase", fleetv1alpha1.ClaimPhaseReleased), HaveKeyWithValue("endedReason", "release")))
		isErr, _, text = loser.call("release", map[string]any{})
		Expect(isErr).To(BeTrue())
		Expect(text).To(ContainSubstring("has no open claim"))

		By("the loser may choose again after fresh inspection, and now wins")
		isErr, out, text = loser.call("claim", map[string]any{"kind": "issue", "number": n})
		Expect(isErr).To(BeFalse(), text)
		Expect(strings.ToLower(out["claim"].(string))).To(HavePrefix(loser.name))
		isErr, out, text = loser.call("complete", map[string]any{})
		Expect(isErr).To(BeFalse(), text)
		Expect(out).To(HaveKeyWithValue("phase", fleetv1alpha1.ClaimPhaseCompleted))
	})
})

var _ = Describe("kubectl fleet mcp read tools", func() {
	It("reads its worker's repository in Gitea: issue, pull request, diff, file, comments, timeline and search, and no other repository", func() {
		ns := newNamespace()
		login := newLogin("mcp-read")
		a := newAgent(ns, register(ns, login, startChild()))
		owner, name, _ := strings.Cut(repo, "/")
		word := "readtools" + testgitea.RandomHex(4) // found only in this spec's issue and pull request

		By("seeding an issue with a label, an assignee and a comment, and a pull request")
		n := newIssue("mcp read " + word)
		label, err := srv.EnsureLabel(ctx, repo, "mcp-read")
		Expect(err).NotTo(HaveOccurred())
		Expect(srv.AddLabel(ctx, repo, n, label)).To(Succeed())
		Expect(srv.Assign(ctx, repo, n, login)).To(Succeed())
		comment, _, err := srv.SDK(ctx, ownerToken).CreateIssueComment(owner, name, n, gitea.CreateIssueCommentOption{Body: "first look at " + word})
		Expect(err).NotTo(HaveOccurred())
		pr, err := srv.CreatePullWithBody(ctx, ownerToken, repo, "mcp read pr "+word, "Changes for "+word+".\n")
		Expect(err).NotTo(HaveOccurred())
		author := "owner-" + suffix

		By("every tool has an output schema and annotations; the reads are read-only")
		tools, err := a.cs.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		for _, t := range tools.Tools {
			Expect(t.OutputSchema).To(HaveKeyWithValue("type", "object"), "the output schema of %s", t.Name)
			Expect(t.Annotations).NotTo(BeNil(), "the annotations of %s", t.Name)
			if strings.HasPrefix(t.Name, "read_") || t.Name == "list_comments" || t.Name == "search_issues" {
				Expect(t.Annotations.ReadOnlyHint).To(BeTrue(), "%s is read-only", t.Name)
			}
		}

		By("read_issue")
		isErr, out, text := a.call("read_issue", map[string]any{"number": n})
		Expect(isErr).To(BeFalse(), text)
		Expect(out).To(SatisfyAll(HaveKeyWithValue("repository", repo), HaveKeyWithValue("number", float64(n)),
			HaveKeyWithValue("kind", "issue"), HaveKeyWithValue("title", "mcp read "+word), HaveKeyWithValue("body", "Task: mcp read "+word+"\n"),
			HaveKeyWithValue("state", "open"), HaveKeyWithValue("labels", ConsistOf("mcp-read")), HaveKeyWithValue("assignees", ConsistOf(login)),
			HaveKeyWithValue("author", author), HaveKeyWithValue("comments", float64(1))))

		By("read_pr, once Gitea has checked that it merges cleanly")
		Eventually(func(g Gomega) {
			isErr, out, text = a.call("read_pr", map[string]any{"number": pr.Number})
			g.Expect(isErr).To(BeFalse(), text)
			g.Expect(out).To(HaveKeyWithValue("mergeable", true))
		}).Should(Succeed())
		Expect(out).To(SatisfyAll(HaveKeyWithValue("repository", repo), HaveKeyWithValue("number", float64(pr.Number)),
			HaveKeyWithValue("kind", "pr"), HaveKeyWithValue("title", "mcp read pr "+word), HaveKeyWithValue("body", "Changes for "+word+".\n"),
			HaveKeyWithValue("state", "open"), HaveKeyWithValue("author", author), HaveKeyWithValue("headBranch", pr.Branch),
			HaveKeyWithValue("headSHA", pr.HeadSHA), HaveKeyWithValue("baseBranch", "main"), HaveKeyWithValue("merged", false)))
		isErr, _, text = a.call("read_pr", map[string]any{"number": n})
		Expect(isErr).To(BeTrue())
		Expect(text).To(ContainSubstring(fmt.Sprintf("%s#%d is an issue, not a pull request: use read_issue", repo, n)))

		By("read_diff")
		isErr, out, text = a.call("read_diff", map[string]any{"number": pr.Number})
		Expect(isErr).To(BeFalse(), text)
		Expect(out).To(SatisfyAll(HaveKeyWithValue("number", float64(pr.Number)), HaveKeyWithValue("truncated", false)))
		Expect(out["diff"]).To(SatisfyAll(ContainSubstring("diff --git a/"+pr.Branch+"/change.txt b/"+pr.Branch+"/change.txt"),
			ContainSubstring("+change on "+pr.Branch+"\n")))
		Expect(out["bytes"]).To(BeNumerically("==", len(out["diff"].(string))))

		By("read_file, at a ref and at the default branch")
		path := pr.Branch + "/change.txt"
		isErr, out, text = a.call("read_file", map[string]any{"path": path, "ref": pr.Branch})
		Expect(isErr).To(BeFalse(), text)
		Expect(out).To(SatisfyAll(HaveKeyWithValue("repository", repo), HaveKeyWithValue("path", path), HaveKeyWithValue("ref", pr.Branch),
			HaveKeyWithValue("content", "change on "+pr.Branch+"\n"), HaveKeyWithValue("truncated", false)))
		isErr, out, text = a.call("read_file", map[string]any{"path": "README.md"})
		Expect(isErr).To(BeFalse(), text)
		Expect(out).To(SatisfyAll(HaveKeyWithValue("ref", "main"), HaveKeyWithValue("content", ContainSubstring(name))))
		isErr, _, text = a.call("read_file", map[string]any{"path": path})
		Expect(isErr).To(BeTrue(), "the pull request's file is not on the default branch")
		Expect(text).To(ContainSubstring("has no file " + path + " at main"))

		By("list_comments and read_timeline")
		isErr, out, text = a.call("list_comments", map[string]any{"number": n})
		Expect(isErr).To(BeFalse(), text)
		Expect(out).To(SatisfyAll(HaveKeyWithValue("number", float64(n)), HaveKeyWithValue("truncated", false)))
		Expect(out["comments"]).To(ConsistOf(SatisfyAll(HaveKeyWithValue("id", float64(comment.ID)), HaveKeyWithValue("author", author),
			HaveKeyWithValue("body", "first look at "+word), HaveKey("created"))))
		isErr, out, text = a.call("read_timeline", map[string]any{"number": n})
		Expect(isErr).To(BeFalse(), text)
		Expect(out).To(HaveKeyWithValue("number", float64(n)))
		Expect(out["events"]).To(ContainElements(
			SatisfyAll(HaveKeyWithValue("type", "label"), HaveKeyWithValue("label", "mcp-read")),
			HaveKeyWithValue("type", "assignees"),
			SatisfyAll(HaveKeyWithValue("type", "comment"), HaveKeyWithValue("user", author), HaveKeyWithValue("text", "first look at "+word))))

		By("search_issues, by keyword, kind and state")
		item := func(number int64, kind, title string) types.GomegaMatcher {
			return SatisfyAll(HaveKeyWithValue("number", float64(number)), HaveKeyWithValue("kind", kind),
				HaveKeyWithValue("title", title), HaveKeyWithValue("state", "open"))
		}
		isErr, out, text = a.call("search_issues", map[string]any{"query": word})
		Expect(isErr).To(BeFalse(), text)
		Expect(out["items"]).To(ConsistOf(item(n, "issue", "mcp read "+word), item(pr.Number, "pr", "mcp read pr "+word)))
		_, out, _ = a.call("search_issues", map[string]any{"query": word, "kind": "pr"})
		Expect(out["items"]).To(ConsistOf(item(pr.Number, "pr", "mcp read pr "+word)))
		_, out, _ = a.call("search_issues", map[string]any{"query": word, "kind": "issue", "state": "all"})
		Expect(out["items"]).To(ConsistOf(item(n, "issue", "mcp read "+word)))
		_, out, _ = a.call("search_issues", map[string]any{"query": word, "state": "closed"})
		Expect(out["items"]).To(BeEmpty())

		By("no read reaches another repository")
		foreign, err := srv.CreateRepo(ctx, ownerToken, "foreign-"+testgitea.RandomHex(4))
		Expect(err).NotTo(HaveOccurred())
		elsewhere := "elsewhere" + testgitea.RandomHex(4) // found only in the other repository
		fn, err := srv.CreateIssue(ctx, ownerToken, foreign, "foreign "+elsewhere, "Not the worker's.\n")
		Expect(err).NotTo(HaveOccurred())
		isErr, out, text = a.call("read_issue", map[string]any{"number": fn})
		Expect(isErr).To(BeFalse(), text)
		Expect(out).To(SatisfyAll(HaveKeyWithValue("repository", repo), Not(HaveKeyWithValue("title", "foreign "+elsewhere))),
			"the number is read in the worker's repository")
		for _, args := range []map[string]any{{"number": fn, "repository": foreign}, {"number": fn, "owner": owner, "repo": strings.Split(foreign, "/")[1]}} {
			isErr, _, text = a.call("read_issue", args)
			Expect(isErr).To(BeTrue(), "%v names another repository", args)
			Expect(text).NotTo(ContainSubstring(elsewhere))
		}
		isErr, _, text = a.call("read_file", map[string]any{"path": "../../" + foreign + "/raw/main/README.md"})
		Expect(isErr).To(BeTrue())
		Expect(text).To(ContainSubstring(`".." segment`))
		isErr, _, text = a.call("read_issue", map[string]any{"number": 999999})
		Expect(isErr).To(BeTrue())
		Expect(text).To(ContainSubstring(repo + " has no issue or pull request #999999"))
		_, out, _ = a.call("search_issues", map[string]any{"query": elsewhere, "state": "all"})
		Expect(out["items"]).To(BeEmpty(), "the search covers the worker's repository only")
	})
})
