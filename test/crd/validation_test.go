package crd_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

const sha = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
const sha2 = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

func newRegistration() *fleetv1alpha1.WorkerRegistration {
	return &fleetv1alpha1.WorkerRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("worker"), Namespace: "default"},
		Spec: fleetv1alpha1.WorkerRegistrationSpec{
			ClientInstanceID:    "inst-0001",
			WorkerNamespace:     "ns-a",
			Identity:            "bot-a",
			Remote:              "origin",
			Repository:          "acme/widgets",
			HeartbeatTTLSeconds: 900,
			Process:             fleetv1alpha1.ProcessIdentity{HostID: "host", BootID: "boot", PID: 4242, StartTime: ptr.To[int64](100)},
		},
	}
}

func newPlan() *fleetv1alpha1.RetirementPlan {
	return &fleetv1alpha1.RetirementPlan{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("plan"), Namespace: "default"},
		Spec:       fleetv1alpha1.RetirementPlanSpec{Remote: "origin"},
	}
}

func newClaim() *fleetv1alpha1.TaskClaim {
	return &fleetv1alpha1.TaskClaim{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("claim"), Namespace: "default"},
		Spec: fleetv1alpha1.TaskClaimSpec{
			Worker: "worker-1",
			Target: fleetv1alpha1.TaskTarget{Repository: "acme/widgets", Kind: "PullRequest", Number: 7, HeadSHA: "abcdef1"},
		},
	}
}

// expectInvalid asserts the API server refused the write as Invalid and the message says why.
func expectInvalid(err error, wants ...string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred())
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
	for _, w := range wants {
		Expect(err.Error()).To(ContainSubstring(w))
	}
}

// expectUnchanged asserts the stored object still has the resourceVersion it had before.
func expectUnchanged(obj client.Object, rv string) {
	GinkgoHelper()
	stored := obj.DeepCopyObject().(client.Object)
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), stored)).To(Succeed())
	Expect(stored.GetResourceVersion()).To(Equal(rv), "a refused write must leave the stored object unchanged")
}

