package quickstart_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// agent is an SDK client session with `kubectl fleet mcp`, started as a registered worker
// by `kubectl fleet run` the way an agent's MCP configuration does, on make run's control
// plane and gateway.
type agent struct {
	name string
	cs   *mcp.ClientSession
}

func startAgent(name, identity string) *agent {
	GinkgoHelper()
	return startAgentOf(name, identity, banner["FLEET_REPOSITORY"])
}

// startAgentOf is startAgent for a worker registered as bound to repository.
func startAgentOf(name, identity, repository string) *agent {
	GinkgoHelper()
	bin := filepath.Join(binDir, "kubectl-fleet")
	cmd := exec.Command(bin, "run", "--name", name, "--identity", identity, "--repository", repository,
		"--ttl", "30s", "--", bin, "mcp")
	cmd.Env = shellEnv()
	cmd.Stderr = GinkgoWriter
	c, cancel := ctxWithTimeout(5 * time.Minute)
	DeferCleanup(cancel)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent-" + name, Version: "v0"}, nil).
		Connect(c, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cs.Close)
	return &agent{name: name, cs: cs}
}

// call calls a tool and returns whether it failed and its structured payload.
func (a *agent) call(tool string, args map[string]any) (bool, map[string]any, string) {
	GinkgoHelper()
	c, cancel := ctxWithTimeout(5 * time.Minute)
	defer cancel()
	res, err := a.cs.CallTool(c, &mcp.CallToolParams{Name: tool, Arguments: args})
	Expect(err).NotTo(HaveOccurred(), "%s %s: protocol error", a.name, tool)
	var payload map[string]any
	b, err := json.Marshal(res.StructuredContent)
	Expect(err).NotTo(HaveOccurred())
	_ = json.Unmarshal(b, &payload)
	var text string
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	return res.IsError, payload, text
}

// mcpRace: two agents race for issue 2 through their MCP tools; the winner comments
// through its tool, the loser's comment is refused with the gateway's typed reason, and
// after release the winner's is refused too. It runs after the walkthrough (whose plan
// counts the fleet's rows).
func mcpRace() {
	{
		a, b := startAgent("agent-a", "worker-1"), startAgent("agent-b", "worker-2")
		const issue = 2

		By("both agents claim issue 2 at once")
		type result struct {
			isErr   bool
			payload map[string]any
			text    string
		}
		results := map[*agent]result{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, ag := range []*agent{a, b} {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				isErr, p, text := ag.call("claim", map[string]any{"kind": "issue", "number": issue})
				mu.Lock()
				results[ag] = result{isErr, p, text}
				mu.Unlock()
			}()
		}
		wg.Wait()
		var winner, loser *agent
		for ag, r := range results {
			if r.isErr {
				loser = ag
				Expect(r.payload).To(HaveKeyWithValue("class", "contention"), r.text)
			} else {
				winner = ag
				Expect(r.text + jsonString(r.payload)).To(ContainSubstring("author"))
			}
		}
		Expect(winner).NotTo(BeNil(), "one agent wins: %v", results)
		Expect(loser).NotTo(BeNil(), "one agent loses: %v", results)

		By("the winner comments through its tool")
		isErr, out, text := winner.call("comment", map[string]any{"number": issue, "body": "Working on it, via MCP."})
		Expect(isErr).To(BeFalse(), text)
		Expect(out).To(HaveKeyWithValue("done", "commented"))

		By("the loser's comment tool is refused with the gateway's typed reason")
		isErr, out, text = loser.call("comment", map[string]any{"number": issue, "body": "Me too."})
		Expect(isErr).To(BeTrue(), text)
		Expect(out).To(HaveKeyWithValue("refused", true))
		Expect(out).To(HaveKeyWithValue("reason", "no_capability"))

		By("after release, the winner's comment tool is refused too")
		winner.releaseThenRefused(issue)
	}
}

