package taskclaim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// proxiedGitea is a Gitea client of the controller's identity that reaches the real Gitea
// through a proxy the test can stop and count.
func proxiedGitea() (*testgitea.Proxy, *giteaclaim.Client) {
	GinkgoHelper()
	p, err := srv.NewProxy()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(p.Stop)
	c, err := giteaclaim.New(p.URL, srv.Token, giteaclaim.WithHTTPClient(testgitea.NewHTTPClient()))
	Expect(err).NotTo(HaveOccurred())
	return p, c
}

func gone(tc *fleetv1alpha1.TaskClaim) bool {
	return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(tc), &fleetv1alpha1.TaskClaim{}))
}

var _ = Describe("No orphans: a claim's record and lock never outlive it", Ordered, func() {
	var (
		w     *worker
		proxy *testgitea.Proxy
		r     *taskclaim.Reconciler
	)
	BeforeAll(func() {
		w = newWorker(nsDirect)
		var pgc *giteaclaim.Client
		proxy, pgc = proxiedGitea()
		r = directReconciler(pgc, k8s, clock.RealClock{})
	})

	It("keeps the finalizer, and shows RecordCleared=False, while Gitea is down; clears the record once it is back", func() {
		t := issueTarget(newIssue("released while Gitea is down"))
		tc := validateDirect(r, w, t)
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive), describe(fetch(tc)))
		Expect(assigneesOf(t)).To(Equal([]string{w.identity}), "a won claim shows who holds the issue")

		By("stopping Gitea, then releasing")
		Expect(proxy.Stop()).To(Succeed())
		w.release(tc)
		_, err = reconcileOnce(r, tc)
		Expect(err).To(HaveOccurred(), "the clear fails and is retried")
		got := fetch(tc)
		Expect(got.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseReleased))
		Expect(got.Status.Capability).To(BeNil(), "the capability is gone at once, Gitea or not")
		Expect(authorize(nsDirect, w.name, t, claim.OpPushBranch).Allowed).To(BeFalse())
		cond := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.RecordClearedCondition)
		Expect(cond).NotTo(BeNil())
		Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		Expect(cond.Reason).To(Equal(fleetv1alpha1.ReasonGiteaUnavailable))
		Expect(cond.Message).To(ContainSubstring("connection refused"), "the condition carries the error")
		Expect(got.Finalizers).To(ContainElement(fleetv1alpha1.ClaimFinalizer), "a final phase does not drop the finalizer before the clear")
		Expect(readRecord(t).State).To(Equal(claim.RecordStateActive), "Gitea still holds the record")
		Expect(holderOf(lease(nsDirect, t))).To(Equal(string(tc.UID)), "the lock stays until the record is cleared")

		By("deleting the claim while Gitea is still down: the finalizer holds it")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		_, err = reconcileOnce(r, tc)
		Expect(err).To(HaveOccurred())
		Expect(fetch(tc).Finalizers).To(ContainElement(fleetv1alpha1.ClaimFinalizer))

		By("starting Gitea again")
		Expect(proxy.Start()).To(Succeed())
		Eventually(func() error { _, err := reconcileOnce(r, tc); return err }).Should(Succeed())
		Eventually(func() bool { return gone(tc) }).Should(BeTrue(), "the finalizer goes once the record is cleared")
		Expect(readRecord(t).State).To(Equal(claim.RecordStateReleased))
		Expect(holderOf(lease(nsDirect, t))).To(BeEmpty())
		Expect(assigneesOf(t)).To(BeEmpty(), "the assignment is removed with the record")
		Expect(eventsOf(transitionsOf(tc))).To(Equal([]string{"claimed", "released"}))
		Expect(commentCount(t)).To(Equal(2), "one comment per transition, none for the failed attempts")
	})

	It("sweeps the record and the lock of a claim deleted without its finalizer", func() {
		t := issueTarget(newIssue("force-deleted claim"))
		tc := validateDirect(r, w, t)
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive))
		l := lease(nsDirect, t)
		Expect(l.OwnerReferences).To(ContainElement(HaveField("UID", tc.UID)), "a held lock is owned by its claim")

		By("force-deleting the claim: its finalizer is removed by hand")
		Expect(k8s.Delete(ctx, tc)).To(Succeed())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &fleetv1alpha1.TaskClaim{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur); err != nil {
				return err
			}
			cur.Finalizers = nil
			return k8s.Update(ctx, cur)
		})).To(Succeed())
		Eventually(func() bool { return gone(tc) }).Should(BeTrue())
		Expect(readRecord(t).State).To(Equal(claim.RecordStateActive), "left behind in Gitea")
		Expect(holderOf(lease(nsDirect, t))).To(Equal(string(tc.UID)), "left behind on the lock")

		By("sweeping")
		sw := &taskclaim.Sweeper{Reader: k8s, Client: k8s, Gitea: gc, Repository: repo, TTL: claimTTL, Clock: clock.RealClock{}}
		res, err := sw.Sweep(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Records).To(ContainElement(apiconv.Target(t)))
		Expect(res.Locks).To(ContainElement(nsDirect + "/" + lockName(t)))
		rec := readRecord(t)
		Expect(rec.ClaimID).To(Equal(string(tc.UID)))
		Expect(rec.State).To(Equal(claim.RecordStateRevoked))
		Expect(assigneesOf(t)).To(BeEmpty(), "the write that ends the orphaned record removes its assignment")
		trs := transitionsOf(tc)
		Expect(eventsOf(trs)).To(Equal([]string{"claimed", "revoked/ownership_loss"}))
		Expect(trs[1].Reason).To(Equal("claim_deleted"))
		Expect(lease(nsDirect, t)).To(BeNil(), "the lock of a claim that is gone is removed")
		evidence("sweep ended %d record(s) and %d lock(s)", len(res.Records), len(res.Locks))

		By("sweeping again: nothing more to end, no second comment")
		res, err = sw.Sweep(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Records).NotTo(ContainElement(apiconv.Target(t)))
		Expect(commentCount(t)).To(Equal(2))

		By("claiming the target afresh")
		next := validateDirect(r, w, t)
		_, err = reconcileOnce(r, next)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(next).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive), describe(fetch(next)))
		w.release(next)
		_, err = reconcileOnce(r, next)
		Expect(err).NotTo(HaveOccurred())
	})

	It("keeps a sweep from touching the lock or the record of a claim that exists", func() {
		t := issueTarget(newIssue("claim that stays"))
		tc := validateDirect(r, w, t)
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		sw := &taskclaim.Sweeper{Reader: k8s, Client: k8s, Gitea: gc, Repository: repo, TTL: claimTTL, Clock: clock.RealClock{}}
		res, err := sw.Sweep(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Records).NotTo(ContainElement(apiconv.Target(t)))
		Expect(res.Locks).NotTo(ContainElement(nsDirect + "/" + lockName(t)))
		Expect(readRecord(t).State).To(Equal(claim.RecordStateActive))
		Expect(holderOf(lease(nsDirect, t))).To(Equal(string(tc.UID)))
		w.release(tc)
		_, err = reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		Expect(lease(nsDirect, t)).NotTo(BeNil(), "a freed lock stays until it was idle for a claim lifetime")
		res, err = sw.Sweep(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Locks).NotTo(ContainElement(nsDirect+"/"+lockName(t)), "a recently freed lock is kept: its generation is what pins name")
	})
})