var _ = Describe("WorkerRegistration validation", func() {
	It("accepts a complete registration", func() {
		Expect(k8sClient.Create(ctx, newRegistration())).To(Succeed())
	})

	It("refuses a pid that is not positive", func() {
		for _, pid := range []int64{0, -5} {
			wr := newRegistration()
			wr.Spec.Process.PID = pid
			expectInvalid(k8sClient.Create(ctx, wr), "spec.process.pid", "greater than or equal to 1")
		}
	})

	It("takes a pod's process with its pod named in full, and refuses an incomplete pod", func() {
		wr := newRegistration()
		wr.Spec.Process.Pod = &fleetv1alpha1.PodProcess{Namespace: "team-a", Name: "agent-0", UID: "6f1c2a52-3b7d-4e2a-9a4f-0c1d2e3f4a5b", NodeName: "node1", Container: "agent"}
		Expect(k8sClient.Create(ctx, wr)).To(Succeed())
		for field, mutate := range map[string]func(*fleetv1alpha1.PodProcess){
			"spec.process.pod.uid":      func(p *fleetv1alpha1.PodProcess) { p.UID = "" },
			"spec.process.pod.nodeName": func(p *fleetv1alpha1.PodProcess) { p.NodeName = "" },
			"spec.process.pod.name":     func(p *fleetv1alpha1.PodProcess) { p.Name = "" },
		} {
			wr := newRegistration()
			wr.Spec.Process.Pod = &fleetv1alpha1.PodProcess{Namespace: "team-a", Name: "agent-0", UID: "6f1c2a52-3b7d-4e2a-9a4f-0c1d2e3f4a5b", NodeName: "node1"}
			mutate(wr.Spec.Process.Pod)
			expectInvalid(k8sClient.Create(ctx, wr), field)
		}
		wr = newRegistration()
		wr.Spec.Process.Pod = &fleetv1alpha1.PodProcess{Namespace: "team-a", Name: "agent-0", UID: "pod/../x", NodeName: "node1"}
		expectInvalid(k8sClient.Create(ctx, wr), "spec.process.pod.uid")
	})

	It("refuses a heartbeat TTL that is not positive", func() {
		wr := newRegistration()
		wr.Spec.HeartbeatTTLSeconds = 0
		expectInvalid(k8sClient.Create(ctx, wr), "spec.heartbeatTTLSeconds")
	})

	It("refuses missing identity fields", func() {
		wr := newRegistration()
		wr.Spec.ClientInstanceID = ""
		expectInvalid(k8sClient.Create(ctx, wr), "spec.clientInstanceID")
	})

	It("keeps the spec immutable after create", func() {
		wr := newRegistration()
		Expect(k8sClient.Create(ctx, wr)).To(Succeed())
		rv := wr.ResourceVersion
		for _, mutate := range []func(*fleetv1alpha1.WorkerRegistration){
			func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.Process.PID++ },
			func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.Identity = "someone-else" },
			func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.Revisions.Code = "abc" },
		} {
			changed := wr.DeepCopy()
			mutate(changed)
			expectInvalid(k8sClient.Update(ctx, changed), "spec is immutable")
			expectUnchanged(wr, rv)
		}
	})

	It("refuses unknown phase and ownership values", func() {
		wr := newRegistration()
		Expect(k8sClient.Create(ctx, wr)).To(Succeed())
		rv := wr.ResourceVersion
		bad := wr.DeepCopy()
		bad.Status.Phase = "Sleeping"
		expectInvalid(k8sClient.Status().Update(ctx, bad), "status.phase", "Unsupported value")
		bad = wr.DeepCopy()
		bad.Status.OwnershipState = "zombie"
		expectInvalid(k8sClient.Status().Update(ctx, bad), "status.ownershipState")
		expectUnchanged(wr, rv)
	})

	It("never lets a Retired registration return to Active", func() {
		wr := newRegistration()
		Expect(k8sClient.Create(ctx, wr)).To(Succeed())
		wr.Status.Phase = fleetv1alpha1.PhaseRetired
		wr.Status.RetiredAt = ptr.To(metav1.NewTime(time.Now()))
		Expect(k8sClient.Status().Update(ctx, wr)).To(Succeed())
		rv := wr.ResourceVersion

		back := wr.DeepCopy()
		back.Status.Phase = fleetv1alpha1.PhaseActive
		expectInvalid(k8sClient.Status().Update(ctx, back), "can never return to Active")
		cleared := wr.DeepCopy()
		cleared.Status = fleetv1alpha1.WorkerRegistrationStatus{}
		expectInvalid(k8sClient.Status().Update(ctx, cleared), "can never return to Active")
		expectUnchanged(wr, rv)

		// Other status changes of a retired row are still allowed.
		wr.Status.OwnershipState = fleetv1alpha1.OwnershipHistorical
		Expect(k8sClient.Status().Update(ctx, wr)).To(Succeed())
	})
})