// releaseThenRefused releases the agent's claim with its tool, then expects its comment
// tool on issue to be refused for want of a capability.
func (a *agent) releaseThenRefused(issue int64) {
	GinkgoHelper()
	isErr, _, text := a.call("release", map[string]any{})
	Expect(isErr).To(BeFalse(), text)
	isErr, out, text := a.call("comment", map[string]any{"number": issue, "body": "One more."})
	Expect(isErr).To(BeTrue(), text)
	Expect(out).To(HaveKeyWithValue("reason", "no_capability"))
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// mcpCycle: four agents take issue 4 through a whole task cycle with their MCP tools
// alone, as an agent without git or a shell would: the author claims it, commits a file
// to its work branch (write_file) and opens the pull request; the reviewer, approver and
// merger each claim the pull request right after the write before and do their one
// write. Every step is timed; every claim ends Completed by its own work.
func mcpCycle() {
	const issue = 4
	author, reviewer := startAgent("agent-author", "worker-1"), startAgent("agent-reviewer", "worker-2")
	approver, merger := startAgent("agent-approver", "worker-3"), startAgent("agent-merger", "worker-4")
	step := func(what string, a *agent, tool string, args map[string]any) map[string]any {
		GinkgoHelper()
		By(what)
		start := time.Now()
		isErr, out, text := a.call(tool, args)
		AddReportEntry("MCP task cycle: "+what, time.Since(start).Round(time.Millisecond).String())
		Expect(isErr).To(BeFalse(), "%s: %s", what, text)
		return out
	}
	role := func(out map[string]any) any { return out["capability"].(map[string]any)["role"] }

	out := step("the author claims issue 4", author, "claim", map[string]any{"kind": "issue", "number": issue})
	Expect(role(out)).To(Equal("author"))
	branch, _ := out["workBranch"].(string)
	Expect(branch).To(HavePrefix("fleet/default/"))
	out = step("the author commits a file to its work branch, without git", author, "write_file",
		map[string]any{"path": "CHANGELOG.md", "content": "# Changelog\n\n- The fleet keeps a changelog.\n", "message": "Start the changelog"})
	Expect(out).To(SatisfyAll(HaveKeyWithValue("done", "created"), HaveKeyWithValue("branch", branch), HaveKeyWithValue("startedBranch", true)))
	out = step("the author opens the pull request from its work branch", author, "open_pr", map[string]any{"title": "Add a changelog"})
	Expect(out).To(HaveKeyWithValue("done", "opened"))
	pr := int64(out["number"].(float64))

	out = step("the reviewer claims the pull request", reviewer, "claim", map[string]any{"kind": "pr", "number": pr})
	Expect(role(out)).To(Equal("reviewer"))
	step("the reviewer reviews", reviewer, "review", map[string]any{"body": "Reads well."})
	out = step("the approver claims the pull request", approver, "claim", map[string]any{"kind": "pr", "number": pr})
	Expect(role(out)).To(Equal("approver"))
	step("the approver approves", approver, "approve", map[string]any{})
	out = step("the merger claims the pull request", merger, "claim", map[string]any{"kind": "pr", "number": pr})
	Expect(role(out)).To(Equal("merger"))
	step("the merger merges", merger, "merge", map[string]any{"style": "merge"})

	By("every claim of the cycle ended Completed by its own work, and Gitea holds the merged work")
	roles := map[string]string{}
	for _, tc := range taskClaims() {
		if strings.HasPrefix(tc.Spec.Worker, "agent-") && tc.Spec.Worker != "agent-a" && tc.Spec.Worker != "agent-b" {
			Expect(tc.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseCompleted), "claim %s", tc.Name)
			Expect(tc.Status.EndedReason).To(Equal("work_done"), "claim %s", tc.Name)
			roles[tc.Spec.Worker] = tc.Status.Role
		}
	}
	Expect(roles).To(Equal(map[string]string{"agent-author": "author", "agent-reviewer": "reviewer", "agent-approver": "approver", "agent-merger": "merger"}))
	var pull struct {
		Merged   bool                   `json:"merged"`
		MergedBy struct{ Login string } `json:"merged_by"`
	}
	giteaGet(fmt.Sprintf("/repos/%s/pulls/%d", banner["FLEET_REPOSITORY"], pr), &pull)
	Expect(pull.Merged).To(BeTrue())
	Expect(pull.MergedBy.Login).To(Equal("worker-4"))
	var file struct{ Path string }
	giteaGet("/repos/"+banner["FLEET_REPOSITORY"]+"/contents/CHANGELOG.md?ref=main", &file)
	Expect(file.Path).To(Equal("CHANGELOG.md"))
	var is struct{ State string }
	giteaGet(fmt.Sprintf("/repos/%s/issues/%d", banner["FLEET_REPOSITORY"], issue), &is)
	Expect(is.State).To(Equal("closed"))
}

// mcpSecondRepository: an agent registered as bound to fleet/docs, the repository make
// run serves through a GiteaServer and a GiteaRepository, claims issue 2 there with its
// MCP tool (naming no repository: its registration's is the default) and comments on it
// through its tool and the same gateway. The claim, its capability and the comment are
// fleet/docs's, on the demo GiteaServer; fleet/demo's issue 2, same number, gets nothing.
func mcpSecondRepository() {
	const issue = 2
	docs := startAgentOf("agent-docs", "worker-2", "fleet/docs")

	By("the agent claims issue 2 of its registration's repository, fleet/docs")
	isErr, out, text := docs.call("claim", map[string]any{"kind": "issue", "number": issue})
	Expect(isErr).To(BeFalse(), text)
	Expect(out["capability"]).To(HaveKeyWithValue("role", "author"))
	Expect(out["capability"]).To(HaveKeyWithValue("repository", "fleet/docs"))
	var held *fleetv1alpha1.TaskClaim
	for _, tc := range taskClaims() {
		if tc.Spec.Worker == "agent-docs" && tc.Status.Phase == fleetv1alpha1.ClaimPhaseActive {
			held = &tc
		}
	}
	Expect(held).NotTo(BeNil(), "the agent's claim is Active")
	Expect(held.Spec.Target.Repository).To(Equal("fleet/docs"))
	Expect(held.Status.Repository).NotTo(BeNil(), "the claim recorded where its repository is")
	Expect(held.Status.Repository.Server).To(Equal("demo"), "fleet/docs is served through the GiteaServer demo")

	By("the agent comments through its tool; the comment lands on fleet/docs#2 only")
	body := fmt.Sprintf("Drafting the glossary, via MCP (%d).", time.Now().UnixNano())
	isErr, out, text = docs.call("comment", map[string]any{"number": issue, "body": body})
	Expect(isErr).To(BeFalse(), text)
	Expect(out).To(HaveKeyWithValue("done", "commented"))
	type comment struct {
		Body string
		User struct{ Login string }
	}
	var onDocs, onDemo []comment
	giteaGet(fmt.Sprintf("/repos/fleet/docs/issues/%d/comments", issue), &onDocs)
	giteaGet(fmt.Sprintf("/repos/%s/issues/%d/comments", banner["FLEET_REPOSITORY"], issue), &onDemo)
	Expect(onDocs).To(ContainElement(SatisfyAll(HaveField("Body", body), HaveField("User.Login", "worker-2"))))
	Expect(onDemo).NotTo(ContainElement(HaveField("Body", body)), "the same number in the other repository gets nothing")

	By("the agent releases; its comment tool is refused from then on")
	docs.releaseThenRefused(issue)
}
