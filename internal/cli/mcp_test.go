package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/cli"
	"github.com/giteatools/fleet-controller/test/support/testenv"
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
		Expect(names).To(ConsistOf("inspect", "claim", "release", "complete", "comment", "review", "approve", "merge", "open_pr"))

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