var _ = Describe("An audit trail without spam", Ordered, func() {
	var w *worker
	BeforeAll(func() { w = newWorker(nsDirect) })

	It("posts exactly one claimed comment when the activation is retried", func() {
		t := issueTarget(newIssue("activation retried"))
		failed := false
		ic := interceptor.NewClient(k8s, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if cur, ok := obj.(*fleetv1alpha1.TaskClaim); ok && cur.Status.Phase == fleetv1alpha1.ClaimPhaseActive && !failed {
					failed = true
					return errors.New("simulated failure of the activation's status write")
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		})
		r := directReconciler(gc, ic, clock.RealClock{})
		tc := validateDirect(r, w, t)
		_, err := reconcileOnce(r, tc)
		Expect(err).To(HaveOccurred())
		Expect(failed).To(BeTrue())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseValidated))
		Expect(eventsOf(transitionsOf(tc))).To(Equal([]string{"claimed"}), "the record is published: that is the claim")

		_, err = reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive), describe(fetch(tc)))
		Expect(eventsOf(transitionsOf(tc))).To(Equal([]string{"claimed"}), "the retry posts no second claimed comment")
		Expect(commentCount(t)).To(Equal(1))

		w.release(tc)
		_, err = reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		_, err = reconcileOnce(r, tc) // a further reconcile of the final claim posts nothing
		Expect(err).NotTo(HaveOccurred())
		Expect(eventsOf(transitionsOf(tc))).To(Equal([]string{"claimed", "released"}))
		Expect(commentCount(t)).To(Equal(2))
		for _, tr := range transitionsOf(tc) {
			Expect(tr.Author).To(Equal(srv.AdminLogin))
		}
		body := commentBodies(t)
		Expect(strings.Join(body, "\n")).NotTo(ContainSubstring("@"+w.identity), "the trail @-mentions nobody")
	})

	It("leaves Gitea untouched by refusals before publication, at validation and at claim time", func() {
		t := issueTarget(newIssue("refused twice"))
		r := directReconciler(gc, k8s, clock.RealClock{})
		tc := validateDirect(r, w, t)
		moveMain()
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		checkRefusal(fetch(tc), refusal{"stale_state", "stale", "parity_revision_moved"})
		Expect(srv.AddLabel(ctx, repo, t.Number, blockedID)).To(Succeed())
		refused := w.claim(t)
		_, err = reconcileOnce(r, refused)
		Expect(err).NotTo(HaveOccurred())
		checkRefusal(fetch(refused), refusal{"eligibility", "ineligible", "target_blocked"})
		Expect(commentCount(t)).To(BeZero(), "no comment, no @-mention for refusals")
		Expect(eventReasons(tc)).To(ContainElement(fleetv1alpha1.ReasonRejected))
		Expect(eventReasons(refused)).To(ContainElement(fleetv1alpha1.ReasonRejected))
	})
})

