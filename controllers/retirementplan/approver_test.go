package retirementplan_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

// approvedReason is the Approved condition of p as [status, reason].
func approvedReason(p *fleetv1alpha1.RetirementPlan) []string {
	c := meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ApprovedCondition)
	if c == nil {
		return nil
	}
	return []string{string(c.Status), c.Reason}
}

// waitApproved waits until the manager records reason on p's Approved condition.
func waitApproved(p *fleetv1alpha1.RetirementPlan, status, reason string) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		g.Expect(approvedReason(p)).To(Equal([]string{status, reason}))
	}).Should(Succeed())
	return p
}

func bindSubject(ns, clusterRole string, s rbacv1.Subject) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("rb"), Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{s},
	})).To(Succeed())
}

func serviceAccountSubject(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: "ServiceAccount", Name: name, Namespace: ns}
}

func impersonatingServiceAccount(ns, name string) client.Client {
	GinkgoHelper()
	user, groups := testenv.ServiceAccount(ns, name)
	return impersonating(user, groups...)
}

// eventually approves p as c, retrying while a fresh binding reaches the authorizer.
func approveEventually(c client.Client, p *fleetv1alpha1.RetirementPlan) {
	GinkgoHelper()
	Eventually(func() error { return approve(c, p) }).Should(Succeed())
}

