package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/cli"
)

var _ = Describe("plan, approve and status", func() {
	It("plans, approves through a GitOps-applied manifest, and shows the fleet before and after", func() {
		ns := newNamespace()
		live := register(ns, newLogin("live"), startChild())
		dead := startChild()
		gone := registerOnly(ns, newLogin("gone"), dead, "--ttl", "1s")
		dead.kill()
		waitLapsed(ns, gone)

		By("status: one live, one stale")
		r := fleet(ns, "status")
		Expect(r.stdout).To(MatchRegexp(`(?m)^` + ns + `\s+1\s+1\s+0\s+0\s+true\s+0\s*$`))
		r = fleet(ns, "status", "-o", "wide")
		Expect(r.stdout).To(ContainSubstring(live))
		Expect(r.stdout).To(ContainSubstring(gone))

		By("plan: the stale row of a gone process is the candidate; the live one is preserved")
		r = fleet(ns, "plan")
		Expect(r.stdout).To(MatchRegexp(`Plan ` + ns + `/plan-\w+: planned; 2 assessed, 1 candidates, 1 preserved`))
		Expect(r.stdout).To(ContainSubstring("Candidates (1):\n    " + gone))
		Expect(r.stdout).To(ContainSubstring("worker_live (1)"))
		planName := strings.TrimPrefix(strings.Fields(r.stdout)[1], ns+"/")
		planName = strings.TrimSuffix(planName, ":")

		By("approve: bad input first, changing nothing")
		r = fleetCmd(ctx, ns, nil, "approve", "no-such-plan")
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("no RetirementPlan"))

		By("approve: the manifest for the GitOps repository, as the GitOps identity sees itself")
		r = fleet(ns, "--as", gitopsUser, "approve", planName)
		var manifest fleetv1alpha1.RetirementPlan
		Expect(yaml.UnmarshalStrict([]byte(r.stdout), &manifest)).To(Succeed(), r.stdout)
		Expect(manifest.Spec.Approval.ApprovedBy).To(Equal(gitopsUser))
		Expect(manifest.Spec.Approval.ApprovedGroups).To(ContainElement("system:authenticated"))
		Expect(manifest.Spec.Approval.WorkerIdentities).To(Equal([]string{gone}))
		Expect(manifest.Spec.Approval.Binding).To(Equal(fleetv1alpha1.ApprovalBindingCandidateSet))
		Expect(getPlan(ns, planName).Spec.Approval).To(BeNil(), "printing the approval changes nothing")

		By("the GitOps stand-in: kubectl apply -k of a local folder, as the GitOps identity")
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "plan.yaml"), []byte(r.stdout), 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources:\n- plan.yaml\n"), 0o600)).To(Succeed())
		out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "--as", gitopsUser, "apply", "-k", dir).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Eventually(func() string { return getPlan(ns, planName).Status.Outcome }).Should(Equal(fleetv1alpha1.OutcomeApplied))
		Expect(getWR(ns, gone).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired))
		Expect(getWR(ns, live).Status.Phase).To(Equal(fleetv1alpha1.PhaseActive))

		By("a retired registration's heartbeat is never renewed")
		r = fleetCmd(ctx, ns, nil, "heartbeat", "--worker", gone)
		Expect(r.code).To(Equal(cli.ExitFailure), "%s", r)
		Expect(r.stderr).To(ContainSubstring("is retired: register anew"))

		By("approve refuses a plan that is no longer awaiting approval")
		r = fleetCmd(ctx, ns, nil, "approve", planName)
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("already carries an approval"))

		By("status: one live, one historical")
		r = fleet(ns, "status", "-o", "jsonpath={.snapshot.liveWorkerCount} {.snapshot.historicalWorkerCount} {.snapshot.staleWorkerCount}")
		Expect(r.stdout).To(Equal("1 1 0"))
	})

	It("approves with --apply and waits for the apply", func() {
		ns := newNamespace()
		dead := startChild()
		gone := registerOnly(ns, newLogin("gone"), dead, "--ttl", "1s")
		dead.kill()
		waitLapsed(ns, gone)
		r := fleet(ns, "plan", "--name", "p1", "-o", "wide")
		Expect(r.stdout).To(ContainSubstring("Candidates (1):\n    "+gone), r.stdout)

		r = fleet(ns, "--as", gitopsUser, "approve", "p1", "--apply")
		Expect(r.stdout).To(ContainSubstring("Plan " + ns + "/p1: applied; 1 retired"))
		Expect(r.stdout).To(ContainSubstring("retired " + gone))
		p := getPlan(ns, "p1")
		Expect(meta.IsStatusConditionTrue(p.Status.Conditions, fleetv1alpha1.AppliedCondition)).To(BeTrue())

		By("a plan with nothing to retire has nothing to approve, and nothing changes")
		fleet(ns, "plan", "--name", "p2")
		r = fleetCmd(ctx, ns, nil, "--as", gitopsUser, "approve", "p2", "--apply")
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("no candidates"))
		Expect(getPlan(ns, "p2").Spec.Approval).To(BeNil())
	})
})

var _ = Describe("approve --apply while the plan moves", func() {
	// stalePlan registers one row of a process that is gone and plans it as p1.
	stalePlan := func() (string, string) {
		GinkgoHelper()
		ns := newNamespace()
		dead := startChild()
		gone := registerOnly(ns, newLogin("gone"), dead, "--ttl", "1s")
		dead.kill()
		waitLapsed(ns, gone)
		fleet(ns, "plan", "--name", "p1")
		return ns, gone
	}

	It("retries past a write that moves the plan's resourceVersion between its read and its patch", func() {
		ns, gone := stalePlan()
		// What the controller does when it records the plan's pages, or a tool that labels
		// plans: the resourceVersion moves, nothing an approval binds changes.
		kc, hook := proxyKubeconfig(patchOf(ns, "p1"), func() {
			p := getPlan(ns, "p1")
			base := p.DeepCopy()
			p.Annotations = map[string]string{"example.com/seen": "true"}
			Expect(k8s.Patch(ctx, p, client.MergeFrom(base))).To(Succeed())
		})
		r := fleetVia(ctx, kc, ns, nil, "--as", gitopsUser, "approve", "p1", "--apply")
		Expect(hook.fired).To(BeClosed(), "the write landed between the command's read and its patch")
		Expect(r.code).To(Equal(cli.ExitOK), "%s", r)
		Expect(r.stdout).To(ContainSubstring("Plan " + ns + "/p1: applied; 1 retired"))
		Expect(getWR(ns, gone).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired))
	})

	It("refuses, changing nothing of its own, when another approval lands between its read and its patch", func() {
		ns, gone := stalePlan()
		kc, hook := proxyKubeconfig(patchOf(ns, "p1"), func() {
			fleet(ns, "--as", gitopsUser, "approve", "p1", "--apply")
		})
		r := fleetVia(ctx, kc, ns, nil, "approve", "p1", "--apply")
		Expect(hook.fired).To(BeClosed())
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("already carries an approval"))
		p := getPlan(ns, "p1")
		Expect(p.Spec.Approval.ApprovedBy).To(Equal(gitopsUser), "the first approval stands")
		Expect(p.Status.Outcome).To(Equal(fleetv1alpha1.OutcomeApplied))
		Expect(getWR(ns, gone).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired))
	})
})

func getPlan(ns, name string) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	p := &fleetv1alpha1.RetirementPlan{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}