var _ = Describe("Clause (d) fires: a substitution is refused under its own predicate", func() {
	It("refuses a claim whose target is not the validated one as target_substituted", func() {
		w := newWorker(nsDirect)
		r := directReconciler(gc, k8s, clock.RealClock{})
		a := w.claim(issueTarget(newIssue("validated target")))
		b := w.claim(issueTarget(newIssue("substituted target")))
		for _, tc := range []*fleetv1alpha1.TaskClaim{a, b} {
			_, err := reconcileOnce(r, tc)
			Expect(err).NotTo(HaveOccurred())
		}
		va := fetch(a).Status.Validation
		Expect(va.Target).NotTo(BeNil())
		Expect(*va.Target).To(Equal(a.Spec.Target), "status.validation records the validated target")

		By("giving b the validation and pin issued for a: b asks for another target than the validated one")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := fetch(b)
			cur.Status.Validation = va.DeepCopy()
			return k8s.Status().Update(ctx, cur)
		})).To(Succeed())
		Expect(updateSpec(w.c, b, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Pin = va.Pin })).To(Succeed())
		_, err := reconcileOnce(r, b)
		Expect(err).NotTo(HaveOccurred())
		got := fetch(b)
		checkRefusal(got, refusal{"stale_state", "stale", "target_substituted"})
		Expect(holderOf(lease(nsDirect, b.Spec.Target))).To(BeEmpty(), "nothing was taken")
		Expect(readRecord(b.Spec.Target)).To(BeNil())
		Expect(readRecord(a.Spec.Target)).To(BeNil())
	})
})

var _ = Describe("Ownership people can see", func() {
	It("assigns the worker while it holds the issue, and compares identities without regard to case", func() {
		w := newWorker(nsMain, upperCaseIdentity())
		n := newIssue("assigned to the worker beforehand")
		Expect(srv.Assign(ctx, repo, n, w.name)).To(Succeed()) // Gitea's own spelling: lower case
		t := issueTarget(n)
		tc := w.activate(t)
		Expect(tc.Status.Capability.Identity).To(Equal(strings.ToUpper(w.name)))
		Expect(assigneesOf(t)).To(Equal([]string{w.name}), "its own assignment is not foreign")
		w.release(tc)
		got := waitPhase(tc, fleetv1alpha1.ClaimPhaseReleased)
		Expect(got.Status.Result.Outcome).To(Equal(string(claim.OutcomeReleased)))
		Expect(assigneesOf(t)).To(BeEmpty())
	})

	It("refuses a claim whose target was assigned to someone else after validation as assignee_foreign", func() {
		w := newWorker(nsDirect)
		t := issueTarget(newIssue("assigned before the claim"))
		r := directReconciler(gc, k8s, clock.RealClock{})
		tc := validateDirect(r, w, t)
		// The claim's own read sees the assignment (in another spelling of the login), so
		// the decision refuses it before anything is written; an assignment made after
		// that read is replaced by the guarded write instead (see the activation specs).
		Expect(srv.Assign(ctx, repo, t.Number, strings.ToUpper(human.login))).To(Succeed())
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		checkRefusal(fetch(tc), refusal{"contention", "foreign_claimed", "assignee_foreign"})
		Expect(assigneesOf(t)).To(Equal([]string{human.login}), "someone else's assignment is left alone")
		Expect(readRecord(t)).To(BeNil(), "nothing was published")
	})
})

