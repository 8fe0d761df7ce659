package taskclaim_test

import (
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// ending is what a capability's end must look like.
type ending struct {
	phase  string
	reason claim.Trigger     // status.endedReason
	record claim.RecordState // final state of this claim's Gitea record ("" = the record is not ours any more)
	audit  string            // last audited transition, "event" or "event/trigger"
}

// Each spec has a worker of its own, so the specs are not Ordered: Ginkgo spreads them
// over its processes.
var _ = Describe("Lifecycle", func() {

	// expectEnded waits for the end of an active claim and checks everything an end means:
	// the phase and reason, no capability (the worker is neutral again), the Gitea record in
	// its final state, the lock freed, and the audited transition.
	expectEnded := func(name string, w *worker, tc *fleetv1alpha1.TaskClaim, want ending) {
		GinkgoHelper()
		got := waitPhase(tc, want.phase)
		Expect(got.Status.EndedReason).To(Equal(string(want.reason)))
		Expect(got.Status.Result.Outcome).To(Equal(strings.ToLower(want.phase)), "an ended claim's outcome is its ending, not acquired")
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.RecordClearedCondition)).To(BeTrue())
		Expect(assigneesOf(tc.Spec.Target)).NotTo(ContainElement(w.identity), "the end removes the worker's assignment")
		Expect(got.Status.EndedAt).NotTo(BeNil())
		Expect(got.Status.Capability).To(BeNil())
		Expect(meta.IsStatusConditionFalse(got.Status.Conditions, fleetv1alpha1.CapabilityActiveCondition)).To(BeTrue())
		switch want.phase {
		case fleetv1alpha1.ClaimPhaseReleased, fleetv1alpha1.ClaimPhaseCompleted:
			expectReadiness(got, "True", "", want.phase) // given back by its worker: done as asked
		default:
			expectReadiness(got, "False", "True", want.phase) // expired or revoked: final, not a success
		}
		expectNeutral(w, tc.Spec.Target)
		rec := readRecord(tc.Spec.Target)
		if want.record != "" {
			Expect(rec).NotTo(BeNil())
			Expect(rec.ClaimID).To(Equal(string(tc.UID)))
			Expect(rec.State).To(Equal(want.record))
		} else if rec != nil && rec.ClaimID == string(tc.UID) {
			Expect(rec.State).NotTo(Equal(claim.RecordStateActive))
		}
		l := lease(tc.Namespace, tc.Spec.Target)
		Expect(holderOf(l)).NotTo(Equal(string(tc.UID)), "the lock is not held any more")
		if l != nil && holderOf(l) == "" { // a lock taken by someone else is not the controller's to touch
			Expect(l.OwnerReferences).NotTo(ContainElement(HaveField("UID", tc.UID)),
				"a freed lock is no longer owned by the claim: it outlives it, so its generation never starts over")
		}
		Expect(eventsOf(transitionsOf(got))).To(Equal([]string{"claimed", want.audit}))
		evidence("lifecycle %-44s %s", name, want.phase+" endedReason="+got.Status.EndedReason+" audit="+want.audit)
	}

	It("expires the capability at cycle completion", func() {
		w := newWorker(nsMain)
		tc := w.activate(issueTarget(newIssue("cycle completes")))
		w.complete(tc)
		expectEnded("cycle completion", w, tc, ending{fleetv1alpha1.ClaimPhaseCompleted, claim.ExpiryCycleComplete, claim.RecordStateCompleted, "completed"})
	})

	It("releases the record and the lock when an active claim is deleted", func() {
		w := newWorker(nsMain)
		t := issueTarget(newIssue("claim deleted"))
		tc := w.activate(t)
		Expect(fetch(tc).Finalizers).To(ContainElement(fleetv1alpha1.ClaimFinalizer))
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(tc), &fleetv1alpha1.TaskClaim{}))
		}).Should(BeTrue(), "the finalizer is removed once the claim is released")
		rec := readRecord(t)
		Expect(rec).NotTo(BeNil())
		Expect(rec.ClaimID).To(Equal(string(tc.UID)))
		Expect(rec.State).To(Equal(claim.RecordStateReleased), "deleting the claim gives the task back in Gitea")
		Expect(holderOf(lease(tc.Namespace, t))).To(BeEmpty(), "the lock is freed")
		Expect(eventsOf(transitionsOf(tc))).To(Equal([]string{"claimed", "released"}))
		expectNeutral(w, t)
		evidence("lifecycle %-44s %s", "deleted while active", "object gone, record released, lock freed")
	})

	It("revokes on release and leaves the worker neutral, free to choose again", func() {
		w := newWorker(nsMain)
		t := issueTarget(newIssue("given back"))
		tc := w.activate(t)
		w.release(tc)
		expectEnded("release", w, tc, ending{fleetv1alpha1.ClaimPhaseReleased, claim.TriggerRelease, claim.RecordStateReleased, "released"})
		Eventually(func() []string { return eventReasons(tc) }).Should(ContainElements(fleetv1alpha1.ReasonAcquired, fleetv1alpha1.ClaimPhaseReleased),
			"each transition is also a Kubernetes Event")

		By("choosing a new task from the neutral state")
		next := w.activate(issueTarget(newIssue("chosen after the release")))
		Expect(next.Status.Capability.Role).To(Equal(string(claim.RoleAuthor)))
		Expect(authorize(nsMain, w.name, t, claim.OpPushBranch).Reason).To(Equal(claim.ReasonWrongTarget),
			"the released task stays out of reach")
		w.release(next)
		waitPhase(next, fleetv1alpha1.ClaimPhaseReleased)
	})

	It("expires the capability at expiresAt", func() {
		w := newWorker(nsDirect)
		t := issueTarget(newIssue("runs out of time"))
		fc := clocktesting.NewFakeClock(time.Now())
		r := directReconciler(gc, k8s, fc)
		tc := validateDirect(r, w, t)
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		got := fetch(tc)
		Expect(got.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive), describe(got))
		expires := got.Status.Capability.ExpiresAt.Time

		res, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive))
		Expect(res.RequeueAfter).To(BeNumerically(">", 0))
		Expect(res.RequeueAfter).To(BeNumerically("<=", activeRecheck), "an active claim is re-checked at least every recheck period")
		Expect(authorizeAt(nsDirect, w.name, t, claim.OpPushBranch, fc.Now()).Allowed).To(BeTrue())

		fc.SetTime(expires.Add(-time.Second))
		_, err = reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive), "one second before expiry")

		fc.SetTime(expires)
		ans := authorizeAt(nsDirect, w.name, t, claim.OpPushBranch, fc.Now())
		Expect(ans.Allowed).To(BeFalse())
		Expect(ans.Reason).To(Equal(claim.ReasonExpired), "the capability is dead at expiresAt even before the controller notices")
		_, err = reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		expectEnded("expiry at expiresAt", w, tc, ending{fleetv1alpha1.ClaimPhaseExpired, claim.ExpiryExpired, claim.RecordStateExpired, "expired"})
	})

	revoked := func(trigger claim.Trigger) ending {
		return ending{fleetv1alpha1.ClaimPhaseRevoked, trigger, claim.RecordStateRevoked, "revoked/" + string(trigger)}
	}

	It("revokes on block: the blocked label", func() {
		w := newWorker(nsMain)
		tc := w.activate(issueTarget(newIssue("gets blocked")))
		Expect(srv.AddLabel(ctx, repo, tc.Spec.Target.Number, blockedID)).To(Succeed())
		expectEnded("block: label", w, tc, revoked(claim.TriggerBlock))
	})

	It("revokes on block: a new open dependency", func() {
		w := newWorker(nsMain)
		tc := w.activate(issueTarget(newIssue("gets a dependency")))
		Expect(srv.AddDependency(ctx, repo, tc.Spec.Target.Number, repo, newIssue("new prerequisite"))).To(Succeed())
		expectEnded("block: dependency", w, tc, revoked(claim.TriggerBlock))
	})

	It("revokes on failed validation: the pull request was approved meanwhile", func() {
		w := newWorker(nsMain)
		pr := newPull(human, "approved under the reviewer")
		tc := w.activate(pullTarget(pr))
		Expect(tc.Status.Capability.Role).To(Equal(string(claim.RoleReviewer)))
		Expect(srv.Review(ctx, ownerToken, repo, pr.Number, gitea.ReviewStateApproved, "")).To(Succeed())
		expectEnded("failed validation: role moved", w, tc, revoked(claim.TriggerFailedValidation))
	})

	It("revokes on failed validation: the issue was closed", func() {
		w := newWorker(nsMain)
		tc := w.activate(issueTarget(newIssue("closed under the author")))
		Expect(srv.SetState(ctx, repo, tc.Spec.Target.Number, gitea.StateClosed)).To(Succeed())
		expectEnded("failed validation: closed", w, tc, revoked(claim.TriggerFailedValidation))
	})

	It("revokes on stale state: the pull request head moved", func() {
		w := newWorker(nsMain)
		pr := newPull(human, "head moves under the reviewer")
		tc := w.activate(pullTarget(pr))
		push(human, &pr)
		expectEnded("stale state: head moved", w, tc, revoked(claim.TriggerStaleState))
	})

	It("revokes on stale state: the base branch moved under a pull request", func() {
		w := newWorker(nsMain)
		pr := newPull(human, "base moves under the reviewer")
		tc := w.activate(pullTarget(pr))
		moveMain()
		expectEnded("stale state: base moved", w, tc, revoked(claim.TriggerStaleState))
	})

	It("revokes on ownership loss: the worker's registration was retired", func() {
		w := newWorker(nsMain)
		tc := w.activate(issueTarget(newIssue("worker retired")))
		retire(w)
		expectEnded("ownership loss: retired", w, tc, revoked(claim.TriggerOwnershipLoss))
	})

	It("revokes on ownership loss: the worker's heartbeat lapsed", func() {
		w := newWorker(nsMain)
		tc := w.activate(issueTarget(newIssue("worker goes quiet")))
		setRegistrationStatus(w, func(wr *fleetv1alpha1.WorkerRegistration) {
			wr.Status.LastHeartbeatAt = ptr.To(metav1.NewTime(time.Now().Add(-2 * time.Hour)))
		})
		expectEnded("ownership loss: heartbeat lapsed", w, tc, revoked(claim.TriggerOwnershipLoss))
	})

	It("revokes on ownership loss: the Gitea record was overwritten by another claim", func() {
		w := newWorker(nsMain)
		t := issueTarget(newIssue("record overwritten"))
		tc := w.activate(t)
		body, err := srv.Body(ctx, repo, t.Number)
		Expect(err).NotTo(HaveOccurred())
		now := time.Now().UTC()
		intruder := claim.Record{ClaimID: "intruder-claim", Worker: "intruder", Identity: human.login, Role: "author",
			Repository: repo, Kind: claim.KindIssue, Number: t.Number, Generation: "1", Pin: "sha256:intruder",
			State: claim.RecordStateActive, ClaimedAt: now, ExpiresAt: now.Add(time.Hour)}
		overwritten, err := giteaclaim.WithRecord(body, intruder)
		Expect(err).NotTo(HaveOccurred())
		Expect(srv.EditBody(ctx, repo, t.Number, overwritten)).To(Succeed())
		expectEnded("ownership loss: record overwritten", w, tc, ending{fleetv1alpha1.ClaimPhaseRevoked, claim.TriggerOwnershipLoss, "", "revoked/ownership_loss"})
		Expect(readRecord(t).ClaimID).To(Equal("intruder-claim"), "the controller does not clobber a record that is not its claim's")
	})

	It("revokes on ownership loss: the Gitea record became unreadable", func() {
		w := newWorker(nsMain)
		t := issueTarget(newIssue("record garbled"))
		tc := w.activate(t)
		body, err := srv.Body(ctx, repo, t.Number)
		Expect(err).NotTo(HaveOccurred())
		rest, err := giteaclaim.StripRecord(body)
		Expect(err).NotTo(HaveOccurred())
		Expect(srv.EditBody(ctx, repo, t.Number, rest+"\n<!-- fleet-claim:v1 {\"claimID\": -->\n")).To(Succeed())
		got := waitPhase(tc, fleetv1alpha1.ClaimPhaseRevoked)
		Expect(got.Status.EndedReason).To(Equal(string(claim.TriggerOwnershipLoss)))
		Expect(got.Status.Capability).To(BeNil())
		expectReadiness(got, "False", "True", fleetv1alpha1.ClaimPhaseRevoked)
		expectNeutral(w, t)
		Expect(holderOf(lease(nsMain, t))).To(BeEmpty())
		Expect(eventsOf(transitionsOf(got))).To(Equal([]string{"claimed", "revoked/ownership_loss"}))
		evidence("lifecycle %-44s %s", "ownership loss: record garbled", "Revoked endedReason="+got.Status.EndedReason+" audit=revoked/ownership_loss")
	})

	It("revokes on ownership loss: the lock was taken away", func() {
		w := newWorker(nsMain)
		t := issueTarget(newIssue("lock taken away"))
		tc := w.activate(t)
		l := &coordinationv1.Lease{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: nsMain, Name: tc.Status.Capability.LeaseName}, l)).To(Succeed())
		l.Spec.HolderIdentity = ptr.To("thief")
		Expect(k8s.Update(ctx, l)).To(Succeed())
		expectEnded("ownership loss: lock taken", w, tc, revoked(claim.TriggerOwnershipLoss))
		Expect(holderOf(lease(nsMain, t))).To(Equal("thief"), "the controller only frees a lock its claim holds")
	})

	It("revokes on ownership loss: the target was assigned to someone else", func() {
		w := newWorker(nsMain)
		tc := w.activate(issueTarget(newIssue("reassigned")))
		Expect(srv.Assign(ctx, repo, tc.Spec.Target.Number, human.login)).To(Succeed())
		expectEnded("ownership loss: reassigned", w, tc, revoked(claim.TriggerOwnershipLoss))
	})
})
