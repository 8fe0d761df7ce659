package gateway_test

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gateway"
)

// expectEndedNow reads the claim once, straight from the API server, without waiting: its
// own work ended it Completed, and its record and lock are already released.
func expectEndedNow(tc *fleetv1alpha1.TaskClaim) {
	GinkgoHelper()
	cur := &fleetv1alpha1.TaskClaim{}
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur)).To(Succeed())
	Expect(cur.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseCompleted),
		"claim %s right after its completing write's answer (ended reason %q)", tc.Name, cur.Status.EndedReason)
	Expect(cur.Status.EndedReason).To(Equal(string(claim.ExpiryWorkDone)))
	Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, fleetv1alpha1.RecordClearedCondition)).To(BeTrue(),
		"claim %s has released its record and lock", tc.Name)
}

// completionWaits counts the gateway's waits for a completed claim, by outcome, from the
// manager's metrics registry (the manager runs in this process).
func completionWaits() map[string]uint64 {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	out := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != gateway.CompletionWaitMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

var _ = Describe("A write that completes a claim", func() {
	It("ends the claim before the worker reads Gitea's answer, so the next role claims the item at once", func() {
		waitsBefore := completionWaits()
		a, r, ap, m := newWorker(nsMain), newWorker(nsMain), newWorker(nsMain), newWorker(nsMain)
		n := newIssue("completed by its own pull request")
		tc := a.activate(issueTarget(n))
		branch := claim.WorkBranch(tc.Namespace, tc.Name)
		Expect(tc.Status.Capability.WorkBranch).To(Equal(branch), "the author's status names its work branch")
		dir := a.cloneVia()
		out, err := a.commitAndPush(dir, "refs/heads/"+branch)
		Expect(err).NotTo(HaveOccurred(), "push to the work branch: %s", out)
		head := headOf(dir)

		By("the author opens its pull request: its claim has ended when the answer arrives")
		ans := a.via(http.MethodPost, apiPath("/pulls"), map[string]string{"head": branch, "base": "main", "title": "Implement", "body": "Fixes #" + itoa(n)})
		Expect(ans.status).To(Equal(http.StatusCreated), "%s", ans.body)
		expectEndedNow(tc)
		pull := fleetv1alpha1.TaskTarget{Repository: repo, Kind: fleetv1alpha1.TargetKindPullRequest, Number: numberOf(ans), HeadSHA: head}

		// Each next role claims the pull request right after the previous role's answer:
		// the lock is free already, so no claim loses to contention (activate stops at a
		// refusal).
		for _, step := range []struct {
			w    *worker
			role claim.Role
			path string
			body map[string]string
		}{
			{r, claim.RoleReviewer, "/pulls/%d/reviews", map[string]string{"event": "COMMENT", "commit_id": head, "body": "looked at it"}},
			{ap, claim.RoleApprover, "/pulls/%d/reviews", map[string]string{"event": "APPROVED", "commit_id": head, "body": "ok"}},
			{m, claim.RoleMerger, "/pulls/%d/merge", map[string]string{"Do": "merge", "head_commit_id": head}},
		} {
			By("the " + string(step.role) + " claims it and does its work")
			c := step.w.activate(pull)
			Expect(c.Status.Capability.Role).To(Equal(string(step.role)))
			Expect(c.Status.Capability.WorkBranch).To(BeEmpty(), "a role that pushes nothing has no work branch")
			ans := step.w.via(http.MethodPost, apiPath(step.path, pull.Number), step.body)
			Expect(ans.status).To(Equal(http.StatusOK), "%s", ans.body)
			expectEndedNow(c)
		}
		Expect(pullMerged(pull.Number)).To(BeTrue())

		By("each of the four answers waited for the controller's look, none for the timeout")
		waits := completionWaits()
		Expect(waits["looked"] - waitsBefore["looked"]).To(BeEquivalentTo(4))
		Expect(waits["timeout"]).To(Equal(waitsBefore["timeout"]))
	})
})
