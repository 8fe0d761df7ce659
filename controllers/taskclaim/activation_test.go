package taskclaim_test

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
)

// hookedGitea is the real Gitea client with hooks around publication, so a test can act at
// the exact moment between winning the lock and publishing (or just after publishing).
type hookedGitea struct {
	taskclaim.Gitea
	beforePublish func()
	afterPublish  func(giteaclaim.Published, error) (giteaclaim.Published, error)
}

func (h *hookedGitea) Publish(ctx context.Context, t claim.Target, rec claim.Record, opts ...giteaclaim.PublishOption) (giteaclaim.Published, error) {
	if h.beforePublish != nil {
		h.beforePublish()
	}
	p, err := h.Gitea.Publish(ctx, t, rec, opts...)
	if h.afterPublish != nil {
		return h.afterPublish(p, err)
	}
	return p, err
}

// directReconciler is a TaskClaim reconciler driven by hand for claims in nsDirect (the
// manager does not see that namespace).
func directReconciler(g taskclaim.Gitea, c client.Client, clk clock.PassiveClock) *taskclaim.Reconciler {
	return &taskclaim.Reconciler{
		Client: c, APIReader: k8s, Gitea: g, Verdicts: authz.Reviewer{Client: k8s},
		Fence:      workflowfence.Fence{Client: c, Reader: k8s, Clock: clock.RealClock{}},
		Repository: repo, TTL: claimTTL, ActiveRecheck: activeRecheck, Clock: clk, Recorder: recorder,
	}
}

func reconcileOnce(r *taskclaim.Reconciler, tc *fleetv1alpha1.TaskClaim) (ctrl.Result, error) {
	return r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc)})
}

// validateDirect creates w's claim on t in nsDirect, validates it by hand and presents the pin.
func validateDirect(r *taskclaim.Reconciler, w *worker, t fleetv1alpha1.TaskTarget) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	tc := w.claim(t)
	_, err := reconcileOnce(r, tc)
	Expect(err).NotTo(HaveOccurred())
	Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseValidated), describe(fetch(tc)))
	w.pin(tc)
	return tc
}

// failingReads is the real Gitea client whose target reads fail: Gitea unreachable.
type failingReads struct{ taskclaim.Gitea }

func (failingReads) ReadTarget(context.Context, claim.Target) (claim.TargetState, error) {
	return claim.TargetState{}, fmt.Errorf("connection refused")
}

