package retirementplan_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/test/support/argohealth"
)

// healthScript is the Argo CD health check the samples ship.
const healthScript = "../../config/samples/gitops/argocd/retirementplan-health.lua"

// phase is what the GitOps tools see of a plan at one moment: kstatus's verdict (Flux's
// wait), the shipped Argo CD health check's, and the conditions that gave them.
type phase struct {
	Name, KStatus, Argo, Ready, Reconciling, Approved string
}

func (p phase) String() string {
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", p.Name, p.KStatus, p.Argo, p.Ready, p.Reconciling, p.Approved)
}

// phaseOf reads the plan as the API server serves it (defaults applied) and judges it with
// the real kstatus library and the shipped Lua script.
func phaseOf(name string, key client.ObjectKey) phase {
	GinkgoHelper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(fleetv1alpha1.GroupVersion.WithKind("RetirementPlan"))
	Expect(k8sClient.Get(ctx, key, u)).To(Succeed())
	res, err := kstatus.Compute(u)
	Expect(err).NotTo(HaveOccurred())
	script, err := os.ReadFile(healthScript)
	Expect(err).NotTo(HaveOccurred())
	health, err := argohealth.Run(string(script), u.Object)
	Expect(err).NotTo(HaveOccurred())
	p := &fleetv1alpha1.RetirementPlan{}
	Expect(k8sClient.Get(ctx, key, p)).To(Succeed())
	cond := func(t string) string {
		if c := meta.FindStatusCondition(p.Status.Conditions, t); c != nil {
			return string(c.Status) + "/" + c.Reason
		}
		return "-"
	}
	return phase{Name: name, KStatus: res.Status.String(), Argo: health.Status, Ready: cond(fleetv1alpha1.ReadyCondition),
		Reconciling: cond(fleetv1alpha1.ReconcilingCondition), Approved: cond(fleetv1alpha1.ApprovedCondition)}
}

var _ = Describe("RetirementPlan as kstatus and Argo CD see it", func() {
	It("is in progress until observed, while waiting for host plans, while applying and while an approver is looked at again; current once planned or applied; failed once refused", func() {
		ns := newNamespace()
		dead := eligible(ns, "dead")
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		var table []phase
		kubectl, err := env.Kubectl()
		Expect(err).NotTo(HaveOccurred())
		var header string
		var rows []string
		see := func(name string, p *fleetv1alpha1.RetirementPlan) {
			GinkgoHelper()
			table = append(table, phaseOf(name, client.ObjectKeyFromObject(p)))
			out, errOut, err := kubectl("get", "rplan", "-n", p.Namespace, p.Name, "-o", "wide")
			Expect(err).NotTo(HaveOccurred(), errOut)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			Expect(lines).To(HaveLen(2))
			header = lines[0]
			rows = append(rows, lines[1]+"   # "+name)
		}
		reconcileFleetOnly := func(p *fleetv1alpha1.RetirementPlan) {
			GinkgoHelper()
			_, err := r.fleet.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
			Expect(err).NotTo(HaveOccurred())
		}

		By("one plan through every step of a clean apply")
		p := newPlanObj(ns, "direct-kstatus")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		see("created, not observed yet", p)
		reconcileFleetOnly(p)
		see("waiting for its host plans", p)
		p = reconcilePlan(r, p)
		see("planned, awaiting approval", p)
		Expect(approve(gitops(), p)).To(Succeed())
		see("approval landed, not observed yet", p)
		reconcileFleetOnly(p)
		see("approved, applying", p)
		hp := hostPlanOf(getPlan(p))
		r.BeforeWrite = func(context.Context, string) {
			see("host plan writing its rows", hp)
			r.BeforeWrite = nil
		}
		p = reconcilePlan(r, p)
		see("applied", p)
		Expect(get(dead).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired))

		By("an approval that can never match")
		eligible(ns, "dead-2")
		mismatch := newPlanObj(ns, "direct-kstatus-mismatch")
		Expect(k8sClient.Create(ctx, mismatch)).To(Succeed())
		mismatch = reconcilePlan(r, mismatch)
		a := approvalAs(whoAmI(gitops()), mismatch)
		a.WorkerIdentities = append(a.WorkerIdentities, "bot-nobody")
		Expect(setApproval(gitops(), mismatch, a)).To(Succeed())
		reconcilePlan(r, mismatch)
		see("approval refused (ApprovalMismatch)", mismatch)

		By("an approval the registry moved away from before the apply")
		moved := newPlanObj(ns, "direct-kstatus-moved")
		Expect(k8sClient.Create(ctx, moved)).To(Succeed())
		moved = reconcilePlan(r, moved)
		Expect(approve(gitops(), moved)).To(Succeed())
		eligible(ns, "dead-3")
		reconcilePlan(r, moved)
		see("apply refused (registry moved)", moved)

		By("an approver whose role went away")
		eligible(ns, "dead-4")
		rb := bind(ns, "frank", "fleet-retirement-approver")
		waiting := newPlanObj(ns, "direct-kstatus-approver")
		Expect(k8sClient.Create(ctx, waiting)).To(Succeed())
		waiting = reconcilePlan(r, waiting)
		approveEventually(impersonating("frank"), waiting)
		Expect(k8sClient.Delete(ctx, rb)).To(Succeed())
		Eventually(func(g Gomega) {
			reconcilePlan(r, waiting)
			g.Expect(approvedReason(getPlan(waiting))).To(Equal([]string{"False", fleetv1alpha1.ReasonApproverNotAuthorized}))
		}).Should(Succeed())
		see("approver not authorized, looked at again", waiting)

		var lines []string
		for _, ph := range table {
			lines = append(lines, ph.String())
		}
		AddReportEntry("phases", strings.Join(lines, "\n"))
		AddReportEntry("kubectl get rplan -o wide", header+"\n"+strings.Join(rows, "\n"))
		Expect(table).To(Equal([]phase{
			{"created, not observed yet", "InProgress", "Progressing", "-", "-", "-"},
			{"waiting for its host plans", "InProgress", "Progressing", "False/WaitingForHostPlans", "True/WaitingForHostPlans", "-"},
			{"planned, awaiting approval", "Current", "Healthy", "True/Planned", "-", "False/AwaitingApproval"},
			{"approval landed, not observed yet", "InProgress", "Progressing", "True/Planned", "-", "False/AwaitingApproval"},
			{"approved, applying", "InProgress", "Progressing", "False/Applying", "True/Applying", "True/ApprovalMatchesPlan"},
			{"host plan writing its rows", "InProgress", "Progressing", "False/Applying", "True/Applying", "True/ApprovedThroughFleetPlan"},
			{"applied", "Current", "Healthy", "True/ApplySucceeded", "-", "True/ApprovalMatchesPlan"},
			{"approval refused (ApprovalMismatch)", "Failed", "Degraded", "False/ApprovalMismatch", "-", "False/ApprovalMismatch"},
			{"apply refused (registry moved)", "Failed", "Degraded", "False/ApplyRefused", "-", "False/ApplyRefused"},
			{"approver not authorized, looked at again", "InProgress", "Progressing", "False/ApproverNotAuthorized", "True/ApproverNotAuthorized", "False/ApproverNotAuthorized"},
		}))
	})
})
