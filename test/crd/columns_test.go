package crd_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// kubectlTable runs kubectl get with args as a cluster administrator and returns its table
// as one map per row, from column header to cell.
func kubectlTable(args ...string) []map[string]string {
	GinkgoHelper()
	kubectl := adminKubectl()
	var lines []string
	Eventually(func(g Gomega) {
		out, errOut, err := kubectl(append([]string{"get"}, args...)...)
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		lines = strings.Split(strings.TrimSpace(out), "\n")
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	// kubectl aligns every cell under its header: a cell runs from its header's first
	// column to the next header's (an empty cell is blank).
	header := lines[0]
	var starts []int
	for i := range header {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	cell := func(l string, k int) string {
		from, to := starts[k], len(l)
		if k+1 < len(starts) {
			to = min(starts[k+1], len(l))
		}
		if from >= len(l) {
			return ""
		}
		return strings.TrimSpace(l[from:to])
	}
	var rows []map[string]string
	for _, l := range lines[1:] {
		row := map[string]string{}
		for k := range starts {
			row[cell(header, k)] = cell(l, k)
		}
		rows = append(rows, row)
	}
	return rows
}

var _ = Describe("RetirementPlan columns", func() {
	It("tells an apply in progress by the Ready reason, and -o wide adds the binding, the approver and the rows retired so far", func() {
		p := newPlan()
		p.Spec.Approval = &fleetv1alpha1.RetirementApproval{Binding: fleetv1alpha1.ApprovalBindingCandidateSet, CandidateFingerprint: sha2,
			WorkerIdentities: []string{"worker-a"}, ApprovedBy: "system:serviceaccount:flux-system:gitops"}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		now := metav1.Now()
		p.Status.Outcome = fleetv1alpha1.OutcomePlanned
		p.Status.Conditions = []metav1.Condition{
			{Type: fleetv1alpha1.ApprovedCondition, Status: metav1.ConditionTrue, Reason: "Approved", Message: "approved", LastTransitionTime: now},
			{Type: fleetv1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "Applying", Message: "applying", LastTransitionTime: now},
		}
		p.Status.ApplyProgress = &fleetv1alpha1.ApplyProgress{State: fleetv1alpha1.ApplyStateInProgress, Applier: "agent-1",
			StartedAt: now, RenewedAt: metav1.NewMicroTime(now.Time), IntendedCount: 9, RetiredSoFar: 7}
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())

		rows := kubectlTable("retirementplans", p.Name, "-n", p.Namespace)
		Expect(rows).To(HaveLen(1))
		Expect(rows[0]).To(HaveKeyWithValue("REASON", "Applying"))
		Expect(rows[0]).To(HaveKeyWithValue("APPROVED", "True"))
		Expect(rows[0]).NotTo(HaveKey("BINDING"), "the binding is a wide column")

		wide := kubectlTable("rplan", p.Name, "-n", p.Namespace, "-o", "wide")
		Expect(wide).To(HaveLen(1))
		Expect(wide[0]).To(HaveKeyWithValue("REASON", "Applying"))
		Expect(wide[0]).To(HaveKeyWithValue("BINDING", fleetv1alpha1.ApprovalBindingCandidateSet))
		Expect(wide[0]).To(HaveKeyWithValue("APPROVER", "system:serviceaccount:flux-system:gitops"))
		Expect(wide[0]).To(HaveKeyWithValue("RETIRED-SO-FAR", "7"))
	})
})
