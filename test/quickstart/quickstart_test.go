package quickstart_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

const marker = "@@quickstart-step "

// readSteps returns the "sh quickstart" blocks of docs/quickstart.md with the heading
// each sits under.
func readSteps() []step {
	GinkgoHelper()
	f, err := os.Open(filepath.Join(root, "docs", "quickstart.md"))
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	var steps []step
	var heading string
	var cur *step
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case cur != nil && l == "```":
			steps = append(steps, *cur)
			cur = nil
		case cur != nil:
			cur.script += l + "\n"
		case l == "```sh quickstart":
			cur = &step{heading: heading}
		case strings.HasPrefix(l, "## "):
			heading = strings.TrimPrefix(l, "## ")
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	Expect(cur).To(BeNil(), "an unterminated block")
	return steps
}

// runSteps runs the steps in order in one bash (errexit, nounset, pipefail) in dir and
// fills in each step's output (stdout and stderr).
func runSteps(dir string, steps []step) error {
	var script strings.Builder
	for i, s := range steps {
		fmt.Fprintf(&script, "printf '\\n%s%d\\n'\n%s", marker, i, s.script)
	}
	c, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, "bash", "-euo", "pipefail", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = shellEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second // background workers inherit stdout
	out, err := cmd.CombinedOutput()
	cur := -1
	for _, l := range strings.SplitAfter(string(out), "\n") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(l), marker); ok {
			cur, _ = strconv.Atoi(n)
			continue
		}
		if cur >= 0 && cur < len(steps) {
			steps[cur].output += l
		}
	}
	if err != nil {
		return fmt.Errorf("the walkthrough failed at step %d (%w):\n%s", cur, err, out)
	}
	return nil
}

