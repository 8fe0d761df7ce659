package retirementplan_test

import (
	"context"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/retirementplan"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testworker"
)

const hour = time.Hour

// --- helpers ---------------------------------------------------------------------------

func newPlanObj(ns, name string) *fleetv1alpha1.RetirementPlan {
	return &fleetv1alpha1.RetirementPlan{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       fleetv1alpha1.RetirementPlanSpec{Remote: "origin", CanonicalRepository: canonicalRepo},
	}
}

// createPlan creates a plan handled by the manager and waits for its dry run.
func createPlan(ns string) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	p := newPlanObj(ns, testenv.Uniq("plan"))
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	return waitOutcome(p, "planned")
}

func waitOutcome(p *fleetv1alpha1.RetirementPlan, outcome string) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		g.Expect(p.Status.Outcome).To(Equal(outcome))
	}).Should(Succeed())
	return p
}

// reconcilePlan drives a hand-wired reconciler once for a "direct-" plan.
func reconcilePlan(r *planReconcilers, p *fleetv1alpha1.RetirementPlan) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
	return p
}

// expectReadiness checks Ready (with its reason) and Stalled of a plan together.
func expectReadiness(p *fleetv1alpha1.RetirementPlan, ready, stalled, reason string) {
	GinkgoHelper()
	Expect(testenv.ReadinessOf(p.Status.Conditions)).To(Equal(testenv.Readiness{Ready: ready, Stalled: stalled, Reason: reason}),
		"plan %s (outcome %s)", p.Name, p.Status.Outcome)
}

// expectApplied checks the Applied condition of a plan.
func expectApplied(p *fleetv1alpha1.RetirementPlan, status metav1.ConditionStatus, reason string) {
	GinkgoHelper()
	c := meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.AppliedCondition)
	Expect(c).NotTo(BeNil(), "plan %s has no Applied condition", p.Name)
	Expect([]string{string(c.Status), c.Reason}).To(Equal([]string{string(status), reason}), "Applied of plan %s", p.Name)
}

// whoAmI is the user and the groups the API server sees for client c.
func whoAmI(c client.Client) authz.Subject {
	GinkgoHelper()
	ssr := &authenticationv1.SelfSubjectReview{}
	Expect(c.Create(ctx, ssr)).To(Succeed())
	return authz.Subject{User: ssr.Status.UserInfo.Username, Groups: ssr.Status.UserInfo.Groups}
}

// approve copies the plan's tokens and identities into spec.approval as client c, in
// c's own name and groups.
func approve(c client.Client, p *fleetv1alpha1.RetirementPlan) error {
	return setApproval(c, p, approvalAs(whoAmI(c), p))
}

// approvalAs is the approval of p's tokens and identities in the name of s.
func approvalAs(s authz.Subject, p *fleetv1alpha1.RetirementPlan) *fleetv1alpha1.RetirementApproval {
	return &fleetv1alpha1.RetirementApproval{
		RegistryFingerprint:  p.Status.RegistryFingerprint,
		CandidateFingerprint: p.Status.CandidateFingerprint,
		WorkerIdentities:     p.Status.CandidateWorkerIdentities,
		ApprovedBy:           s.User,
		ApprovedGroups:       s.Groups,
	}
}

// setApproval writes spec.approval as client c. A conflict (the controller writing the
// plan's status meanwhile, as it does while pages are recorded) is retried, as kubectl
// apply's patch would not meet it at all.
func setApproval(c client.Client, p *fleetv1alpha1.RetirementPlan, a *fleetv1alpha1.RetirementApproval) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &fleetv1alpha1.RetirementPlan{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		cur.Spec.Approval = a
		return c.Update(ctx, cur)
	})
}

func expectActive(wrs ...*fleetv1alpha1.WorkerRegistration) {
	GinkgoHelper()
	for _, wr := range wrs {
		Expect(get(wr).Status.Phase).To(Equal(fleetv1alpha1.PhaseActive), wr.Name)
	}
}

func reasonOf(list []fleetv1alpha1.WorkerAssessment, name string) string {
	for _, a := range list {
		if a.WorkerIdentity == name {
			return a.ReasonCode
		}
	}
	return ""
}