var _ = Describe("RetirementPlan validation", func() {
	approval := func() *fleetv1alpha1.RetirementApproval {
		return &fleetv1alpha1.RetirementApproval{
			RegistryFingerprint: sha, CandidateFingerprint: sha2,
			WorkerIdentities: []string{"worker-a"}, ApprovedBy: "alice",
		}
	}

	It("accepts an approval added later, then refuses changing or removing it", func() {
		p := newPlan()
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		p.Spec.Approval = approval()
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		rv := p.ResourceVersion

		changed := p.DeepCopy()
		changed.Spec.Approval.WorkerIdentities = []string{"worker-a", "worker-b"}
		expectInvalid(k8sClient.Update(ctx, changed), "spec.approval cannot be changed or removed")
		changed = p.DeepCopy()
		changed.Spec.Approval.RegistryFingerprint = sha2
		expectInvalid(k8sClient.Update(ctx, changed), "spec.approval cannot be changed or removed")
		removed := p.DeepCopy()
		removed.Spec.Approval = nil
		expectInvalid(k8sClient.Update(ctx, removed), "spec.approval cannot be changed or removed")
		expectUnchanged(p, rv)
	})

	It("refuses malformed fingerprints in an approval", func() {
		p := newPlan()
		p.Spec.Approval = approval()
		p.Spec.Approval.CandidateFingerprint = "md5:1234"
		expectInvalid(k8sClient.Create(ctx, p), "spec.approval.candidateFingerprint")
	})

	It("keeps the plan's scope immutable", func() {
		p := newPlan()
		p.Spec.CanonicalRepository = "acme/widgets"
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		rv := p.ResourceVersion
		for _, mutate := range []func(*fleetv1alpha1.RetirementPlan){
			func(p *fleetv1alpha1.RetirementPlan) { p.Spec.Remote = "other" },
			func(p *fleetv1alpha1.RetirementPlan) { p.Spec.CanonicalRepository = "acme/other" },
			func(p *fleetv1alpha1.RetirementPlan) { p.Spec.Host = "gitea.example" },
		} {
			changed := p.DeepCopy()
			mutate(changed)
			expectInvalid(k8sClient.Update(ctx, changed), "scope is immutable")
		}
		expectUnchanged(p, rv)
	})

	It("keeps spec.hostID immutable: a host plan stays one host's, a fleet plan the fleet's", func() {
		host := newPlan()
		host.Spec.HostID = "3d1219c7c4c5404aaa1f6d2a48adfda4"
		Expect(k8sClient.Create(ctx, host)).To(Succeed())
		fleetPlan := newPlan()
		Expect(k8sClient.Create(ctx, fleetPlan)).To(Succeed())
		for _, tc := range []struct {
			p      *fleetv1alpha1.RetirementPlan
			mutate func(*fleetv1alpha1.RetirementPlan)
		}{
			{host, func(p *fleetv1alpha1.RetirementPlan) { p.Spec.HostID = "another-host" }},
			{host, func(p *fleetv1alpha1.RetirementPlan) { p.Spec.HostID = "" }},
			{fleetPlan, func(p *fleetv1alpha1.RetirementPlan) { p.Spec.HostID = "a-host" }},
		} {
			changed := tc.p.DeepCopy()
			tc.mutate(changed)
			expectInvalid(k8sClient.Update(ctx, changed), "spec.hostID is immutable")
			expectUnchanged(tc.p, tc.p.ResourceVersion)
		}
		empty := newPlan()
		empty.Spec.HostID = ""
		Expect(k8sClient.Create(ctx, empty)).To(Succeed(), "no hostID is a fleet plan")
	})

	It("accepts exactly the seven outcomes of the specification", func() {
		p := newPlan()
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		for _, o := range []string{"planned", "applied", "registry_revision_moved", "candidate_set_moved",
			"already_retired", "nothing_requested", "transaction_failed"} {
			p.Status.Outcome = o
			Expect(k8sClient.Status().Update(ctx, p)).To(Succeed(), o)
		}
		rv := p.ResourceVersion
		bad := p.DeepCopy()
		bad.Status.Outcome = "partially_applied"
		expectInvalid(k8sClient.Status().Update(ctx, bad), "status.outcome", "Unsupported value")
		expectUnchanged(p, rv)
	})
})

var _ = Describe("RetirementPlan status and page bounds", func() {
	It("takes as many listed verdicts as the controller lists, and no more", func() {
		p := newPlan()
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		rows := func(n int) []fleetv1alpha1.WorkerAssessment {
			out := make([]fleetv1alpha1.WorkerAssessment, n)
			for i := range out {
				out[i] = fleetv1alpha1.WorkerAssessment{WorkerIdentity: fmt.Sprintf("w-%04d", i), ReasonCode: retirement.ReasonEligibleStaleOrphan}
			}
			return out
		}
		p.Status.Candidates, p.Status.Preserved = rows(retirement.MaxListedAssessments), rows(retirement.MaxListedAssessments)
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
		rv := p.ResourceVersion
		bad := p.DeepCopy()
		bad.Status.Candidates = rows(retirement.MaxListedAssessments + 1)
		expectInvalid(k8sClient.Status().Update(ctx, bad), "status.candidates", "Too many")
		expectUnchanged(p, rv)
	})

	It("refuses a page row with no reason code of its own or shared", func() {
		page := func(shared *fleetv1alpha1.PageShared, rows ...fleetv1alpha1.PageRow) *fleetv1alpha1.RetirementPlanPage {
			return &fleetv1alpha1.RetirementPlanPage{
				ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("page"), Namespace: "default"},
				Plan:       "p", PlanUID: "uid", List: fleetv1alpha1.PageListCandidates, Page: 1, PageCount: 1,
				RowCount: int32(len(rows)), Shared: shared, Rows: rows,
			}
		}
		Expect(k8sClient.Create(ctx, page(&fleetv1alpha1.PageShared{ReasonCode: "eligible_stale_orphan"},
			fleetv1alpha1.PageRow{WorkerIdentity: "a"}, fleetv1alpha1.PageRow{WorkerIdentity: "b"}))).To(Succeed())
		Expect(k8sClient.Create(ctx, page(nil, fleetv1alpha1.PageRow{WorkerIdentity: "a", ReasonCode: "pid_alive"}))).To(Succeed())
		expectInvalid(k8sClient.Create(ctx, page(nil, fleetv1alpha1.PageRow{WorkerIdentity: "a", ReasonCode: "pid_alive"},
			fleetv1alpha1.PageRow{WorkerIdentity: "b"})), "every row needs a reasonCode")
	})
})