// killWorkers ends the launchers the walkthrough left running (when it failed early).
func killWorkers(dir string) {
	pids, _ := filepath.Glob(filepath.Join(dir, "w*.pid"))
	for _, p := range pids {
		b, _ := os.ReadFile(p)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}

// output is the output of every step under the heading that starts with prefix.
func output(steps []step, prefix string) string {
	GinkgoHelper()
	var out string
	found := false
	for _, s := range steps {
		if strings.HasPrefix(s.heading, prefix) {
			out += s.output
			found = true
		}
	}
	Expect(found).To(BeTrue(), "no step under %q", prefix)
	return out
}

type comment struct {
	Body string `json:"body"`
	User struct {
		Login string `json:"login"`
	} `json:"user"`
	Reason string `json:"reason"`
}

// gatewayAnswer finds "W: HTTP code" and the JSON body printed after it.
func gatewayAnswer(out, worker string, code int) comment {
	GinkgoHelper()
	re := regexp.MustCompile(`(?m)^` + worker + `: HTTP ` + strconv.Itoa(code) + `\n(\{.*\})$`)
	m := re.FindAllStringSubmatch(out, -1)
	Expect(m).To(HaveLen(1), "one HTTP %d answer for %s in:\n%s", code, worker, out)
	var c comment
	Expect(json.Unmarshal([]byte(m[0][1]), &c)).To(Succeed())
	return c
}

// issueComments reads issue 1's comments from Gitea as its administrator.
func issueComments() []comment {
	GinkgoHelper()
	tok, err := os.ReadFile(banner["FLEET_GITEA_TOKEN_FILE"])
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		banner["GITEA_URL"]+"/api/v1/repos/"+banner["FLEET_REPOSITORY"]+"/issues/1/comments", nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "token "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	var cs []comment
	Expect(json.NewDecoder(resp.Body).Decode(&cs)).To(Succeed())
	return cs
}

// login is the Gitea account of a walkthrough worker: wN acts as worker-N.
func login(worker string) string { return "worker-" + strings.TrimPrefix(worker, "w") }

var _ = Describe("docs/quickstart.md", Ordered, func() {
	var steps []step

	It("runs every step of the walkthrough as written", func() {
		steps = readSteps()
		Expect(len(steps)).To(BeNumerically(">=", 8), "the walkthrough's blocks")
		dir := GinkgoT().TempDir()
		DeferCleanup(killWorkers, dir)
		Expect(runSteps(dir, steps)).To(Succeed())
		for _, s := range steps {
			GinkgoWriter.Println(s.String())
		}
	})

	It("registers four workers", func() {
		out := output(steps, "2.")
		for _, w := range []string{"w1", "w2", "w3", "w4"} {
			Expect(out).To(MatchRegexp(`kubectl fleet run: registered default/%s \(pid \d+\)`, w))
		}
		// The registered process is the agent, and it runs as its own OS user, not as the
		// launcher's (root here), so it cannot read the launcher's environment or files.
		Expect(out).To(MatchRegexp(`(?m)^fleet-agent\s+\d+\s+sleep 3600$`))
	})

	var winner, loser string
	It("lets exactly one of two racing workers win the issue; the other gets the typed contention refusal", func() {
		out := output(steps, "3.")
		m := regexp.MustCompile(`(?m)^winner: (w[12]), loser: (w[12])$`).FindStringSubmatch(out)
		Expect(m).NotTo(BeNil(), out)
		winner, loser = m[1], m[2]
		Expect(winner).NotTo(Equal(loser))
		Expect(out).To(MatchRegexp(`(?i)author`))
		Expect(out).To(ContainSubstring("refused (contention, foreign_claimed)"))
		Expect(strings.Count(out, "\nexit 0\n")+strings.Count(out, "\nexit 10\n")).To(Equal(2), out)
	})

	It("creates the winner's comment as its own Gitea identity through the gateway and refuses the loser's", func() {
		out := output(steps, "4.")
		won := gatewayAnswer(out, winner, http.StatusCreated)
		Expect(won.User.Login).To(Equal(login(winner)))
		Expect(won.Body).To(Equal("I am taking this issue."))
		lost := gatewayAnswer(out, loser, http.StatusForbidden)
		Expect(lost.Reason).To(Equal("no_capability"))
	})

	It("refuses the winner too once it released the issue", func() {
		out := output(steps, "5.")
		Expect(out).To(ContainSubstring("released"))
		Expect(gatewayAnswer(out, winner, http.StatusForbidden).Reason).To(Equal("no_capability"))
		By("Gitea holds one worker comment, the winner's: refusals wrote nothing")
		var byWorkers []comment
		for _, c := range issueComments() {
			if strings.HasPrefix(c.User.Login, "worker-") {
				byWorkers = append(byWorkers, c)
			}
		}
		Expect(byWorkers).To(HaveLen(1))
		Expect(byWorkers[0].User.Login).To(Equal(login(winner)))
		Expect(byWorkers[0].Body).To(Equal("I am taking this issue."))
	})

	It("takes an issue through a whole task cycle, each claim made right after the previous write and ended by its own work", taskCycle(&steps))

	It("shows the killed worker's row stale and the others live", func() {
		out := output(steps, "7.")
		Expect(out).To(MatchRegexp(`(?m)^w3\s+worker-3\s+Active\s+stale\s`))
		Expect(out).To(MatchRegexp(`(?m)^w1\s+worker-1\s+Active\s+live\s`))
		Expect(out).To(MatchRegexp(`(?m)^w2\s+worker-2\s+Active\s+live\s`))
		Expect(out).To(MatchRegexp(`(?m)^w4\s+worker-4\s+Active\s+live\s`))
	})

	It("plans exactly the killed worker's retirement and applies it through the GitOps stand-in", func() {
		out := output(steps, "8.")
		Expect(out).To(MatchRegexp(`Plan default/plan-\w+: planned; 4 assessed, 1 candidates, 3 preserved`))
		Expect(out).To(ContainSubstring("Candidates (1):\n    w3 "))
		Expect(out).To(ContainSubstring("worker_live (3)"))
		Expect(out).To(MatchRegexp(`retirementplan.fleet.giteatools.dev/plan-\w+ (configured|created)`))
		Expect(out).To(MatchRegexp(`retirementplan.fleet.giteatools.dev/plan-\w+ condition met`))
		Expect(out).To(MatchRegexp(`(?m)^w3\s+worker-3\s+Retired\s+historical\s`))
		Expect(out).To(MatchRegexp(`(?m)^w1\s+worker-1\s+Active\s+live\s`))
		Expect(out).To(MatchRegexp(`(?m)^w2\s+worker-2\s+Active\s+live\s`))
		Expect(out).To(MatchRegexp(`(?m)^w4\s+worker-4\s+Active\s+live\s`))
	})

	It("shows three live workers, one historical, and a safe live fleet", func() {
		out := output(steps, "9.")
		Expect(out).To(MatchRegexp(`(?m)^default\s+3\s+0\s+1\s+0\s+true\s+0\s*$`))
		Expect(out).To(MatchRegexp(`(?m)^w3\s+worker-3\s+Retired\s+historical\s`))
	})

	It("serves the metrics to an authorized scraper: the gateway counted the allowed comment and the refusals", func() {
		out := output(steps, "10.")
		Expect(out).To(MatchRegexp(`(?m)^fleet_gateway_requests_total\{operation="comment",verdict="allowed"\} 1$`))
		Expect(out).To(MatchRegexp(`(?m)^fleet_gateway_requests_total\{operation="comment",verdict="refused"\} 2$`))
		Expect(out).To(MatchRegexp(`(?m)^fleet_gitea_hardening_findings 0$`), "the demo's Gitea holds to docs/gateway.md")
	})

	It("claims in a second repository served through a GiteaServer and a GiteaRepository, through the same gateway", func() {
		out := output(steps, "11.")
		Expect(out).To(ContainSubstring("gitearepository.fleet.giteatools.dev/docs condition met"))
		Expect(out).To(MatchRegexp(`(?m)^giteaserver.fleet.giteatools.dev/demo\s+http\S+\s+\S+\s+True\s`))
		Expect(out).To(MatchRegexp(`(?m)^gitearepository.fleet.giteatools.dev/docs\s+demo\s+fleet\s+docs\s+\d+\s+True\s`))
		Expect(out).To(ContainSubstring("workerregistration.fleet.giteatools.dev/d1 condition met"))
		Expect(out).To(MatchRegexp(`(?m)^\S+\s+fleet/docs#1\s+author\s`), "the capability: issue 1 of fleet/docs, as author")
		Expect(out).To(ContainSubstring("d1: HTTP 201"))
		Expect(out).To(ContainSubstring(`"login":"worker-2"`))
		Expect(out).To(ContainSubstring("released"))
	})

	It("gives the demo's worker accounts no way to write to Gitea around the gateway", func() {
		demo := filepath.Dir(banner["FLEET_DEMO_MANIFESTS"])
		env, err := os.ReadFile(filepath.Join(demo, "env"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(env)).To(ContainSubstring("Worker accounts"))
		Expect(string(env)).NotTo(MatchRegexp(`\(password \S+\)`), "no worker password is printed")
		api := banner["GITEA_URL"] + "/api/v1"
		post := func(path, user, password, token, body string) int {
			GinkgoHelper()
			req, err := http.NewRequest(http.MethodPost, api+path, strings.NewReader(body))
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Content-Type", "application/json")
			if token != "" {
				req.Header.Set("Authorization", "token "+token)
			} else {
				req.SetBasicAuth(user, password)
			}
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		By("the password the demo once printed mints no token")
		Expect(post("/users/worker-1/tokens", "worker-1", "Fleet-W0rker-Passw0rd", "", `{"name":"x","scopes":["write:repository"]}`)).
			To(Equal(http.StatusUnauthorized))
		By("the worker's own token cannot comment")
		tok, err := os.ReadFile(filepath.Join(demo, "tokens", "worker-1"))
		Expect(err).NotTo(HaveOccurred())
		Expect(post("/repos/"+banner["FLEET_REPOSITORY"]+"/issues/1/comments", "", "", strings.TrimSpace(string(tok)), `{"body":"direct"}`)).
			To(Equal(http.StatusForbidden))
		By("main is protected: only the controller's account may push")
		req, err := http.NewRequest(http.MethodGet, api+"/repos/"+banner["FLEET_REPOSITORY"]+"/branch_protections", nil)
		Expect(err).NotTo(HaveOccurred())
		admin, err := os.ReadFile(banner["FLEET_GITEA_TOKEN_FILE"])
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "token "+strings.TrimSpace(string(admin)))
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		var rules []struct {
			RuleName      string   `json:"rule_name"`
			EnablePush    bool     `json:"enable_push"`
			Allowlist     bool     `json:"enable_push_whitelist"`
			AllowlistUser []string `json:"push_whitelist_usernames"`
		}
		Expect(json.NewDecoder(resp.Body).Decode(&rules)).To(Succeed())
		Expect(rules).To(ContainElement(SatisfyAll(
			HaveField("RuleName", "main"), HaveField("Allowlist", true), HaveField("AllowlistUser", Not(ContainElement(HavePrefix("worker-")))))))
	})

	It("serves the worker tools over MCP: the race winner comments through its tool, the loser and then the released winner are refused with the typed reason", mcpRace)

	It("lets four MCP agents take an issue through a whole task cycle with their tools alone, each claim right after the write before", mcpCycle)

	It("serves the MCP tools on the second repository: an agent bound to fleet/docs claims and comments there, and nothing reaches fleet/demo", mcpSecondRepository)
})
