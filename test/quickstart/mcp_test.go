package quickstart_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
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
	bin := filepath.Join(binDir, "kubectl-fleet")
	cmd := exec.Command(bin, "run", "--name", name, "--identity", identity, "--repository", banner["FLEET_REPOSITORY"],
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
		isErr, _, text = winner.call("release", map[string]any{})
		Expect(isErr).To(BeFalse(), text)
		isErr, out, text = winner.call("comment", map[string]any{"number": issue, "body": "One more."})
		Expect(isErr).To(BeTrue(), text)
		Expect(out).To(HaveKeyWithValue("reason", "no_capability"))
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