var _ = Describe("RetirementPlan approval binding", func() {
	registryBound := func() *fleetv1alpha1.RetirementApproval {
		return &fleetv1alpha1.RetirementApproval{RegistryFingerprint: sha, CandidateFingerprint: sha2,
			WorkerIdentities: []string{"worker-a"}, ApprovedBy: "alice"}
	}
	candidateBound := func() *fleetv1alpha1.RetirementApproval {
		return &fleetv1alpha1.RetirementApproval{Binding: fleetv1alpha1.ApprovalBindingCandidateSet, CandidateFingerprint: sha2,
			WorkerIdentities: []string{"worker-a"}, ApprovedBy: "alice"}
	}
	stored := func(p *fleetv1alpha1.RetirementPlan) *fleetv1alpha1.RetirementApproval {
		GinkgoHelper()
		out := &fleetv1alpha1.RetirementPlan{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), out)).To(Succeed())
		return out.Spec.Approval
	}

	It("leaves the binding out when it is not given: the controller reads it from the tokens named", func() {
		p := newPlan()
		p.Spec.Approval = registryBound()
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(stored(p).Binding).To(BeEmpty())
		Expect(apiconv.Approval(stored(p)).EffectiveBinding()).To(Equal(fleetv1alpha1.ApprovalBindingRegistry))

		p = newPlan()
		p.Spec.Approval = candidateBound()
		p.Spec.Approval.Binding = ""
		Expect(k8sClient.Create(ctx, p)).To(Succeed(), "an approval of the candidate tokens alone is valid")
		Expect(stored(p).Binding).To(BeEmpty())
		Expect(apiconv.Approval(stored(p)).EffectiveBinding()).To(Equal(fleetv1alpha1.ApprovalBindingCandidateSet))
	})

	It("accepts exactly the two bindings", func() {
		for _, a := range []*fleetv1alpha1.RetirementApproval{registryBound(), candidateBound()} {
			if a.Binding == "" {
				a.Binding = fleetv1alpha1.ApprovalBindingRegistry
			}
			p := newPlan()
			p.Spec.Approval = a
			Expect(k8sClient.Create(ctx, p)).To(Succeed(), a.Binding)
			Expect(stored(p).Binding).To(Equal(a.Binding))
		}
		for _, bad := range []string{"Namespace", "registry", "candidateSet", "None"} {
			p := newPlan()
			p.Spec.Approval = candidateBound()
			p.Spec.Approval.Binding = bad
			expectInvalid(k8sClient.Create(ctx, p), "spec.approval.binding", "Unsupported value")
		}
	})

	It("requires registryFingerprint for a Registry binding", func() {
		p := newPlan()
		p.Spec.Approval = registryBound()
		p.Spec.Approval.Binding = fleetv1alpha1.ApprovalBindingRegistry
		p.Spec.Approval.RegistryFingerprint = ""
		expectInvalid(k8sClient.Create(ctx, p), "spec.approval.registryFingerprint is required when binding is Registry")
	})

	It("forbids registryFingerprint for a CandidateSet binding", func() {
		p := newPlan()
		p.Spec.Approval = candidateBound()
		p.Spec.Approval.RegistryFingerprint = sha
		expectInvalid(k8sClient.Create(ctx, p), "spec.approval.registryFingerprint must be absent when binding is CandidateSet")

		p = newPlan()
		p.Spec.Approval = candidateBound()
		p.Spec.Approval.CandidateFingerprint = ""
		expectInvalid(k8sClient.Create(ctx, p), "spec.approval.candidateFingerprint")
	})

	It("checks the binding when an approval is added to an existing plan too", func() {
		p := newPlan()
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		rv := p.ResourceVersion
		bad := p.DeepCopy()
		bad.Spec.Approval = candidateBound()
		bad.Spec.Approval.RegistryFingerprint = sha
		expectInvalid(k8sClient.Update(ctx, bad), "must be absent when binding is CandidateSet")
		expectUnchanged(p, rv)
		p.Spec.Approval = candidateBound()
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
	})

	It("keeps the binding immutable like the rest of the approval", func() {
		reg := newPlan()
		reg.Spec.Approval = registryBound()
		Expect(k8sClient.Create(ctx, reg)).To(Succeed())
		rv := reg.ResourceVersion
		toCandidateSet := reg.DeepCopy()
		toCandidateSet.Spec.Approval.Binding = fleetv1alpha1.ApprovalBindingCandidateSet
		toCandidateSet.Spec.Approval.RegistryFingerprint = ""
		expectInvalid(k8sClient.Update(ctx, toCandidateSet), "spec.approval cannot be changed or removed")
		expectUnchanged(reg, rv)

		cs := newPlan()
		cs.Spec.Approval = candidateBound()
		Expect(k8sClient.Create(ctx, cs)).To(Succeed())
		rv = cs.ResourceVersion
		toRegistry := cs.DeepCopy()
		toRegistry.Spec.Approval.Binding = fleetv1alpha1.ApprovalBindingRegistry
		toRegistry.Spec.Approval.RegistryFingerprint = sha
		expectInvalid(k8sClient.Update(ctx, toRegistry), "spec.approval cannot be changed or removed")
		removed := cs.DeepCopy()
		removed.Spec.Approval = nil
		expectInvalid(k8sClient.Update(ctx, removed), "spec.approval cannot be changed or removed")
		expectUnchanged(cs, rv)
	})

	It("is explained by kubectl explain", func() {
		text := kubectlExplain("retirementplan.spec.approval.binding")
		for _, want := range []string{"Registry", "CandidateSet", "registry_revision_moved", "candidate_set_moved",
			"registryFingerprint is required", "registryFingerprint must be absent", "resourceVersion", "Left out, it is CandidateSet"} {
			Expect(text).To(ContainSubstring(want))
		}
		Expect(kubectlExplain("retirementplan.spec.approval.registryFingerprint")).To(ContainSubstring("must be absent when binding is"))
	})
})

