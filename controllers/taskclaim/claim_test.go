package taskclaim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/capability"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
)

var _ = Describe("Claiming", func() {
	It("activates a capability bound to all eight dimensions only after the Gitea claim is published", func() {
		w := newWorker(nsMain)
		pr := newPull(human, "eight bindings")
		t := pullTarget(pr)
		tc := w.claim(t)
		v := waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated).Status.Validation
		Expect(readRecord(t)).To(BeNil(), "validation publishes nothing")
		free := lease(nsMain, t)
		Expect(holderOf(free)).To(BeEmpty(), "validation takes no lock: it only makes sure a free one exists")
		Expect(free.OwnerReferences).To(BeEmpty())
		Expect(v.ClaimGeneration).To(Equal(free.ResourceVersion), "the pin names the free lock's generation")

		before := time.Now().Truncate(time.Second)
		w.pin(tc)
		got := waitPhase(tc, fleetv1alpha1.ClaimPhaseActive)
		after := time.Now()
		c := got.Status.Capability
		Expect(c).NotTo(BeNil())

		By("1. worker identity")
		Expect(c.Worker).To(Equal(w.name))
		Expect(c.Identity).To(Equal(w.name))
		By("2. repository")
		Expect(c.Repository).To(Equal(repo))
		By("3. the selected pull request, with its head")
		Expect(c.Target).To(Equal(fleetv1alpha1.ClaimTargetRef{Kind: fleetv1alpha1.TargetKindPullRequest, Number: pr.Number, HeadSHA: pr.HeadSHA}))
		By("4. the derived role")
		Expect(c.Role).To(Equal(string(claim.RoleReviewer)))
		Expect(got.Status.Role).To(Equal(c.Role))
		By("5. the permitted operations")
		Expect(c.Operations).To(Equal(claim.OperationsFor(claim.RoleReviewer)))
		By("6. the pinned state")
		Expect(c.Pin).To(Equal(v.Pin))
		Expect(c.Pin).To(Equal(got.Spec.Pin))
		By("7. the authoritative claim and lease")
		Expect(c.ClaimID).To(Equal(string(tc.UID)))
		Expect(c.LeaseName).To(Equal(lockName(t)))
		l := lease(nsMain, t)
		Expect(l).NotTo(BeNil())
		Expect(holderOf(l)).To(Equal(string(tc.UID)))
		Expect(c.LeaseGeneration).To(Equal(l.ResourceVersion))
		Expect(l.OwnerReferences).To(ConsistOf(SatisfyAll(
			HaveField("APIVersion", fleetv1alpha1.GroupVersion.String()), HaveField("Kind", "TaskClaim"),
			HaveField("Name", tc.Name), HaveField("UID", tc.UID))),
			"the lock is owned by the claim that holds it, while it holds it")
		rec := readRecord(t)
		Expect(rec).NotTo(BeNil(), "the claim record is in the pull request body")
		Expect([]string{rec.ClaimID, rec.Worker, rec.Identity, rec.Role, rec.Repository, string(rec.Kind), rec.HeadSHA,
			rec.Generation, rec.Pin, string(rec.State)}).To(Equal([]string{string(tc.UID), w.name, w.name, "reviewer", repo,
			string(claim.KindPullRequest), pr.HeadSHA, c.LeaseGeneration, c.Pin, string(claim.RecordStateActive)}))
		Expect(rec.Number).To(Equal(pr.Number))
		Expect(rec.ExpiresAt).To(BeTemporally("==", c.ExpiresAt.Time), "the capability expires with the authoritative record")
		By("8. the expiry")
		Expect(c.ExpiresAt.Time).To(BeTemporally(">=", before.Add(claimTTL)))
		Expect(c.ExpiresAt.Time).To(BeTemporally("<=", after.Add(claimTTL)))

		By("conditions and audit trail")
		expectReadiness(got, "True", "", fleetv1alpha1.ReasonAcquired)
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.ClaimedCondition)).To(BeTrue())
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.CapabilityActiveCondition)).To(BeTrue())
		Eventually(func() []string { return eventsOf(transitionsOf(got)) }).Should(Equal([]string{"claimed"}))
		Eventually(func() []string { return eventReasons(got) }).Should(ContainElement(fleetv1alpha1.ReasonAcquired))
		for _, tr := range transitionsOf(got) {
			Expect(tr.Author).To(Equal(srv.AdminLogin), "audit comments are posted by the controller's identity")
			Expect(tr.Worker).To(Equal(w.name))
			Expect(tr.Role).To(Equal("reviewer"))
		}

		By("authorizing exactly the bound operations on the bound target")
		for _, op := range c.Operations {
			ans := authorize(nsMain, w.name, t, op)
			Expect(ans.Allowed).To(BeTrue(), "operation %s", op)
			Expect(ans.Claim).To(Equal(tc.Name))
		}
		refusedAs := func(q fleetv1alpha1.TaskTarget, op, reason string) {
			GinkgoHelper()
			ans := authorize(nsMain, w.name, q, op)
			Expect(ans.Allowed).To(BeFalse(), "%s on %+v", op, q)
			Expect(ans.Reason).To(Equal(reason), "%s on %+v", op, q)
		}
		refusedAs(t, claim.OpMerge, claim.ReasonOperationNotPermitted)
		refusedAs(t, claim.OpApprove, claim.ReasonOperationNotPermitted)
		refusedAs(t, claim.OpPushBranch, claim.ReasonOperationNotPermitted)
		otherPR := t
		otherPR.Number = pr.Number + 1000
		refusedAs(otherPR, claim.OpReview, claim.ReasonWrongTarget)
		asIssue := issueTarget(pr.Number)
		refusedAs(asIssue, claim.OpComment, claim.ReasonWrongTarget)
		elsewhere := t
		elsewhere.Repository = otherRepo
		refusedAs(elsewhere, claim.OpReview, claim.ReasonWrongRepository)
		wrongHead := t
		wrongHead.HeadSHA = "0000000000000000000000000000000000000000"
		refusedAs(wrongHead, claim.OpReview, claim.ReasonWrongHead)
		noHead := t
		noHead.HeadSHA = ""
		refusedAs(noHead, claim.OpReview, claim.ReasonWrongHead)
		ans := authorize(nsMain, "somebody-else", t, claim.OpReview)
		Expect(ans.Reason).To(Equal(claim.ReasonNoCapability), "another worker holds nothing through this claim")

		By("answering the same through the capability endpoint (POST /v1/authorize)")
		hs := httptest.NewServer((&capability.Server{Reader: k8s, Clock: clock.RealClock{}, Authn: gateway.NewAuthenticator(k8s)}).Handler())
		defer hs.Close()
		token, err := env.ServiceAccountToken(ctx, nsMain, w.name, gateway.Audience)
		Expect(err).NotTo(HaveOccurred())
		ask := func(op string, q fleetv1alpha1.TaskTarget) claim.Answer {
			GinkgoHelper()
			body, _ := json.Marshal(capability.Request{Namespace: nsMain, Worker: w.name, Repository: q.Repository,
				Kind: q.Kind, Number: q.Number, HeadSHA: q.HeadSHA, Operation: op})
			req, err := http.NewRequest(http.MethodPost, hs.URL+"/v1/authorize", bytes.NewReader(body))
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
			var out claim.Answer
			Expect(json.NewDecoder(resp.Body).Decode(&out)).To(Succeed())
			return out
		}
		Expect(ask(claim.OpReview, t)).To(Equal(claim.Answer{Allowed: true, Claim: tc.Name}))
		Expect(ask(claim.OpMerge, t).Reason).To(Equal(claim.ReasonOperationNotPermitted))
		Expect(ask(claim.OpReview, wrongHead).Reason).To(Equal(claim.ReasonWrongHead))
	})

	It("activates an author capability on an issue", func() {
		w := newWorker(nsMain)
		t := issueTarget(newIssue("author capability"))
		got := w.activate(t)
		c := got.Status.Capability
		Expect(c.Role).To(Equal(string(claim.RoleAuthor)))
		Expect(c.Target).To(Equal(fleetv1alpha1.ClaimTargetRef{Kind: fleetv1alpha1.TargetKindIssue, Number: t.Number}))
		Expect(readRecord(t).ClaimID).To(Equal(string(got.UID)))
		Expect(authorize(nsMain, w.name, t, claim.OpPushBranch).Allowed).To(BeTrue())
		Expect(authorize(nsMain, w.name, t, claim.OpOpenPullRequest).Allowed).To(BeTrue())
		Expect(authorize(nsMain, w.name, t, claim.OpReview).Reason).To(Equal(claim.ReasonOperationNotPermitted))
		Expect(authorize(nsMain, w.name, issueTarget(t.Number+1000), claim.OpPushBranch).Reason).To(Equal(claim.ReasonWrongTarget))
	})

	It("moves the workflow fence before it takes the lock, so a running retirement stops", func() {
		w := newWorker(nsMain)
		t := issueTarget(newIssue("fence moves"))
		before := fenceVersion(nsMain)
		tc := w.claim(t)
		waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
		Consistently(func() string { return fenceVersion(nsMain) }, time.Second).Should(Equal(before),
			"validation alone takes no lock and must not move the fence")
		w.pin(tc)
		got := waitPhase(tc, fleetv1alpha1.ClaimPhaseActive)
		after := fenceVersion(nsMain)
		Expect(after).NotTo(Equal(before), "acquiring a claim moves the fence")
		// The fence moved before the lock was written (the lock generation is newer).
		Expect(resourceVersionNewer(got.Status.Capability.LeaseGeneration, after)).To(BeTrue(),
			"lock generation %s must come after the fence version %s", got.Status.Capability.LeaseGeneration, after)
	})
})

// fenceVersion is the resourceVersion of the namespace's workflow fence ("" while absent).
func fenceVersion(ns string) string {
	GinkgoHelper()
	l := &coordinationv1.Lease{}
	err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: workflowfence.Name}, l)
	if apierrors.IsNotFound(err) {
		return ""
	}
	Expect(err).NotTo(HaveOccurred())
	return l.ResourceVersion
}

// resourceVersionNewer compares two etcd resourceVersions (decimal revisions).
func resourceVersionNewer(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}