func evidenceOf(list []fleetv1alpha1.WorkerAssessment, name string) map[string]string {
	for _, a := range list {
		if a.WorkerIdentity == name {
			return a.Evidence
		}
	}
	return nil
}

func activeClaim(ns, worker string) {
	GinkgoHelper()
	tc := &fleetv1alpha1.TaskClaim{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("claim"), Namespace: ns},
		Spec: fleetv1alpha1.TaskClaimSpec{Worker: worker, Target: fleetv1alpha1.TaskTarget{
			Repository: canonicalRepo, Kind: fleetv1alpha1.TargetKindIssue, Number: 1}},
	}
	Expect(k8sClient.Create(ctx, tc)).To(Succeed())
}

func gitops() client.Client { return impersonating(gitopsUser) }

func impersonating(user string, groups ...string) client.Client {
	GinkgoHelper()
	c, err := env.Impersonate(user, groups...)
	Expect(err).NotTo(HaveOccurred())
	return c
}

func bind(ns, user, clusterRole string) *rbacv1.RoleBinding {
	GinkgoHelper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("rb"), Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	Expect(k8sClient.Create(ctx, rb)).To(Succeed())
	return rb
}

// eligible registers a dead process with a long-lapsed heartbeat: the textbook candidate.
func eligible(ns, name string, opts ...testworker.Option) *fleetv1alpha1.WorkerRegistration {
	GinkgoHelper()
	return register(ns, name, deadChild(), hour, fleetv1alpha1.OwnershipStale, opts...)
}

// --- the eligibility conjunction, one reason code at a time ------------------------------

