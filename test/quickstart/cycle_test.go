package quickstart_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// giteaGet reads one Gitea API path as the demo's administrator into out.
func giteaGet(path string, out any) {
	GinkgoHelper()
	tok, err := os.ReadFile(banner["FLEET_GITEA_TOKEN_FILE"])
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, banner["GITEA_URL"]+"/api/v1"+path, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "token "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET %s", path)
	Expect(json.NewDecoder(resp.Body).Decode(out)).To(Succeed())
}

// taskClaims lists the TaskClaims of the walkthrough's namespace with kubectl.
func taskClaims() []fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, "kubectl", "get", "taskclaims", "-o", "json")
	cmd.Env = shellEnv()
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred())
	var list fleetv1alpha1.TaskClaimList
	Expect(json.Unmarshal(out, &list)).To(Succeed())
	return list.Items
}

// taskCycle checks the walkthrough's whole task cycle on issue 3: four workers, four
// roles, each claim made right after the write before it (the walkthrough runs under
// errexit, so a refused claim would have stopped it) and ended by its own work, and what
// Gitea holds afterwards. The timing of every step goes into the report.
func taskCycle(steps *[]step) func() {
	return func() {
		out := output(*steps, "6.")

		By("every step is timed")
		timings := regexp.MustCompile(`(?m)^took (\d+\.\d+)s: (.+)$`).FindAllStringSubmatch(out, -1)
		var names []string
		for _, m := range timings {
			names = append(names, m[2])
			AddReportEntry("quickstart task cycle: "+m[2], m[1]+" s")
		}
		Expect(names).To(Equal([]string{
			"w1 claims issue 3", "w1 pushes its work branch", "w1 opens the pull request",
			"w2 claims the pull request", "w2 reviews",
			"w3 claims the pull request", "w3 approves",
			"w4 claims the pull request", "w4 merges",
		}), out)

		By("the author pushed to its work branch and opened the pull request through the gateway")
		m := regexp.MustCompile(`(?m)^pull request: #(\d+)$`).FindStringSubmatch(out)
		Expect(m).NotTo(BeNil(), out)
		pr, err := strconv.ParseInt(m[1], 10, 64)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`(?m)^\S+\s+fleet/demo#3\s+author\s+\S+\s+\S+\s+fleet/default/\S+$`))
		Expect(out).To(MatchRegexp(`(?m)^w1 POST /pulls: HTTP 201$`))

		By("each next worker got the role the pull request's state gives, right after the write before")
		for _, role := range []string{"reviewer", "approver", "merger"} {
			Expect(out).To(MatchRegexp(`(?m)^\S+\s+fleet/demo!%d@[0-9a-f]+\s+%s\s`, pr, role))
		}
		Expect(out).To(MatchRegexp(`(?m)^w2 POST /pulls/%d/reviews: HTTP 200$`, pr))
		Expect(out).To(MatchRegexp(`(?m)^w3 POST /pulls/%d/reviews: HTTP 200$`, pr))
		Expect(out).To(MatchRegexp(`(?m)^w4 POST /pulls/%d/merge: HTTP 200$`, pr))
		Expect(out).To(ContainSubstring(`"state":"closed"`))

		By("each claim of the cycle ended Completed by its own work")
		roles := map[string]string{}
		for _, tc := range taskClaims() {
			onCycle := (tc.Spec.Target.Kind == fleetv1alpha1.TargetKindIssue && tc.Spec.Target.Number == 3) ||
				(tc.Spec.Target.Kind == fleetv1alpha1.TargetKindPullRequest && tc.Spec.Target.Number == pr)
			if !onCycle {
				continue
			}
			Expect(tc.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseCompleted), "claim %s of %s", tc.Name, tc.Spec.Worker)
			Expect(tc.Status.EndedReason).To(Equal("work_done"), "claim %s of %s", tc.Name, tc.Spec.Worker)
			roles[tc.Spec.Worker] = tc.Status.Role
		}
		Expect(roles).To(Equal(map[string]string{"w1": "author", "w2": "reviewer", "w3": "approver", "w4": "merger"}))

		By("Gitea holds the work under four identities: the pull request merged by the merger, the issue closed")
		var pull struct {
			Merged   bool `json:"merged"`
			User     struct{ Login string }
			MergedBy struct{ Login string } `json:"merged_by"`
			Head     struct{ Ref string }
		}
		giteaGet("/repos/"+banner["FLEET_REPOSITORY"]+"/pulls/"+m[1], &pull)
		Expect(pull.Merged).To(BeTrue())
		Expect(pull.User.Login).To(Equal("worker-1"))
		Expect(pull.MergedBy.Login).To(Equal("worker-4"))
		Expect(pull.Head.Ref).To(HavePrefix("fleet/default/"))
		var reviews []struct {
			State string
			User  struct{ Login string }
		}
		giteaGet("/repos/"+banner["FLEET_REPOSITORY"]+"/pulls/"+m[1]+"/reviews", &reviews)
		var got []string
		for _, r := range reviews {
			got = append(got, r.User.Login+" "+r.State)
		}
		Expect(got).To(Equal([]string{"worker-2 COMMENT", "worker-3 APPROVED"}))
		var issue struct{ State string }
		giteaGet("/repos/"+banner["FLEET_REPOSITORY"]+"/issues/3", &issue)
		Expect(issue.State).To(Equal("closed"))
	}
}
