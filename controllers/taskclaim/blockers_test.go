package taskclaim_test

import (
	"time"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// setRegistrationStatus changes a registration's status as the administrator.
func setRegistrationStatus(w *worker, mutate func(*fleetv1alpha1.WorkerRegistration)) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wr := &fleetv1alpha1.WorkerRegistration{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name}, wr); err != nil {
			return err
		}
		mutate(wr)
		return k8s.Status().Update(ctx, wr)
	})).To(Succeed())
}

// retire retires the worker's registration (as an operator would) and waits until the
// registration controller classifies it as historical.
func retire(w *worker) {
	GinkgoHelper()
	setRegistrationStatus(w, func(wr *fleetv1alpha1.WorkerRegistration) {
		wr.Status.Phase = fleetv1alpha1.PhaseRetired
		wr.Status.RetiredAt = ptr.To(metav1.Now())
		wr.Status.RetiredBy = w.ns + "/test-retirement"
	})
	Eventually(func(g Gomega) {
		wr := &fleetv1alpha1.WorkerRegistration{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name}, wr)).To(Succeed())
		g.Expect(wr.Status.OwnershipState).To(Equal("historical"))
	}).Should(Succeed())
}

var _ = Describe("Fail-closed refusals", Ordered, func() {
	var w, holder *worker
	targetBlockers := map[string]string{} // blocker -> predicate seen
	classes := map[string]string{}        // class -> predicate seen
	note := func(r refusal) {
		if r.blocker != "" {
			targetBlockers[r.blocker] = r.predicate
		}
		classes[r.class] = r.predicate
	}
	BeforeAll(func() {
		w = newWorker(nsMain)
		holder = newWorker(nsMain)
	})

	Context("each target blocker is distinct and typed", func() {
		It("foreign_claimed: another worker holds the target", func() {
			t := issueTarget(newIssue("held by another worker"))
			holder.activate(t)
			want := refusal{"contention", "foreign_claimed", "claim_record_foreign"}
			expectRefused(w.claim(t), want)
			note(want)
			Expect(holderOf(lease(nsMain, t))).NotTo(BeEmpty(), "the holder keeps its lock")
		})

		It("foreign_claimed: the target's lock is held by another claim", func() {
			t := issueTarget(newIssue("lock held elsewhere"))
			now := metav1.NewMicroTime(time.Now())
			Expect(k8s.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: lockName(t), Namespace: nsMain},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("some-other-claim"), LeaseDurationSeconds: ptr.To(int32(3600)),
					AcquireTime: &now, RenewTime: &now},
			})).To(Succeed())
			expectRefused(w.claim(t), refusal{"contention", "foreign_claimed", "lease_held_foreign"})
		})

		It("foreign_claimed: the target is assigned to someone else", func() {
			n := newIssue("assigned to a human")
			Expect(srv.Assign(ctx, repo, n, human.login)).To(Succeed())
			expectRefused(w.claim(issueTarget(n)), refusal{"contention", "foreign_claimed", "assignee_foreign"})
		})

		It("dependency_gated: an open Gitea dependency gates the target", func() {
			dep := newIssue("unfinished prerequisite")
			n := newIssue("depends on the prerequisite")
			Expect(srv.AddDependency(ctx, repo, n, repo, dep)).To(Succeed())
			want := refusal{"eligibility", "dependency_gated", "dependency_open"}
			expectRefused(w.claim(issueTarget(n)), want)
			note(want)

			By("a closed dependency no longer gates")
			Expect(srv.SetState(ctx, repo, dep, gitea.StateClosed)).To(Succeed())
			v := waitPhase(w.claim(issueTarget(n)), fleetv1alpha1.ClaimPhaseValidated).Status.Validation
			Expect(v.DependencyStates).To(Equal([]string{repo + "#" + itoa(dep) + "=closed"}))
		})

		It("terminal: the target is closed", func() {
			n := newIssue("already done")
			Expect(srv.SetState(ctx, repo, n, gitea.StateClosed)).To(Succeed())
			want := refusal{"eligibility", "terminal", "target_terminal"}
			tc := expectRefused(w.claim(issueTarget(n)), want)
			note(want)
			By("telling the worker through an Event, and leaving Gitea untouched")
			Eventually(func() []string { return eventReasons(tc) }).Should(ContainElement(fleetv1alpha1.ReasonRejected))
			Expect(commentCount(issueTarget(n))).To(BeZero())
		})

		It("ineligible: the target is labelled blocked", func() {
			n := newIssue("blocked by a human")
			Expect(srv.AddLabel(ctx, repo, n, blockedID)).To(Succeed())
			want := refusal{"eligibility", "ineligible", "target_blocked"}
			expectRefused(w.claim(issueTarget(n)), want)
			note(want)
		})

		It("ineligible: the worker's identity authored the pull request", func() {
			pr := newPull(w.user(), "own work")
			want := refusal{"authority", "ineligible", "author_independence"}
			expectRefused(w.claim(pullTarget(pr)), want)
			note(want)
		})

		It("stale: the requested head is not the pull request's head", func() {
			pr := newPull(human, "moved on")
			t := pullTarget(pr)
			t.HeadSHA = "1111111111111111111111111111111111111111"
			want := refusal{"stale_state", "stale", "head_sha_mismatch"}
			expectRefused(w.claim(t), want)
			note(want)
		})

		It("ineligible, not stale: the requested item does not exist or is of the other kind", func() {
			expectRefused(w.claim(issueTarget(999999)), refusal{"eligibility", "ineligible", "target_not_found"})
			pr := newPull(human, "named as an issue")
			expectRefused(w.claim(issueTarget(pr.Number)), refusal{"eligibility", "ineligible", "target_kind_mismatch"})
		})

		It("gives the five target blockers five distinct types", func() {
			Expect(targetBlockers).To(HaveLen(5), "blockers seen: %v", targetBlockers)
			for _, b := range claim.Blockers() {
				Expect(targetBlockers).To(HaveKey(string(b)))
			}
		})
	})

	Context("each failure class", func() {
		It("policy: a target in another repository than the controller serves", func() {
			n, err := srv.CreateIssue(ctx, ownerToken, otherRepo, "elsewhere", "Body.")
			Expect(err).NotTo(HaveOccurred())
			t := fleetv1alpha1.TaskTarget{Repository: otherRepo, Kind: fleetv1alpha1.TargetKindIssue, Number: n}
			want := refusal{"policy", "", "worker_repository_mismatch"}
			expectRefused(w.claim(t), want)
			note(want)

			By("also for a worker bound to that other repository")
			there := newWorker(nsMain, boundTo(otherRepo))
			expectRefused(there.claim(t), refusal{"policy", "", "controller_repository_mismatch"})
			By("leaving the other repository untouched (no record, no audit comment)")
			rec, _, err := gc.Read(ctx, apiconv.Target(t))
			Expect(err).NotTo(HaveOccurred())
			Expect(rec).To(BeNil())
			trs, err := gc.ListTransitions(ctx, apiconv.Target(t))
			Expect(err).NotTo(HaveOccurred())
			Expect(trs).To(BeEmpty())
		})

		It("authority: a worker with no registration", func() {
			t := issueTarget(newIssue("claimed by a ghost"))
			want := refusal{"authority", "", "worker_not_registered"}
			tc := expectRefused(newClaim(k8s, nsMain, "ghost-"+suffix, t), want)
			note(want)
			Consistently(func() []string { return rejectedReasons(tc) }, time.Second).Should(BeEmpty(),
				"an unknown worker has no identity to put on the target")
		})

		It("authority: a worker whose ServiceAccount is not bound (capability verdict denied)", func() {
			u := newWorker(nsMain, unbound())
			t := issueTarget(newIssue("unbound worker"))
			expectRefused(newClaim(k8s, nsMain, u.name, t), refusal{"authority", "", "capability_denied"})
		})

		It("authority: a retired or stale worker", func() {
			r := newWorker(nsMain)
			retire(r)
			expectRefused(newClaim(k8s, nsMain, r.name, issueTarget(newIssue("retired worker"))),
				refusal{"authority", "", "worker_retired"})

			s := newWorker(nsMain)
			setRegistrationStatus(s, func(wr *fleetv1alpha1.WorkerRegistration) {
				wr.Status.LastHeartbeatAt = ptr.To(metav1.NewTime(time.Now().Add(-2 * time.Hour)))
			})
			Eventually(func(g Gomega) {
				wr := &fleetv1alpha1.WorkerRegistration{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: nsMain, Name: s.name}, wr)).To(Succeed())
				g.Expect(wr.Status.OwnershipState).To(Equal("stale"))
			}).Should(Succeed())
			expectRefused(s.claim(issueTarget(newIssue("stale worker"))), refusal{"authority", "", "worker_not_live"})
		})

		It("covers all five classes", func() {
			Expect(classes).To(HaveLen(5), "classes seen: %v", classes)
			for _, c := range claim.Classes() {
				Expect(classes).To(HaveKey(string(c)))
			}
		})
	})
})