var _ = Describe("RetirementPlan approvers: who approved is what admission saw", func() {
	It("lets a user approve through a group binding, and the plan applies", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		const group = "fleet-test-retirement-approvers"
		bindSubject(ns, "fleet-retirement-approver", rbacv1.Subject{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: group})
		dana := impersonating("dana", group) // dana herself is bound to nothing
		p := createPlan(ns)
		approveEventually(dana, p)
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		Expect(p.Spec.Approval.ApprovedBy).To(Equal("dana"))
		Expect(p.Spec.Approval.ApprovedGroups).To(ConsistOf(group, "system:authenticated"))
		p = waitOutcome(p, "applied")
		Expect(p.Status.Retired).To(Equal([]string{a.Name}))
		Expect(get(a).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired))
	})

	It("refuses at admission an approval whose groups are not the requester's", func() {
		ns := newNamespace()
		eligible(ns, "a")
		p := createPlan(ns)
		me := whoAmI(gitops())
		for _, groups := range [][]string{nil, {"system:masters", "system:authenticated"}, append(me.Groups, "extra")} {
			err := setApproval(gitops(), p, approvalAs(authz.Subject{User: me.User, Groups: groups}, p))
			Expect(err).To(HaveOccurred(), "groups %v", groups)
			Expect(err.Error()).To(ContainSubstring("approvedGroups must be the approving user's groups"))
		}
	})

	It("lets a system:masters user approve out of the box (the embedded make-run user)", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		p := createPlan(ns)
		admin := whoAmI(k8sClient) // envtest's admin: the user `make run` writes into its kubeconfig
		Expect(admin.Groups).To(ContainElement("system:masters"))
		Expect(approve(k8sClient, p)).To(Succeed())
		p = waitOutcome(p, "applied")
		Expect(p.Status.Retired).To(Equal([]string{a.Name}))

		ns2 := newNamespace()
		b := eligible(ns2, "b")
		p2 := createPlan(ns2)
		Expect(approve(impersonating("root", "system:masters"), p2)).To(Succeed())
		p2 = waitOutcome(p2, "applied")
		Expect(p2.Status.Retired).To(Equal([]string{b.Name}))
	})

	DescribeTable("refuses a worker's ServiceAccount as approver, even bound to the approver role",
		func(worker bool, setup func(ns string) (sa string)) {
			ns := newNamespace()
			a := eligible(ns, "a")
			sa := setup(ns)
			bindSubject(ns, "fleet-retirement-approver", serviceAccountSubject(ns, sa))
			p := createPlan(ns)
			approveEventually(impersonatingServiceAccount(ns, sa), p)
			if !worker {
				p = waitOutcome(p, "applied")
				Expect(p.Status.Retired).To(ContainElement(a.Name))
				return
			}
			p = waitApproved(p, "False", fleetv1alpha1.ReasonApproverIsWorker)
			expectReadiness(p, "False", "True", fleetv1alpha1.ReasonApproverIsWorker)
			Consistently(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(p.Status.Outcome).To(Equal("planned"))
				g.Expect(get(a).Status.Phase).To(Equal(fleetv1alpha1.PhaseActive))
			}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
		},
		Entry("a ServiceAccount approving its own retirement (its WorkerRegistration is a candidate)", true, func(ns string) string {
			return "a"
		}),
		Entry("a ServiceAccount with a live WorkerRegistration of its name", true, func(ns string) string {
			return register(ns, "busy-bot", startChild(), 0, fleetv1alpha1.OwnershipLive).Name
		}),
		Entry("a ServiceAccount bound to the fleet-worker role, with no registration", true, func(ns string) string {
			bindSubject(ns, "fleet-worker", serviceAccountSubject(ns, "helper"))
			return "helper"
		}),
		Entry("control: a GitOps ServiceAccount bound to the approver role alone approves", false, func(ns string) string {
			return "gitops-sa"
		}),
		Entry("control: a ServiceAccount whose worker verb comes from a wildcard role approves", false, func(ns string) string {
			bindSubject(ns, "cluster-admin", serviceAccountSubject(ns, "admin-sa"))
			return "admin-sa"
		}),
	)

	It("re-checks the approver during a long apply and stops when it loses the verb", func() {
		ns := newNamespace()
		a, b, c := eligible(ns, "a"), eligible(ns, "b"), eligible(ns, "c")
		rb := bind(ns, "erin", "fleet-retirement-approver")
		p := newPlanObj(ns, "direct-recheck")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		r.ApproverRecheck = retirement.Recheck{Rows: 1} // every row, so the test needs three rows only
		p = reconcilePlan(r, p)
		approveEventually(impersonating("erin"), p)
		r.BeforeWrite = func(ctx context.Context, worker string) {
			if worker != b.Name {
				return
			}
			Expect(k8sClient.Delete(ctx, rb)).To(Succeed())
			Eventually(func() bool {
				ok, _, err := r.Approvers.CanApprove(ctx, authz.Subject{User: "erin", Groups: []string{"system:authenticated"}}, ns)
				return err == nil && !ok
			}).Should(BeTrue())
		}
		p = reconcilePlan(r, p)
		Expect(p.Status.Outcome).To(Equal("applied"))
		Expect(p.Status.Retired).To(Equal([]string{a.Name}))
		Expect(*p.Status.ApplyComplete).To(BeFalse())
		Expect(reasonOf(p.Status.ApplyPreserved, b.Name)).To(Equal(retirement.ReasonApprovalRevoked))
		Expect(reasonOf(p.Status.ApplyPreserved, c.Name)).To(Equal(retirement.ReasonApprovalRevoked))
		expectReadiness(p, "False", "True", fleetv1alpha1.ReasonApplyPartial)
		expectActive(b, c)
	})

	It("stops a long apply when the fleet plan it recorded the approval of is deleted", func() {
		ns := newNamespace()
		a, b, c := eligible(ns, "a"), eligible(ns, "b"), eligible(ns, "c")
		p := newPlanObj(ns, "direct-withdrawn")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		r.ApproverRecheck = retirement.Recheck{Rows: 1} // every row, so the test needs three rows only
		p = reconcilePlan(r, p)
		Expect(approve(gitops(), p)).To(Succeed())
		hp := hostPlanOf(p)
		r.BeforeWrite = func(ctx context.Context, worker string) {
			if worker == b.Name {
				// The host plan recorded the approval before its first row; now the plan the
				// user approved is gone (envtest runs no garbage collector, so the host plan
				// stays).
				Expect(k8sClient.Delete(ctx, p)).To(Succeed())
			}
		}
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).NotTo(HaveOccurred())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &fleetv1alpha1.RetirementPlan{}))).To(BeTrue())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(hp), hp)).To(Succeed())
		Expect(hp.Status.HostApproval.WorkerIdentities).To(Equal([]string{a.Name, b.Name, c.Name}), "recorded once, before the deletion")
		Expect(hp.Status.Retired).To(Equal([]string{a.Name}))
		Expect(*hp.Status.ApplyComplete).To(BeFalse())
		Expect(reasonOf(hp.Status.ApplyPreserved, b.Name)).To(Equal(retirement.ReasonApprovalRevoked))
		Expect(reasonOf(hp.Status.ApplyPreserved, c.Name)).To(Equal(retirement.ReasonApprovalRevoked))
		Expect(detailOf(hp.Status.ApplyPreserved, b.Name)).To(ContainSubstring("cannot be read"))
		expectActive(b, c)
	})

	It("retires nothing when the approver lost the verb between the fleet plan's verdict and the host plan's apply", func() {
		ns := newNamespace()
		a, b := eligible(ns, "a"), eligible(ns, "b")
		rb := bind(ns, "erin", "fleet-retirement-approver")
		p := newPlanObj(ns, "direct-lapsed")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		p = reconcilePlan(r, p)
		approveEventually(impersonating("erin"), p)

		By("the fleet plan judges the approval while erin holds the verb")
		_, err := r.fleet.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		Expect(meta.IsStatusConditionTrue(p.Status.Conditions, fleetv1alpha1.ApprovedCondition)).To(BeTrue())

		By("erin loses the verb before the host plan applies")
		Expect(k8sClient.Delete(ctx, rb)).To(Succeed())
		Eventually(func() bool {
			ok, _, err := r.Approvers.CanApprove(ctx, authz.Subject{User: "erin", Groups: []string{"system:authenticated"}}, ns)
			return err == nil && !ok
		}).Should(BeTrue())
		hp := hostPlanOf(p)
		_, err = r.HostPlanReconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hp)})
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(hp), hp)).To(Succeed())
		Expect(hp.Status.HostApproval).NotTo(BeNil(), "the host plan recorded its fleet plan's approval")
		Expect(hp.Status.Outcome).To(Equal(retirement.OutcomeTransactionFailed))
		Expect(hp.Status.Retired).To(BeEmpty())
		Expect(hp.Status.ApplyProgress).To(BeNil(), "refused before the intent: no apply started")
		Expect(hp.Status.Message).To(ContainSubstring("no longer honoured"))
		expectActive(a, b)
	})

	It("looks at an unauthorized approver again with a growing interval and warns once", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		rb := bind(ns, "frank", "fleet-retirement-approver")
		p := newPlanObj(ns, "direct-backoff")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		rec := &countingRecorder{}
		r.Recorder = rec
		r.fleet.ApproverBackoff = retirement.Backoff{Initial: time.Second, Max: 3 * time.Second}
		p = reconcilePlan(r, p)
		approveEventually(impersonating("frank"), p)
		Expect(k8sClient.Delete(ctx, rb)).To(Succeed())
		Eventually(func() bool {
			ok, _, err := r.Approvers.CanApprove(ctx, authz.Subject{User: "frank", Groups: []string{"system:authenticated"}}, ns)
			return err == nil && !ok
		}).Should(BeTrue())

		var waits []time.Duration
		for range 4 {
			res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
			Expect(err).NotTo(HaveOccurred())
			waits = append(waits, res.RequeueAfter)
		}
		Expect(waits).To(Equal([]time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}))
		Expect(rec.warnings(fleetv1alpha1.ReasonApproverNotAuthorized)).To(Equal(1), "one Warning for the transition, none per recheck")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		Expect(approvedReason(p)).To(Equal([]string{"False", fleetv1alpha1.ReasonApproverNotAuthorized}))
		expectActive(a)
	})
})