var _ = Describe("Events that matter", func() {
	It("makes no Gitea request for a storm of heartbeats, and still sees what matters", func() {
		ns := "storm-" + suffix
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		proxy, pgc := proxiedGitea()

		By("running a second manager for the namespace, re-checking active claims only hourly")
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
			Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
			Controller: config.Controller{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: reconcilers},
			Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
				&fleetv1alpha1.TaskClaim{}: {Namespaces: map[string]cache.Config{ns: {}}},
				&coordinationv1.Lease{}:    {Namespaces: map[string]cache.Config{ns: {}}},
			}},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect((&taskclaim.Reconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Gitea: pgc, Verdicts: authz.Reviewer{Client: mgr.GetClient()},
			Fence:      workflowfence.Fence{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Clock: clock.RealClock{}},
			Repository: repo, TTL: claimTTL, ActiveRecheck: time.Hour, Clock: clock.RealClock{}, Recorder: mgr.GetEventRecorder("taskclaim-storm"),
		}).SetupWithManager(mgr)).To(Succeed())
		mctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mctx)).To(Succeed())
		}()

		const workers, beats = 4, 100
		ws := make([]*worker, workers)
		tcs := make([]*fleetv1alpha1.TaskClaim, workers)
		for i := range ws {
			ws[i] = newWorker(ns)
			tcs[i] = ws[i].activate(issueTarget(newIssue(fmt.Sprintf("storm %d", i))))
		}
		By("waiting until the claims are quiet")
		Eventually(func(g Gomega) {
			before := proxy.Requests()
			g.Consistently(proxy.Requests, 2*time.Second, 200*time.Millisecond).Should(Equal(before))
		}, time.Minute).Should(Succeed())
		proxy.Reset()

		By(fmt.Sprintf("renewing %d heartbeats across %d workers with active claims", beats, workers))
		base := time.Now().Truncate(time.Second).Add(-beats * time.Second)
		last := map[string]time.Time{}
		for i := range beats {
			w := ws[i%workers]
			at := base.Add(time.Duration(i) * time.Second)
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				wr := &fleetv1alpha1.WorkerRegistration{}
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: w.name}, wr); err != nil {
					return err
				}
				wr.Status.LastHeartbeatAt = ptr.To(metav1.NewTime(at))
				return w.c.Status().Update(ctx, wr)
			})).To(Succeed())
			last[w.name] = at
		}
		Eventually(func(g Gomega) {
			for _, w := range ws {
				wr := &fleetv1alpha1.WorkerRegistration{}
				g.Expect(mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: w.name}, wr)).To(Succeed())
				g.Expect(wr.Status.LastHeartbeatAt.Time).To(BeTemporally("==", last[w.name]))
			}
		}).Should(Succeed(), "the manager has seen every heartbeat")
		Consistently(proxy.Requests, 3*time.Second, 200*time.Millisecond).Should(BeZero(),
			"heartbeats alone cause no Gitea request")
		evidence("heartbeat storm: %d heartbeats across %d workers with active claims, %d Gitea requests", beats, workers, proxy.Requests())
		for _, tc := range tcs {
			Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive))
		}

		By("retiring one worker: a change that matters reaches its claim at once")
		retire(ws[0])
		waitPhase(tcs[0], fleetv1alpha1.ClaimPhaseRevoked)
		Expect(fetch(tcs[0]).Status.EndedReason).To(Equal(string(claim.TriggerOwnershipLoss)))
		Expect(proxy.Requests()).To(BeNumerically(">", 0), "the counter does see the controller's requests")

		By("taking a lock away: Lease changes are watched")
		l := &coordinationv1.Lease{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: tcs[1].Status.Capability.LeaseName}, l)).To(Succeed())
		l.Spec.HolderIdentity = ptr.To("thief")
		Expect(k8s.Update(ctx, l)).To(Succeed())
		got := waitPhase(tcs[1], fleetv1alpha1.ClaimPhaseRevoked)
		Expect(got.Status.EndedReason).To(Equal(string(claim.TriggerOwnershipLoss)))
	})
})