var _ = Describe("RetirementPlan dry run", func() {
	type craft func(ns string) (crafted string)

	DescribeTable("preserves a row that fails exactly one requirement, next to an eligible row",
		func(want string, build craft) {
			ns := newNamespace()
			ok := eligible(ns, "eligible")
			name := build(ns)
			p := createPlan(ns)

			Expect(p.Status.CandidateWorkerIdentities).To(ContainElement(ok.Name))
			Expect(reasonOf(p.Status.Candidates, ok.Name)).To(Equal("eligible_stale_orphan"))
			Expect(reasonOf(p.Status.Preserved, name)).To(Equal(want))
			Expect(evidenceOf(p.Status.Preserved, name)).NotTo(BeEmpty(), "a preserved row carries structured evidence")
			Expect(p.Status.PreservedReasonCounts).To(HaveKeyWithValue(want, BeNumerically(">=", 1)))
			Expect(p.Status.MutationPerformed).To(BeFalse())
			Expect(p.Status.ReadOnly).To(BeTrue())
			expectReadiness(p, "True", "", fleetv1alpha1.ReasonPlanned)
			Expect(meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ApprovedCondition)).To(
				HaveField("Reason", fleetv1alpha1.ReasonAwaitingApproval), "no approval yet")
			Expect(p.Status.AssessedCount).To(Equal(p.Status.CandidateCount + p.Status.PreservedCount))
			Expect(p.Status.RegistryFingerprint).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`))
			expectActive(ok)
		},
		Entry("already_terminal_registration", "already_terminal_registration", func(ns string) string {
			wr := eligible(ns, "retired")
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wr), wr)).To(Succeed())
				wr.Status.Phase = fleetv1alpha1.PhaseRetired
				g.Expect(k8sClient.Status().Update(ctx, wr)).To(Succeed())
			}).Should(Succeed())
			return wr.Name
		}),
		Entry("incomplete_registry_identity", "incomplete_registry_identity", func(ns string) string {
			return register(ns, "nostart", deadChild(), hour, fleetv1alpha1.OwnershipStale,
				func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.Process.StartTime = nil }).Name
		}),
		Entry("unparsable_heartbeat (never heartbeated)", "unparsable_heartbeat", func(ns string) string {
			c := deadChild()
			st := c.StartTime
			wr := &fleetv1alpha1.WorkerRegistration{ObjectMeta: metav1.ObjectMeta{Name: "silent", Namespace: ns},
				Spec: fleetv1alpha1.WorkerRegistrationSpec{ClientInstanceID: "inst-silent", WorkerNamespace: "slot-silent",
					Identity: "bot-silent", Remote: "origin", Repository: canonicalRepo, HeartbeatTTLSeconds: 60,
					Process: fleetv1alpha1.ProcessIdentity{HostID: host.HostID, BootID: host.BootID, PID: c.PID, StartTime: &st}}}
			Expect(k8sClient.Create(ctx, wr)).To(Succeed())
			Eventually(func() string { return get(wr).Status.OwnershipState }).Should(Equal("stale"))
			return wr.Name
		}),
		Entry("worker_live (a running child with a fresh heartbeat)", "worker_live", func(ns string) string {
			return register(ns, "alive", startChild(), 0, fleetv1alpha1.OwnershipLive).Name
		}),
		Entry("untrusted_identity_provenance (legacy pid- identity)", "untrusted_identity_provenance", func(ns string) string {
			return eligible(ns, "legacy", func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.ClientInstanceID = "pid-4242" }).Name
		}),
		Entry("repository_binding_ambiguous", "repository_binding_ambiguous", func(ns string) string {
			return eligible(ns, "elsewhere", func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.Repository = "acme/other" }).Name
		}),
		Entry("host_binding_unproven", "host_binding_unproven", func(ns string) string {
			return eligible(ns, "otherhost", func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.Process.HostID = "another-machine" }).Name
		}),
		Entry("boot_identity_unknown", "boot_identity_unknown", func(ns string) string {
			return eligible(ns, "noboot", func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.Process.BootID = "" }).Name
		}),
		Entry("pid_alive (a running child whose heartbeat lapsed)", "pid_alive", func(ns string) string {
			return register(ns, "hung", startChild(), hour, fleetv1alpha1.OwnershipStale).Name
		}),
		Entry("pid_reuse_detected (pid alive with another start time)", "pid_reuse_detected", func(ns string) string {
			c := startChild()
			c.StartTime++ // the registered incarnation started one tick earlier: another process
			return register(ns, "reused", c, hour, fleetv1alpha1.OwnershipStale).Name
		}),
		Entry("heartbeat_not_expired (fresh heartbeat, process gone)", "heartbeat_not_expired", func(ns string) string {
			return register(ns, "fresh", deadChild(), 0, fleetv1alpha1.OwnershipStale).Name
		}),
		Entry("ambiguous_ownership_state", "ambiguous_ownership_state", func(ns string) string {
			c := deadChild()
			st := c.StartTime
			wr := &fleetv1alpha1.WorkerRegistration{ObjectMeta: metav1.ObjectMeta{Name: "ambiguous", Namespace: ns,
				Labels: map[string]string{unclassifiedLabel: "true"}},
				Spec: fleetv1alpha1.WorkerRegistrationSpec{ClientInstanceID: "inst-amb", WorkerNamespace: "slot-amb",
					Identity: "bot-amb", Remote: "origin", Repository: canonicalRepo, HeartbeatTTLSeconds: 60,
					Process: fleetv1alpha1.ProcessIdentity{HostID: host.HostID, BootID: host.BootID, PID: c.PID, StartTime: &st}}}
			Expect(k8sClient.Create(ctx, wr)).To(Succeed())
			hb := metav1.NewTime(time.Now().Add(-hour))
			wr.Status = fleetv1alpha1.WorkerRegistrationStatus{Phase: "Active", LastHeartbeatAt: &hb, OwnershipState: "live"}
			Expect(k8sClient.Status().Update(ctx, wr)).To(Succeed())
			return wr.Name
		}),
		Entry("conflicting_identity_evidence (session shared with a live worker)", "conflicting_identity_evidence", func(ns string) string {
			register(ns, "livepeer", startChild(), 0, fleetv1alpha1.OwnershipLive,
				func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.SessionID = "shared-session" })
			return eligible(ns, "shadow", func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.SessionID = "shared-session" }).Name
		}),
		Entry("client_instance_conflict (same instance and slot as a live worker)", "client_instance_conflict", func(ns string) string {
			register(ns, "liveinst", startChild(), 0, fleetv1alpha1.OwnershipLive, func(w *fleetv1alpha1.WorkerRegistration) {
				w.Spec.ClientInstanceID, w.Spec.WorkerNamespace = "inst-shared", "slot-shared"
			})
			return eligible(ns, "twin", func(w *fleetv1alpha1.WorkerRegistration) {
				w.Spec.ClientInstanceID, w.Spec.WorkerNamespace = "inst-shared", "slot-shared"
			}).Name
		}),
		Entry("protected_active_workflow_owner (holds an active TaskClaim)", "protected_active_workflow_owner", func(ns string) string {
			wr := eligible(ns, "busy")
			activeClaim(ns, wr.Name)
			return wr.Name
		}),
	)

	It("preserves rows as pid_liveness_unknown when the probe cannot tell (the controller's boot facts are stale)", func() {
		ns := newNamespace()
		staleBoot := "00000000-0000-0000-0000-000000000000"
		wr := eligible(ns, "unknown", func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.Process.BootID = staleBoot })
		p := newPlanObj(ns, "direct-unknown")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		blind := &liveness.ProcProber{Facts: liveness.HostFacts{HostID: testHostID, BootID: staleBoot}}
		r := newPlanReconciler(k8sClient, k8sClient, blind)
		r.Host.BootID = staleBoot
		p = reconcilePlan(r, p)
		Expect(reasonOf(p.Status.Preserved, wr.Name)).To(Equal("pid_liveness_unknown"))
	})

	It("preserves a registered process while it runs and retires it once it has been killed", func() {
		ns := newNamespace()
		c := startChild()
		wr := register(ns, "worker", c, hour, fleetv1alpha1.OwnershipStale) // heartbeat lapsed, process alive
		p := createPlan(ns)
		Expect(reasonOf(p.Status.Preserved, wr.Name)).To(Equal("pid_alive"))
		Expect(p.Status.CandidateWorkerIdentities).To(BeEmpty())

		c.Kill()
		p = createPlan(ns)
		Expect(p.Status.CandidateWorkerIdentities).To(Equal([]string{wr.Name}))
		Expect(approve(gitops(), p)).To(Succeed())
		p = waitOutcome(p, "applied")
		Expect(p.Status.Retired).To(Equal([]string{wr.Name}))
		Expect(get(wr).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired))
	})

	It("is deterministic: the same registry gives the same tokens at different times", func() {
		ns := newNamespace()
		eligible(ns, "a")
		eligible(ns, "b")
		register(ns, "c", startChild(), 0, fleetv1alpha1.OwnershipLive)
		p1 := createPlan(ns)
		time.Sleep(1100 * time.Millisecond)
		p2 := createPlan(ns)
		Expect(p2.Status.RegistryFingerprint).To(Equal(p1.Status.RegistryFingerprint))
		Expect(p2.Status.CandidateFingerprint).To(Equal(p1.Status.CandidateFingerprint))
		Expect(p2.Status.CandidateWorkerIdentities).To(Equal([]string{"a", "b"}))
	})
})

// --- approval and apply ------------------------------------------------------------------

var _ = Describe("RetirementPlan approval and apply", func() {
	It("applies an approved plan: retires exactly the candidates, keeps history, deletes nothing", func() {
		ns := newNamespace()
		a, b := eligible(ns, "a"), eligible(ns, "b")
		live := register(ns, "live", startChild(), 0, fleetv1alpha1.OwnershipLive)
		p := createPlan(ns)
		Expect(approve(gitops(), p)).To(Succeed())
		p = waitOutcome(p, "applied")

		Expect(p.Status.Retired).To(Equal([]string{"a", "b"}))
		Expect(p.Status.RetiredCount).To(BeEquivalentTo(2))
		Expect(p.Status.MutationPerformed).To(BeTrue())
		Expect(*p.Status.ApplyComplete).To(BeTrue())
		Expect(meta.IsStatusConditionTrue(p.Status.Conditions, "Approved")).To(BeTrue())
		Expect(meta.IsStatusConditionTrue(p.Status.Conditions, "Applied")).To(BeTrue())
		expectReadiness(p, "True", "", fleetv1alpha1.ReasonApplySucceeded)
		expectApplied(p, metav1.ConditionTrue, fleetv1alpha1.ReasonApplySucceeded)
		for _, wr := range []*fleetv1alpha1.WorkerRegistration{a, b} {
			got := get(wr)
			Expect(got.Status.Phase).To(Equal("Retired"))
			Expect(got.Status.OwnershipState).To(Equal("historical"))
			Expect(got.Status.RetiredAt).NotTo(BeNil())
			Expect(got.Status.RetiredBy).To(Equal(ns + "/" + p.Name))
			Expect(got.Status.RetirementReason).To(Equal("eligible_stale_orphan"))
		}
		expectActive(live)
		Expect(p.Status.PostApply.StaleWorkerCount).To(BeEquivalentTo(0))
		Expect(p.Status.PostApply.HistoricalWorkerCount).To(BeEquivalentTo(2))
		Expect(p.Status.PostApply.LiveFleetSafe).To(BeTrue())
	})

	It("never applies without Approved: a wrong token or identity list is refused and nothing moves", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		eligible(ns, "b")
		for _, mutate := range []func(*fleetv1alpha1.RetirementApproval){
			func(x *fleetv1alpha1.RetirementApproval) { x.WorkerIdentities = []string{"a"} },
			func(x *fleetv1alpha1.RetirementApproval) {
				x.CandidateFingerprint = "sha256:" + "0000000000000000000000000000000000000000000000000000000000000000"
			},
		} {
			p := createPlan(ns)
			x := &fleetv1alpha1.RetirementApproval{RegistryFingerprint: p.Status.RegistryFingerprint,
				CandidateFingerprint: p.Status.CandidateFingerprint, WorkerIdentities: p.Status.CandidateWorkerIdentities,
				ApprovedBy: gitopsUser, ApprovedGroups: []string{"system:authenticated"}}
			mutate(x)
			Expect(setApproval(gitops(), p, x)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				c := meta.FindStatusCondition(p.Status.Conditions, "Approved")
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal("ApprovalMismatch"))
			}).Should(Succeed())
			expectReadiness(p, "False", "True", fleetv1alpha1.ReasonApprovalMismatch)
			Consistently(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(p.Status.Outcome).To(Equal("planned"))
				g.Expect(get(a).Status.Phase).To(Equal("Active"))
			}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
		}
	})

	It("returns registry_revision_moved when a heartbeat lands between plan and apply", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		live := register(ns, "live", startChild(), 0, fleetv1alpha1.OwnershipLive)
		p := createPlan(ns)
		heartbeat(live, 0)
		Expect(approve(gitops(), p)).To(Succeed())
		p = waitOutcome(p, "registry_revision_moved")
		Expect(p.Status.RetiredCount).To(BeZero())
		Expect(p.Status.MutationPerformed).To(BeFalse())
		expectReadiness(p, "False", "True", fleetv1alpha1.ReasonApplyRefused)
		expectApplied(p, metav1.ConditionFalse, fleetv1alpha1.ReasonApplyRefused)
		expectActive(a)
	})

	It("returns candidate_set_moved when a TaskClaim becomes active between plan and apply", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		eligible(ns, "b")
		p := createPlan(ns)
		activeClaim(ns, a.Name)
		Expect(approve(gitops(), p)).To(Succeed())
		p = waitOutcome(p, "candidate_set_moved")
		Expect(p.Status.RetiredCount).To(BeZero())
		expectReadiness(p, "False", "True", fleetv1alpha1.ReasonApplyRefused)
		expectActive(a)
	})

	It("returns already_retired for an idempotent replay and nothing_requested for an empty list", func() {
		ns := newNamespace()
		eligible(ns, "a")
		first, replay := createPlan(ns), createPlan(ns)
		Expect(replay.Status.CandidateFingerprint).To(Equal(first.Status.CandidateFingerprint))
		Expect(approve(gitops(), first)).To(Succeed())
		waitOutcome(first, "applied")
		Expect(approve(gitops(), replay)).To(Succeed())
		replay = waitOutcome(replay, "already_retired")
		Expect(replay.Status.MutationPerformed).To(BeFalse())
		expectReadiness(replay, "True", "", fleetv1alpha1.ReasonNothingToApply)
		expectApplied(replay, metav1.ConditionFalse, fleetv1alpha1.ReasonNothingToApply)

		empty := createPlan(ns) // everything is retired now: no candidates
		Expect(empty.Status.CandidateWorkerIdentities).To(BeEmpty())
		Expect(approve(gitops(), empty)).To(Succeed())
		empty = waitOutcome(empty, "nothing_requested")
		Expect(empty.Status.MutationPerformed).To(BeFalse())
		expectReadiness(empty, "True", "", fleetv1alpha1.ReasonNothingToApply)
		expectApplied(empty, metav1.ConditionFalse, fleetv1alpha1.ReasonNothingToApply)
	})

	It("returns transaction_failed on an API failure and reports nothing as success", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		p := newPlanObj(ns, "direct-fail")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		failing := interceptor.NewClient(k8sClient.(client.WithWatch), interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if _, ok := obj.(*fleetv1alpha1.WorkerRegistration); ok {
					return apierrors.NewInternalError(errors.New("injected failure"))
				}
				return c.Status().Update(ctx, obj, opts...)
			},
		})
		r := newPlanReconciler(failing, k8sClient, prober)
		p = reconcilePlan(r, p)
		Expect(approve(gitops(), p)).To(Succeed())
		p = reconcilePlan(r, p)
		Expect(p.Status.Outcome).To(Equal("transaction_failed"))
		Expect(*p.Status.Success).To(BeFalse())
		Expect(p.Status.RetiredCount).To(BeZero())
		Expect(p.Status.MutationPerformed).To(BeFalse())
		Expect(meta.IsStatusConditionTrue(p.Status.Conditions, "Applied")).To(BeFalse())
		expectReadiness(p, "False", "True", fleetv1alpha1.ReasonApplyFailed)
		expectApplied(p, metav1.ConditionFalse, fleetv1alpha1.ReasonApplyFailed)
		expectActive(a)
	})

	It("preserves a row changed between revalidation and its update as row_changed_since_plan, "+
		"and writes again one whose change the approval does not cover", func() {
		ns := newNamespace()
		a, b, c := eligible(ns, "a"), eligible(ns, "b"), eligible(ns, "c")
		p := newPlanObj(ns, "direct-cas")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		r.BeforeWrite = func(ctx context.Context, worker string) {
			switch worker { // a concurrent writer touches the row after the apply read it
			case b.Name: // its heartbeat, which the approval covers
				cur := get(b)
				hb := metav1.NewTime(time.Now().Add(-3 * time.Hour))
				cur.Status.LastHeartbeatAt = &hb
				Expect(k8sClient.Status().Update(ctx, cur)).To(Succeed())
			case c.Name: // a label and a condition message, which it does not
				cur := get(c)
				cur.Labels = map[string]string{"touched": "yes"}
				Expect(k8sClient.Update(ctx, cur)).To(Succeed())
				cur = get(c)
				Expect(cur.Status.Conditions).NotTo(BeEmpty())
				cur.Status.Conditions[0].Message = "rewritten by someone else"
				Expect(k8sClient.Status().Update(ctx, cur)).To(Succeed())
			}
		}
		p = reconcilePlan(r, p)
		Expect(approve(gitops(), p)).To(Succeed())
		p = reconcilePlan(r, p)
		Expect(p.Status.Outcome).To(Equal("applied"))
		Expect(p.Status.Retired).To(Equal([]string{a.Name, c.Name}), "c was read again, is the row approved, and was probed and written again")
		Expect(reasonOf(p.Status.ApplyPreserved, b.Name)).To(Equal("row_changed_since_plan"))
		Expect(p.Status.ApplyPreserved).To(HaveLen(1))
		expectActive(b)
	})

	It("stops when the fence moves mid-apply and says exactly which rows were retired", func() {
		ns := newNamespace()
		a, b, c := eligible(ns, "a"), eligible(ns, "b"), eligible(ns, "c")
		bystander := register(ns, "bystander", startChild(), 0, fleetv1alpha1.OwnershipLive)
		p := newPlanObj(ns, "direct-fence")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		r.BeforeWrite = func(ctx context.Context, worker string) {
			if worker == b.Name { // a claim acquired after revalidation, as the TaskClaim controller does it
				activeClaim(ns, bystander.Name)
				Expect(workflowfence.Fence{Client: k8sClient, Reader: k8sClient, Clock: clock.RealClock{}}.Bump(ctx, ns)).To(Succeed())
			}
		}
		p = reconcilePlan(r, p)
		Expect(approve(gitops(), p)).To(Succeed())
		p = reconcilePlan(r, p)
		Expect(p.Status.Outcome).To(Equal("applied"))
		Expect(p.Status.Retired).To(Equal([]string{a.Name}))
		Expect(*p.Status.ApplyComplete).To(BeFalse(), "a partial apply is never reported as a clean one")
		Expect(*p.Status.Success).To(BeFalse(), "nor as a success")
		Expect(reasonOf(p.Status.ApplyPreserved, b.Name)).To(Equal("external_fence_moved"))
		Expect(reasonOf(p.Status.ApplyPreserved, c.Name)).To(Equal("external_fence_moved"))
		Expect(meta.FindStatusCondition(p.Status.Conditions, "Applied").Reason).To(Equal("ApplyPartial"))
		expectApplied(p, metav1.ConditionFalse, fleetv1alpha1.ReasonApplyPartial)
		expectReadiness(p, "False", "True", fleetv1alpha1.ReasonApplyPartial)
		expectActive(b, c)
	})

	It("retires nothing without a liveness prober (liveness_reprobe_unavailable)", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		p := newPlanObj(ns, "direct-noprobe")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		p = reconcilePlan(r, p)
		Expect(approve(gitops(), p)).To(Succeed())
		r.Reprober = nil
		p = reconcilePlan(r, p)
		Expect(p.Status.RetiredCount).To(BeZero())
		Expect(reasonOf(p.Status.ApplyPreserved, a.Name)).To(Equal("liveness_reprobe_unavailable"))
		expectActive(a)
	})

	It("reports the fleet truthfully after apply: no stale rows, yet unsafe with a live legacy worker", func() {
		ns := newNamespace()
		eligible(ns, "a")
		register(ns, "legacy-live", startChild(), 0, fleetv1alpha1.OwnershipLive,
			func(w *fleetv1alpha1.WorkerRegistration) { w.Spec.ClientInstanceID = "pid-31337" })
		p := createPlan(ns)
		Expect(approve(gitops(), p)).To(Succeed())
		p = waitOutcome(p, "applied")
		Expect(p.Status.PostApply.StaleWorkerCount).To(BeEquivalentTo(0))
		Expect(p.Status.PostApply.HistoricalWorkerCount).To(BeEquivalentTo(1))
		Expect(p.Status.PostApply.LiveFleetSafe).To(BeFalse())
		Expect(p.Status.PostApply.Blockers).To(ContainElement(HaveField("Code", "legacy_incomplete_identity")))
	})
})

// --- permissions -------------------------------------------------------------------------

var _ = Describe("RetirementPlan permissions (impersonated users)", func() {
	It("lets only holders of the approve verb approve, and unbinding revokes at once", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		bind(ns, "bob", "fleet-retirement-planner")
		bobEdit := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "edit-plans", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"fleet.giteatools.dev"}, Resources: []string{"retirementplans"}, Verbs: []string{"get", "update"}}}}
		Expect(k8sClient.Create(ctx, bobEdit)).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-edit", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "edit-plans"},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "bob"}}})).To(Succeed())

		p := newPlanObj(ns, "direct-perm")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		p = reconcilePlan(r, p)

		// bob may edit plans but lacks approve: the admission policy refuses his approval.
		err := approve(impersonating("bob"), p)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("may not approve retirement plans"))

		// Nor can anyone approve in alice's name.
		forged := &fleetv1alpha1.RetirementApproval{RegistryFingerprint: p.Status.RegistryFingerprint,
			CandidateFingerprint: p.Status.CandidateFingerprint, WorkerIdentities: p.Status.CandidateWorkerIdentities, ApprovedBy: "alice"}
		err = setApproval(k8sClient, p, forged)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("approvedBy must be the approving user"))

		// alice, bound to the approver role, can.
		rb := bind(ns, "alice", "fleet-retirement-approver")
		Eventually(func() error { return approve(impersonating("alice"), p) }).Should(Succeed())

		// The binding is deleted after approval but before the first write: nothing is retired.
		r.Approvers = revokeAfterFirstCheck{ApproverChecker: r.Approvers, done: new(bool), revoke: func() { Expect(k8sClient.Delete(ctx, rb)).To(Succeed()) }}
		p = reconcilePlan(r, p)
		Expect(meta.IsStatusConditionTrue(p.Status.Conditions, "Approved")).To(BeTrue())
		Expect(p.Status.Outcome).To(Equal("transaction_failed"))
		Expect(p.Status.Message).To(ContainSubstring("no longer honoured"))
		Expect(p.Status.Message).To(ContainSubstring(fleetv1alpha1.ReasonApproverNotAuthorized))
		expectReadiness(p, "False", "True", fleetv1alpha1.ReasonApplyFailed)
		expectActive(a)

		// And alice can no longer approve a new plan.
		p2 := newPlanObj(ns, "direct-perm2")
		Expect(k8sClient.Create(ctx, p2)).To(Succeed())
		p2 = reconcilePlan(newPlanReconciler(k8sClient, k8sClient, prober), p2)
		err = approve(impersonating("alice"), p2)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "unbinding the approver role revokes approval at once: %v", err)
	})

	It("leaves a plan whose approver lost the approve verb unready, but not stalled, and retires nothing", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		p := newPlanObj(ns, "direct-unauthorized")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		p = reconcilePlan(r, p)
		rb := bind(ns, "carol", "fleet-retirement-approver")
		Eventually(func() error { return approve(impersonating("carol"), p) }).Should(Succeed())
		Expect(k8sClient.Delete(ctx, rb)).To(Succeed())
		Eventually(func(g Gomega) {
			ok, _, err := r.Approvers.CanApprove(ctx, authz.Subject{User: "carol", Groups: []string{"system:authenticated"}}, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeFalse())
		}).Should(Succeed())

		p = reconcilePlan(r, p)
		approved := meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ApprovedCondition)
		Expect(approved).NotTo(BeNil())
		Expect([]string{string(approved.Status), approved.Reason}).To(Equal([]string{"False", fleetv1alpha1.ReasonApproverNotAuthorized}))
		expectReadiness(p, "False", "", fleetv1alpha1.ReasonApproverNotAuthorized)
		Expect(p.Status.Outcome).To(Equal("planned"), "the plan waits: an operator may bind the approver role again")
		expectActive(a)
	})

	It("keeps workers from retiring registrations themselves", func() {
		ns := newNamespace()
		wr := register(ns, "self", startChild(), 0, fleetv1alpha1.OwnershipLive)
		worker := "system:serviceaccount:" + ns + ":self"
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "fleet-worker"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "self", Namespace: ns}}})).To(Succeed())
		wc := impersonating(worker)
		Eventually(func(g Gomega) {
			cur := get(wr)
			hb := metav1.Now()
			cur.Status.LastHeartbeatAt = &hb
			g.Expect(wc.Status().Update(ctx, cur)).To(Succeed(), "a worker renews its own heartbeat")
		}).Should(Succeed())
		cur := get(wr)
		cur.Status.Phase = fleetv1alpha1.PhaseRetired
		err := wc.Status().Update(ctx, cur)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("only the fleet controller retires registrations"))
		expectActive(wr)
	})
})

// revokeAfterFirstCheck runs revoke after the first (approval) check, so the pre-write
// check sees the revoked permission.
type revokeAfterFirstCheck struct {
	retirementplan.ApproverChecker
	revoke func()
	done   *bool
}

func (r revokeAfterFirstCheck) CanApprove(ctx context.Context, s authz.Subject, ns string) (bool, string, error) {
	ok, why, err := r.ApproverChecker.CanApprove(ctx, s, ns)
	if r.done == nil || !*r.done {
		r.revoke()
		if r.done != nil {
			*r.done = true
		}
	}
	return ok, why, err
}

// --- the ownership state after apply ----------------------------------------------------

var _ = Describe("WorkerRegistration ownership after apply", func() {
	It("classifies retired rows as historical", func() {
		ns := newNamespace()
		wr := eligible(ns, "old")
		p := createPlan(ns)
		Expect(approve(gitops(), p)).To(Succeed())
		waitOutcome(p, "applied")
		Eventually(func() string { return get(wr).Status.OwnershipState }).Should(Equal(fleetv1alpha1.OwnershipHistorical))
	})
})