// The guarding policy is cluster-scoped: these specs change it, so they run alone and
// put it back as shipped.
var _ = Describe("RetirementPlan approvals without the guarding admission policy", Serial, func() {
	var shipped authz.Shipped
	BeforeEach(func() {
		var err error
		shipped, err = authz.ShippedApprovalGuard()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(restoreGuard, shipped)
	})

	It("honours no forged approval while the policy is deleted, nor after it is restored", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		bind(ns, "pete", "fleet-retirement-planner")
		Expect(k8sClient.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "edit-plans", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"fleet.giteatools.dev"}, Resources: []string{"retirementplans"}, Verbs: []string{"get", "update"}}}})).To(Succeed())
		bindRole(ns, "pete", "edit-plans")
		pete := impersonating("pete") // may plan and edit plans, may not approve
		p := newPlanObj(ns, "direct-forged")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		p = reconcilePlan(r, p)
		forged := approvalAs(authz.Subject{User: "admin", Groups: []string{"system:masters", "system:authenticated"}}, p)
		Expect(setApproval(pete, p, forged)).NotTo(Succeed(), "admission refuses the forgery while the policy is there")

		Expect(k8sClient.Delete(ctx, shipped.Policy.DeepCopy())).To(Succeed())
		Eventually(func() error { return setApproval(pete, p, forged) }).Should(Succeed(), "without the policy the forgery is admitted")

		p = reconcilePlan(r, p)
		Expect(approvedReason(p)).To(Equal([]string{"False", fleetv1alpha1.ReasonApprovalPolicyMissing}))
		expectReadiness(p, "False", "True", fleetv1alpha1.ReasonApprovalPolicyMissing)
		Expect(p.Status.Outcome).To(Equal("planned"))
		expectActive(a)

		restoreGuard(shipped)
		Eventually(func(g Gomega) {
			guard, err := r.Approvers.ApprovalGuard(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(guard.PolicyFound && guard.BindingFound && len(guard.Differences) == 0).To(BeTrue())
		}).Should(Succeed())
		p = reconcilePlan(r, p)
		Expect(approvedReason(p)).To(Equal([]string{"False", fleetv1alpha1.ReasonApprovalPolicyMissing}),
			"a restored policy cannot vouch for an approval it did not see")
		Expect(meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ApprovedCondition).Message).To(ContainSubstring("not in place unchanged since before this plan"))
		Expect(p.Status.Outcome).To(Equal("planned"))
		expectActive(a)
	})

	It("honours no approval while the binding is altered to warn only", func() {
		ns := newNamespace()
		a := eligible(ns, "a")
		p := newPlanObj(ns, "direct-altered")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := newPlanReconciler(k8sClient, k8sClient, prober)
		p = reconcilePlan(r, p)
		Expect(approve(gitops(), p)).To(Succeed())

		b := &admissionv1.ValidatingAdmissionPolicyBinding{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(shipped.Binding), b)).To(Succeed())
		b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn}
		Expect(k8sClient.Update(ctx, b)).To(Succeed())

		p = reconcilePlan(r, p)
		Expect(approvedReason(p)).To(Equal([]string{"False", fleetv1alpha1.ReasonApprovalPolicyAltered}))
		Expect(meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ApprovedCondition).Message).To(ContainSubstring("validationActions"))
		Expect(p.Status.Outcome).To(Equal("planned"))
		expectActive(a)
	})
})