// kubectlExplain runs kubectl explain path as a cluster administrator and returns its
// output with every run of white space (kubectl wraps lines) folded into one space.
func kubectlExplain(path string) string {
	GinkgoHelper()
	return strings.Join(strings.Fields(kubectlExplainRaw(path)), " ")
}

// kubectlExplainRaw runs kubectl explain path as a cluster administrator and returns its
// output as kubectl printed it.
func kubectlExplainRaw(path string) string {
	GinkgoHelper()
	kubectl := adminKubectl()
	// The API server publishes a new CRD's OpenAPI schema a moment after the CRD is
	// established; until then kubectl explain cannot find the resource, so it is asked
	// again for a while.
	var text string
	Eventually(func(g Gomega) {
		out, errOut, err := kubectl("explain", path)
		g.Expect(err).NotTo(HaveOccurred(), errOut)
		text = out
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return text
}

var _ = Describe("TaskClaim validation", func() {
	It("accepts a pull-request claim with a head and an issue claim without one", func() {
		Expect(k8sClient.Create(ctx, newClaim())).To(Succeed())
		c := newClaim()
		c.Spec.Target = fleetv1alpha1.TaskTarget{Repository: "acme/widgets", Kind: "Issue", Number: 3}
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
	})

	It("requires headSHA for pull requests", func() {
		c := newClaim()
		c.Spec.Target.HeadSHA = ""
		expectInvalid(k8sClient.Create(ctx, c), "headSHA is required when kind is PullRequest")
	})

	It("refuses unknown target kinds and bad numbers", func() {
		c := newClaim()
		c.Spec.Target.Kind = "Epic"
		expectInvalid(k8sClient.Create(ctx, c), "spec.target.kind", "Unsupported value")
		c = newClaim()
		c.Spec.Target.Number = 0
		expectInvalid(k8sClient.Create(ctx, c), "spec.target.number")
		c = newClaim()
		c.Spec.Target.Repository = "not a repo"
		expectInvalid(k8sClient.Create(ctx, c), "spec.target.repository")
	})

	It("keeps target and worker immutable", func() {
		c := newClaim()
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		rv := c.ResourceVersion
		for _, tc := range []struct {
			mutate func(*fleetv1alpha1.TaskClaim)
			msg    string
		}{
			{func(c *fleetv1alpha1.TaskClaim) { c.Spec.Target.Number = 8 }, "spec.target is immutable"},
			{func(c *fleetv1alpha1.TaskClaim) { c.Spec.Target.HeadSHA = "1234567" }, "spec.target is immutable"},
			{func(c *fleetv1alpha1.TaskClaim) { c.Spec.Target.Repository = "acme/other" }, "spec.target is immutable"},
			{func(c *fleetv1alpha1.TaskClaim) { c.Spec.Worker = "worker-2" }, "spec.worker is immutable"},
		} {
			changed := c.DeepCopy()
			tc.mutate(changed)
			expectInvalid(k8sClient.Update(ctx, changed), tc.msg)
		}
		expectUnchanged(c, rv)
	})

	It("lets the pin be set once only", func() {
		c := newClaim()
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		c.Spec.Pin = sha
		Expect(k8sClient.Update(ctx, c)).To(Succeed())
		rv := c.ResourceVersion
		changed := c.DeepCopy()
		changed.Spec.Pin = sha2
		expectInvalid(k8sClient.Update(ctx, changed), "spec.pin can be set only once")
		removed := c.DeepCopy()
		removed.Spec.Pin = ""
		expectInvalid(k8sClient.Update(ctx, removed), "spec.pin can be set only once")
		bad := newClaim()
		bad.Spec.Pin = "not-a-pin"
		expectInvalid(k8sClient.Create(ctx, bad), "spec.pin")
		expectUnchanged(c, rv)
	})

	It("never undoes a release or a completed cycle", func() {
		c := newClaim()
		c.Spec.Release = true
		c.Spec.CycleComplete = true
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		rv := c.ResourceVersion
		changed := c.DeepCopy()
		changed.Spec.Release = false
		expectInvalid(k8sClient.Update(ctx, changed), "spec.release cannot be undone")
		changed = c.DeepCopy()
		changed.Spec.CycleComplete = false
		expectInvalid(k8sClient.Update(ctx, changed), "spec.cycleComplete cannot be undone")
		expectUnchanged(c, rv)
	})
})

var _ = Describe("TaskClaim status", func() {
	It("accepts an ended claim's outcome, the ending, and nothing unknown", func() {
		c := newClaim()
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		for _, outcome := range []string{"released", "completed", "expired", "revoked"} {
			c.Status = fleetv1alpha1.TaskClaimStatus{Phase: "Released", Result: &fleetv1alpha1.ClaimResult{Outcome: outcome}}
			Expect(k8sClient.Status().Update(ctx, c)).To(Succeed(), outcome)
		}
		c.Status.Result.Outcome = "abandoned"
		expectInvalid(k8sClient.Status().Update(ctx, c), "status.result.outcome", "Unsupported value")
	})
})

var _ = Describe("kubectl", func() {
	It("explains the API and lists every kind under the fleet category", func() {
		Expect(k8sClient.Create(ctx, newRegistration())).To(Succeed())
		Expect(k8sClient.Create(ctx, newPlan())).To(Succeed())
		Expect(k8sClient.Create(ctx, newClaim())).To(Succeed())
		kubectl := adminKubectl()
		text, errOut, err := kubectl("explain", "workerregistration.spec.process")
		Expect(err).NotTo(HaveOccurred(), errOut)
		Expect(text).To(ContainSubstring("startTime"))
		Expect(text).To(ContainSubstring("boot_id"))
		text, errOut, err = kubectl("explain", "workerregistration.spec.process.pod")
		Expect(err).NotTo(HaveOccurred(), errOut)
		Expect(text).To(ContainSubstring("pid namespace of its own"), "kubectl explain tells what a pod's process is")
		Expect(text).To(ContainSubstring("nodeName"))

		text, errOut, err = kubectl("explain", "taskclaim.status.result.outcome")
		Expect(err).NotTo(HaveOccurred(), errOut)
		for _, ending := range []string{"released", "completed", "expired", "revoked"} {
			Expect(text).To(ContainSubstring(ending), "an ended claim's outcome is explained")
		}
		text, errOut, err = kubectl("explain", "taskclaim.status.validation.target")
		Expect(err).NotTo(HaveOccurred(), errOut)
		Expect(text).To(ContainSubstring("target_substituted"))

		names, errOut, err := kubectl("get", "fleet", "-A", "-o", "name")
		Expect(err).NotTo(HaveOccurred(), errOut)
		for _, kind := range []string{"workerregistration", "retirementplan", "taskclaim"} {
			Expect(names).To(ContainSubstring(kind + ".fleet.giteatools.dev/"))
		}
	})
})

// adminKubectl runs kubectl as a cluster administrator (testenv's Kubectl).
func adminKubectl() func(args ...string) (stdout, stderr string, err error) {
	GinkgoHelper()
	kubectl, err := env.Kubectl()
	Expect(err).NotTo(HaveOccurred())
	return kubectl
}