var _ = Describe("Activation requires the authoritative Gitea claim", Ordered, func() {
	var w *worker
	BeforeAll(func() { w = newWorker(nsDirect) })

	expectReservationOnly := func(tc *fleetv1alpha1.TaskClaim, t fleetv1alpha1.TaskTarget) {
		GinkgoHelper()
		Expect(holderOf(lease(nsDirect, t))).To(Equal(string(tc.UID)), "the claim holds the lock now")
		Expect(fetch(tc).Status.Capability).To(BeNil())
		Expect(authorize(nsDirect, w.name, t, claim.OpPushBranch).Reason).To(Equal(claim.ReasonNoCapability),
			"a lock alone is only a reservation")
	}
	expectUnwound := func(tc *fleetv1alpha1.TaskClaim, t fleetv1alpha1.TaskTarget, want refusal) {
		GinkgoHelper()
		got := fetch(tc)
		Expect(got.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseRejected), describe(got))
		checkRefusal(got, want)
		l := lease(nsDirect, t)
		Expect(l).NotTo(BeNil(), "the lock was taken")
		Expect(holderOf(l)).To(BeEmpty(), "and released again")
		if rec := readRecord(t); rec != nil && rec.ClaimID == string(tc.UID) {
			Expect(rec.State).NotTo(Equal(claim.RecordStateActive), "no record of the refused claim stays in force")
		}
		Expect(eventsOf(transitionsOf(got))).NotTo(ContainElement("claimed"))
		expectNeutral(w, t)
	}

	It("refuses activation when publication fails while only the lock is held", func() {
		t := issueTarget(newIssue("publication refused"))
		var tc *fleetv1alpha1.TaskClaim
		hooked := false
		h := &hookedGitea{Gitea: gc, beforePublish: func() {
			expectReservationOnly(tc, t)
			// Someone edits the issue in Gitea between the claim's read and its publication.
			Expect(srv.EditBody(ctx, repo, t.Number, "Edited meanwhile.")).To(Succeed())
			hooked = true
		}}
		r := directReconciler(h, k8s, clock.RealClock{})
		tc = validateDirect(r, w, t)
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		Expect(hooked).To(BeTrue())
		// The guarded write carries the content_version the claim read: Gitea refuses it
		// before it edits anything, so neither a record nor an assignment lands.
		expectUnwound(tc, t, refusal{"contention", "foreign_claimed", "content_version_conflict"})
		Expect(readRecord(t)).To(BeNil(), "nothing was published")
		Expect(assigneesOf(t)).To(BeEmpty(), "nothing was assigned")
		Expect(commentCount(t)).To(BeZero(), "a refusal before publication posts nothing in Gitea")
	})

	It("keeps the lock a claim won while its re-read failed, and completes the claim after a restart", func() {
		t := issueTarget(newIssue("re-read fails after the lock"))
		tc := validateDirect(directReconciler(gc, k8s, clock.RealClock{}), w, t)

		By("the claim step takes the lock while Gitea cannot be read: the reconcile fails")
		_, err := reconcileOnce(directReconciler(failingReads{gc}, k8s, clock.RealClock{}), tc)
		Expect(err).To(MatchError(ContainSubstring("connection refused")))
		got := fetch(tc)
		Expect(got.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseValidated), "nothing was decided: %s", describe(got))
		Expect(got.Finalizers).To(ContainElement(fleetv1alpha1.ClaimFinalizer), "the lock is this claim's, so the finalizer is on")
		expectReservationOnly(tc, t)
		Expect(readRecord(t)).To(BeNil(), "nothing was published")

		By("a new manager (a fresh reconciler) finds the lock this claim's and goes on")
		r := directReconciler(gc, k8s, clock.RealClock{})
		_, err = reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		got = fetch(tc)
		Expect(got.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive), describe(got))
		Expect(readRecord(t).ClaimID).To(Equal(string(tc.UID)))
		Expect(eventsOf(transitionsOf(got))).To(Equal([]string{"claimed"}))

		w.release(got)
		_, err = reconcileOnce(r, got)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseReleased), describe(fetch(tc)))
		expectNeutral(w, t)
	})

	It("assigns the worker in the guarded write itself, over the assignees the claim read", func() {
		t := issueTarget(newIssue("assigned meanwhile"))
		var tc *fleetv1alpha1.TaskClaim
		h := &hookedGitea{Gitea: gc, beforePublish: func() {
			expectReservationOnly(tc, t)
			// An assignment carries no version Gitea could guard, so one made between the
			// claim's read and its write is not seen by the write.
			Expect(srv.Assign(ctx, repo, t.Number, human.login)).To(Succeed())
		}}
		r := directReconciler(h, k8s, clock.RealClock{})
		tc = validateDirect(r, w, t)
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		got := fetch(tc)
		Expect(got.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive), describe(got))
		// The write sets the assignee list the claim read (nobody) plus the worker's
		// identity, in the same request as the record: exactly one assignee, the holder.
		assigned := assigneesOf(t)
		Expect(assigned).To(HaveLen(1))
		Expect(strings.EqualFold(assigned[0], w.identity)).To(BeTrue(), "assigned to %v, not %s", assigned, w.identity)
		rec := readRecord(t)
		Expect(rec).NotTo(BeNil())
		Expect(rec.ClaimID).To(Equal(string(tc.UID)))
		Expect(rec.State).To(Equal(claim.RecordStateActive))
		Expect(eventsOf(transitionsOf(got))).To(Equal([]string{"claimed"}))

		// The write that ends the record removes the assignment, so the worker holds
		// nothing afterwards.
		w.release(got)
		_, err = reconcileOnce(r, got)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseReleased), describe(fetch(tc)))
		Expect(assigneesOf(t)).To(BeEmpty())
		Expect(eventsOf(transitionsOf(got))).To(Equal([]string{"claimed", "released"}))
	})

	It("leaves no record in force when the publication could not be verified", func() {
		t := issueTarget(newIssue("publication unverified"))
		h := &hookedGitea{Gitea: gc, afterPublish: func(p giteaclaim.Published, err error) (giteaclaim.Published, error) {
			Expect(err).NotTo(HaveOccurred(), "the real write succeeds")
			// The answer is lost on the way back: the write may or may not have landed.
			return giteaclaim.Published{}, fmt.Errorf("simulated lost answer: %w", giteaclaim.ErrUnverified)
		}}
		r := directReconciler(h, k8s, clock.RealClock{})
		tc := validateDirect(r, w, t)
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		expectUnwound(tc, t, refusal{"stale_state", "stale", "claim_not_published"})
		rec := readRecord(t)
		Expect(rec).NotTo(BeNil())
		Expect(rec.ClaimID).To(Equal(string(tc.UID)))
		Expect(rec.State).To(Equal(claim.RecordStateRevoked), "the landed record is ended, not left in force for an hour")
		Expect(eventsOf(transitionsOf(tc))).To(Equal([]string{"rejected"}), "a record that reached Gitea gets one comment about its end")
	})

	It("refuses activation when the read-back does not show the claim in force", func() {
		t := issueTarget(newIssue("record withdrawn before read-back"))
		var tc *fleetv1alpha1.TaskClaim
		h := &hookedGitea{Gitea: gc, afterPublish: func(p giteaclaim.Published, err error) (giteaclaim.Published, error) {
			Expect(err).NotTo(HaveOccurred())
			expectReservationOnly(tc, t)
			// The record is withdrawn as the write lands: Gitea's answer to the guarded
			// write (the read-back) shows it ended. Gitea's answer to the withdrawal is
			// that state, as stored.
			cleared, cerr := gc.Clear(ctx, apiconv.Target(t), string(tc.UID), claim.RecordStateRevoked)
			Expect(cerr).NotTo(HaveOccurred())
			return cleared, err
		}}
		r := directReconciler(h, k8s, clock.RealClock{})
		tc = validateDirect(r, w, t)
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		expectUnwound(tc, t, refusal{"stale_state", "stale", "claim_record_inactive"})
	})

	It("cleans up the lock and the record when the worker releases while the claim is being activated", func() {
		t := issueTarget(newIssue("released during activation"))
		fired := false
		ic := interceptor.NewClient(k8s, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if cur, ok := obj.(*fleetv1alpha1.TaskClaim); ok && cur.Status.Phase == fleetv1alpha1.ClaimPhaseActive && !fired {
					fired = true
					// The worker gives the task back at this very moment: the status write loses.
					Expect(updateSpec(w.c, cur, func(x *fleetv1alpha1.TaskClaim) { x.Spec.Release = true })).To(Succeed())
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		})
		r := directReconciler(gc, ic, clock.RealClock{})
		tc := validateDirect(r, w, t)
		_, err := reconcileOnce(r, tc)
		Expect(err).To(HaveOccurred(), "the activation's status write conflicts with the release")
		Expect(fired).To(BeTrue())
		Expect(readRecord(t).State).To(Equal(claim.RecordStateActive), "the record had been published")
		Expect(fetch(tc).Status.Capability).To(BeNil(), "but no capability became visible")

		_, err = reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		got := fetch(tc)
		Expect(got.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseReleased))
		Expect(got.Status.Capability).To(BeNil())
		expectReadiness(got, "True", "", fleetv1alpha1.ClaimPhaseReleased)
		Expect(readRecord(t).State).To(Equal(claim.RecordStateReleased), "the published record is ended")
		Expect(holderOf(lease(nsDirect, t))).To(BeEmpty(), "the lock is freed")
		Expect(lease(nsDirect, t).OwnerReferences).To(BeEmpty(), "and owned by nobody")
		// The record was published and proven, so it was audited as claimed when it
		// landed (the capability never became visible); the trail then shows how that
		// record ended, and the retry posted no second claimed comment.
		Expect(eventsOf(transitionsOf(got))).To(Equal([]string{"claimed", "released"}))
		expectNeutral(w, t)
	})
})