func bindRole(ns, user, role string) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("rb"), Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}})).To(Succeed())
}

// restoreGuard puts the guarding policy and binding back as shipped, waits until
// admission enforces them again, and lets them settle, so later plans are honoured.
func restoreGuard(shipped authz.Shipped) {
	GinkgoHelper()
	p := &admissionv1.ValidatingAdmissionPolicy{}
	switch err := k8sClient.Get(ctx, client.ObjectKeyFromObject(shipped.Policy), p); {
	case apierrors.IsNotFound(err):
		Expect(k8sClient.Create(ctx, shipped.Policy.DeepCopy())).To(Succeed())
	case err != nil:
		Fail(err.Error())
	}
	b := &admissionv1.ValidatingAdmissionPolicyBinding{}
	switch err := k8sClient.Get(ctx, client.ObjectKeyFromObject(shipped.Binding), b); {
	case apierrors.IsNotFound(err):
		Expect(k8sClient.Create(ctx, shipped.Binding.DeepCopy())).To(Succeed())
	case err != nil:
		Fail(err.Error())
	default:
		if len(b.Spec.ValidationActions) != 1 || b.Spec.ValidationActions[0] != admissionv1.Deny {
			b.Spec = shipped.Binding.Spec
			Expect(k8sClient.Update(ctx, b)).To(Succeed())
		}
	}
	// Enforced again: a forged approvedBy is refused (a dry-run create runs admission).
	ns := newNamespace()
	Eventually(func() error {
		probe := newPlanObj(ns, testenv.Uniq("probe"))
		probe.Spec.Approval = &fleetv1alpha1.RetirementApproval{CandidateFingerprint: "sha256:" + zeros, RegistryFingerprint: "sha256:" + zeros,
			ApprovedBy: "someone-else", ApprovedGroups: []string{"system:authenticated"}}
		return k8sClient.Create(ctx, probe, client.DryRunAll)
	}).Should(MatchError(ContainSubstring("approvedBy must be the approving user")))
	time.Sleep(retirement.ApprovalGuardSettle + time.Second)
}

