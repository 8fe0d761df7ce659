package taskclaim_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

var _ = Describe("Neutral entry", func() {
	It("lets a registered worker read fleet state and claim for itself, with no role and no capability", func() {
		w := newWorker(nsMain)
		other := newWorker(nsMain)
		t := issueTarget(newIssue("neutral entry"))

		By("holding no role and no capability right after registration")
		expectNeutral(w, t)

		By("reading neutral fleet state in Kubernetes")
		regs := &fleetv1alpha1.WorkerRegistrationList{}
		Expect(w.c.List(ctx, regs, client.InNamespace(nsMain))).To(Succeed())
		Expect(len(regs.Items)).To(BeNumerically(">=", 2))
		Expect(w.c.List(ctx, &fleetv1alpha1.TaskClaimList{}, client.InNamespace(nsMain))).To(Succeed())
		Expect(w.c.List(ctx, &fleetv1alpha1.RetirementPlanList{}, client.InNamespace(nsMain))).To(Succeed())

		By("reading the task in Gitea with its own identity")
		own, err := giteaclaim.New(srv.URL, w.token, giteaclaim.WithHTTPClient(srv.HTTP))
		Expect(err).NotTo(HaveOccurred())
		st, err := own.ReadTarget(ctx, apiconv.Target(t))
		Expect(err).NotTo(HaveOccurred())
		Expect(st.State).To(Equal("open"))

		By("renewing its own heartbeat, but not another worker's")
		heartbeat(w.c, w)
		otherReg := &fleetv1alpha1.WorkerRegistration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: nsMain, Name: other.name}, otherReg)).To(Succeed())
		otherReg.Status.LastHeartbeatAt = ptr.To(metav1.Now())
		err = w.c.Status().Update(ctx, otherReg)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "writing another worker's heartbeat: %v", err)

		By("not retiring its own registration")
		ownReg := &fleetv1alpha1.WorkerRegistration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: nsMain, Name: w.name}, ownReg)).To(Succeed())
		ownReg.Status.Phase = fleetv1alpha1.PhaseRetired
		err = w.c.Status().Update(ctx, ownReg)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "retiring itself: %v", err)

		By("creating a TaskClaim for itself")
		tc := w.claim(t)

		By("not creating a TaskClaim for another worker (admission policy)")
		foreign := &fleetv1alpha1.TaskClaim{
			ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("tc"), Namespace: nsMain},
			Spec:       fleetv1alpha1.TaskClaimSpec{Worker: other.name, Target: t},
		}
		err = w.c.Create(ctx, foreign)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "claiming for another worker: %v", err)
		Expect(err.Error()).To(ContainSubstring("may only claim tasks for its own registration"))

		By("not changing another worker's claim")
		theirs := other.claim(issueTarget(newIssue("neutral entry, other worker")))
		err = updateSpec(w.c, theirs, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Release = true })
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "releasing another worker's claim: %v", err)

		By("not writing TaskClaim status (RBAC): no self-granted role or capability")
		validated := waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
		forged := validated.DeepCopy()
		forged.Status.Phase = fleetv1alpha1.ClaimPhaseActive
		forged.Status.Role = validated.Status.Validation.Role
		forged.Status.Capability = &fleetv1alpha1.TaskCapability{Worker: w.name, Identity: w.name, Repository: repo,
			Target: fleetv1alpha1.ClaimTargetRef{Kind: t.Kind, Number: t.Number}, Role: "author",
			Operations: []string{"push_branch"}, Pin: validated.Status.Validation.Pin, ClaimID: string(tc.UID),
			LeaseName: "x", LeaseGeneration: "1", ExpiresAt: metav1.Now()}
		err = w.c.Status().Update(ctx, forged)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "writing claim status: %v", err)
		err = w.c.Status().Patch(ctx, forged, client.MergeFrom(validated))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "patching claim status: %v", err)

		By("not touching the per-target locks")
		err = w.c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lockName(t), Namespace: nsMain},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me")}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "creating a claim lock: %v", err)

		By("still holding nothing: a validated claim is not a capability")
		Expect(fetch(tc).Status.Capability).To(BeNil())
		Expect(fetch(tc).Status.Role).To(BeEmpty())
		expectNeutral(w, t)
	})
})