const zeros = "0000000000000000000000000000000000000000000000000000000000000000"

// countingRecorder counts the events it is given, by type and reason, and by the name
// of the object they are about.
type countingRecorder struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *countingRecorder) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, _, _ string, _ ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[eventtype+"/"+reason]++
	if o, err := meta.Accessor(regarding); err == nil {
		c.counts[o.GetName()+":"+eventtype+"/"+reason]++
	}
}

// countAbout is how many events of kind/reason c was given about the object named name.
func (c *countingRecorder) countAbout(name, kind, reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[name+":"+kind+"/"+reason]
}

func (c *countingRecorder) warnings(reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts["Warning/"+reason]
}

var _ = Describe("RetirementPlan GitOps role", func() {
	It("lets the identity a GitOps tool applies as create, approve and prune a plan, and nothing more", func() {
		ns := newNamespace()
		dead := eligible(ns, "dead")
		const sa = "flux-gitops"
		bindSubject(ns, "fleet-retirement-gitops", serviceAccountSubject(ns, sa))
		tool := impersonatingServiceAccount(ns, sa)

		By("creating the plan from Git, as the impersonated ServiceAccount")
		p := newPlanObj(ns, testenv.Uniq("gitops"))
		Eventually(func() error { return tool.Create(ctx, p) }).Should(Succeed(), "the binding reaches the authorizer")
		p = waitOutcome(p, "planned")

		By("approving it when the approval lands in Git, in its own name")
		approveEventually(tool, p)
		p = waitOutcome(p, "applied")
		Expect(p.Spec.Approval.ApprovedBy).To(Equal("system:serviceaccount:" + ns + ":" + sa))
		Expect(p.Status.Retired).To(Equal([]string{dead.Name}))

		By("pruning it when it leaves Git")
		Expect(tool.Delete(ctx, p)).To(Succeed())

		By("and nothing more")
		user, groups := testenv.ServiceAccount(ns, sa)
		allowed := func(verb, resource, subresource string) bool {
			GinkgoHelper()
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: fleetv1alpha1.GroupVersion.Group,
					Resource: resource, Subresource: subresource}}}
			Expect(k8sClient.Create(ctx, sar)).To(Succeed())
			return sar.Status.Allowed
		}
		for _, v := range []string{"create", "get", "list", "watch", "update", "patch", "delete", "approve"} {
			Expect(allowed(v, "retirementplans", "")).To(BeTrue(), "%s retirementplans", v)
		}
		Expect(allowed("get", "retirementplanpages", "")).To(BeTrue())
		for _, denied := range [][3]string{
			{"update", "retirementplans", "status"}, {"patch", "retirementplans", "status"},
			{"delete", "retirementplanpages", ""}, {"create", "retirementplanpages", ""},
			{"update", "workerregistrations", "status"}, {"delete", "workerregistrations", ""}, {"retire", "workerregistrations", ""},
			{"create", "taskclaims", ""}, {"update", "taskclaims", ""},
		} {
			Expect(allowed(denied[0], denied[1], denied[2])).To(BeFalse(), "%s %s/%s", denied[0], denied[1], denied[2])
		}
	})
})
