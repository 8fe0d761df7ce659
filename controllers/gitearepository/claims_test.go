package gitearepository_test

import (
	"fmt"
	"sync"
	"sync/atomic"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testfleet"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// Task claims in GiteaRepositories: the manager of this suite has no repository of its
// own (no --gitea-url, no --repository), so every claim is decided in the repository a
// GiteaRepository of the claim's namespace names, on that repository's server, under a
// lock keyed by (server, repository ID, kind, number).

// served is a Gitea repository with an open issue #1, and the Ready GiteaRepository that
// names it in a namespace.
type served struct {
	obj  *fleetv1alpha1.GiteaRepository
	full string
	id   int64
}

// serve creates a protected Gitea repository with issue #1 and a GiteaRepository for it
// on server in ns, and waits until it is Ready with the rule set in force.
func serve(ns, server string) served {
	GinkgoHelper()
	full, id := giteaRepo(true)
	Expect(testfleet.NewIssue(ctx, forgeSrv, forgeSrv.Token, full, "the first task")).To(Equal(int64(1)))
	r := newRepository(ns, server, full)
	Eventually(readyOf(r)).Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))
	Expect(getRepo(r).Status.RuleSetDigest).To(Equal(claim.RuleSetDigest()), "the check published the rule set in force")
	return served{obj: r, full: full, id: id}
}

// claimer is a live worker with a Gitea account of its own that may write to the
// repository it is bound to.
type claimer struct {
	name, ns string
	c        client.Client
	fw       *testfleet.Worker
}

func newClaimer(ns, repo string) *claimer {
	GinkgoHelper()
	login := testenv.Uniq("mw")
	_, err := forgeSrv.CreateUser(ctx, login)
	Expect(err).NotTo(HaveOccurred())
	Expect(forgeSrv.AddCollaborator(ctx, repo, login)).To(Succeed())
	fw, err := testfleet.Register(ctx, env, testfleet.WorkerSpec{Namespace: ns, Name: login, Repository: repo,
		Host: hostFacts, StartTime: selfStart})
	Expect(err).NotTo(HaveOccurred())
	return &claimer{name: login, ns: ns, c: fw.Client, fw: fw}
}

// heartbeating renews the workers' heartbeats every interval, as themselves, until the
// spec ends, as a live fleet's workers do whatever the manager is doing. It returns the
// number of renewals so far.
func heartbeating(interval time.Duration, ws ...*claimer) func() int64 {
	var n atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if testfleet.Heartbeat(ctx, k8sClient, w.fw) == nil {
						n.Add(1)
					}
				}
			}
		})
	}
	DeferCleanup(func() { close(stop); wg.Wait() })
	return n.Load
}

// claim creates the worker's claim on issue #1 of repo; the spec's cleanup releases it.
func (w *claimer) claim(repo string) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	return w.claimIssue(repo, 1)
}

// claimIssue claims issue n of repo as the worker.
func (w *claimer) claimIssue(repo string, n int64) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	tc := &fleetv1alpha1.TaskClaim{ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("tc"), Namespace: w.ns},
		Spec: fleetv1alpha1.TaskClaimSpec{Worker: w.name, Target: testfleet.IssueTarget(repo, n)}}
	Expect(w.c.Create(ctx, tc)).To(Succeed())
	DeferCleanup(func() {
		_ = w.update(tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Release = true })
	})
	return tc
}

func (w *claimer) update(tc *fleetv1alpha1.TaskClaim, mutate func(*fleetv1alpha1.TaskClaim)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &fleetv1alpha1.TaskClaim{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(tc), cur); err != nil {
			return err
		}
		mutate(cur)
		return w.c.Update(ctx, cur)
	})
}

// pin copies the claim's validation pin into its spec, as the worker.
func (w *claimer) pin(tc *fleetv1alpha1.TaskClaim) {
	GinkgoHelper()
	v := claimOf(tc).Status.Validation
	Expect(v).NotTo(BeNil())
	Expect(w.update(tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Pin = v.Pin })).To(Succeed())
}

func claimOf(tc *fleetv1alpha1.TaskClaim) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	out := &fleetv1alpha1.TaskClaim{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tc), out)).To(Succeed())
	return out
}

// phaseOf reads the claim's phase and refusal, for Eventually.
func phaseOf(tc *fleetv1alpha1.TaskClaim) func() string {
	return func() string {
		out := &fleetv1alpha1.TaskClaim{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(tc), out); err != nil {
			return err.Error()
		}
		if r := out.Status.Result; r != nil && r.FailedPredicate != "" {
			return out.Status.Phase + "/" + r.FailedPredicate
		}
		return out.Status.Phase
	}
}

// proxiedServer is a second Ready GiteaServer, reached through a proxy the spec can stop
// and start again; the spec's cleanup stops it.
func proxiedServer() (*fleetv1alpha1.GiteaServer, *testgitea.Proxy) {
	GinkgoHelper()
	proxy, err := forgeSrv.NewProxy()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(proxy.Stop)
	b := newServer(proxy.URL, tokenSecret(forgeSrv.Token))
	Eventually(readyOf(b)).Should(HaveField("Reason", fleetv1alpha1.ReasonServerConnected))
	return b, proxy
}

// activeClaim is a new worker's active claim on issue #1 of r.
func activeClaim(r served) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	w := newClaimer(r.obj.Namespace, r.full)
	tc := w.claim(r.full)
	Eventually(phaseOf(tc)).Should(Equal(fleetv1alpha1.ClaimPhaseValidated))
	w.pin(tc)
	Eventually(phaseOf(tc)).Should(Equal(fleetv1alpha1.ClaimPhaseActive))
	return tc
}

// recordOf reads the claim record on issue #1 of repo, as Gitea holds it.
func recordOf(repo string) *claim.Record {
	GinkgoHelper()
	rec, _, err := adminGitea.Read(ctx, claim.Target{Repository: repo, Kind: claim.KindIssue, Number: 1})
	Expect(err).NotTo(HaveOccurred())
	return rec
}

// cappedAt sets r's maxActiveClaims to n, gives its issue #1 two more issues (#2, #3),
// and waits until the object is Ready for its new generation.
func cappedAt(r served, n int32) served {
	GinkgoHelper()
	for i := int64(2); i <= 3; i++ {
		Expect(testfleet.NewIssue(ctx, forgeSrv, forgeSrv.Token, r.full, fmt.Sprintf("task %d", i))).To(Equal(i))
	}
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := getRepo(r.obj)
		cur.Spec.MaxActiveClaims = ptrTo(n)
		return k8sClient.Update(ctx, cur)
	})).To(Succeed())
	Eventually(func(g Gomega) {
		cur := getRepo(r.obj)
		c := meta.FindStatusCondition(cur.Status.Conditions, fleetv1alpha1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.ObservedGeneration).To(Equal(cur.Generation))
	}).Should(Succeed())
	return r
}

// slotHolders lists, for Eventually, the claims holding a slot of the repository key in
// ns (the UIDs in the slots' Leases; a free slot holds none).
func slotHolders(ns string, key claim.RepositoryKey) func() []string {
	return func() []string {
		GinkgoHelper()
		list := &coordinationv1.LeaseList{}
		Expect(k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"fleet.giteatools.dev/claim-slots": claim.SlotsOf(key)})).To(Succeed())
		var holders []string
		for _, l := range list.Items {
			if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				holders = append(holders, *l.Spec.HolderIdentity)
			}
		}
		return holders
	}
}

var _ = Describe("TaskClaims in GiteaRepositories", func() {
	var teamA, teamB string

	BeforeEach(func() {
		var err error
		teamA, err = env.NewNamespace(ctx, "team-a")
		Expect(err).NotTo(HaveOccurred())
		teamB, err = env.NewNamespace(ctx, "team-b")
		Expect(err).NotTo(HaveOccurred())
	})

	It("gives one winner per repository when #1 of three repositories on two servers is claimed at once, each published in its own repository", func() {
		a := readyServer()
		b, _ := proxiedServer()
		// Two repositories on one server, in two namespaces, and one on the other server:
		// each has an issue #1.
		repos := []served{serve(teamA, a.Name), serve(teamB, a.Name), serve(teamA, b.Name)}
		claims := make([][]*fleetv1alpha1.TaskClaim, len(repos))
		workers := make([][]*claimer, len(repos))
		for i, r := range repos {
			for range 2 {
				w := newClaimer(r.obj.Namespace, r.full)
				workers[i] = append(workers[i], w)
				claims[i] = append(claims[i], w.claim(r.full))
			}
		}
		for i := range repos {
			for _, tc := range claims[i] {
				Eventually(phaseOf(tc)).Should(Equal(fleetv1alpha1.ClaimPhaseValidated))
			}
		}
		// All six pin at once.
		var wg sync.WaitGroup
		for i := range repos {
			for j, tc := range claims[i] {
				wg.Go(func() {
					defer GinkgoRecover()
					workers[i][j].pin(tc)
				})
			}
		}
		wg.Wait()

		locks := map[string]string{}
		for i, r := range repos {
			var winners, losers []*fleetv1alpha1.TaskClaim
			for _, tc := range claims[i] {
				Eventually(phaseOf(tc)).Should(Or(Equal(fleetv1alpha1.ClaimPhaseActive), HavePrefix(fleetv1alpha1.ClaimPhaseRejected+"/")))
				if cur := claimOf(tc); cur.Status.Phase == fleetv1alpha1.ClaimPhaseActive {
					winners = append(winners, cur)
				} else {
					losers = append(losers, cur)
				}
			}
			Expect(winners).To(HaveLen(1), "exactly one winner in %s", r.full)
			Expect(losers[0].Status.Result.Class).To(Equal(string(claim.ClassContention)), "the other lost a race in its own repository")
			win := winners[0]
			// The claim is keyed by its server and the repository ID, and holds that lock.
			Expect(win.Status.Repository).To(Equal(&fleetv1alpha1.ClaimRepository{Server: r.obj.Spec.Server, ID: r.id,
				LockName: claim.LockName(claim.RepositoryKey{Server: r.obj.Spec.Server, ID: r.id}, claim.Target{Kind: claim.KindIssue, Number: 1})}))
			Expect(win.Status.Capability.LeaseName).To(Equal(win.Status.Repository.LockName))
			lease := &coordinationv1.Lease{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: win.Namespace, Name: win.Status.Repository.LockName}, lease)).To(Succeed())
			Expect(*lease.Spec.HolderIdentity).To(Equal(string(win.UID)))
			lock := win.Namespace + "/" + win.Status.Repository.LockName
			Expect(locks).NotTo(HaveKey(lock), "two repositories share a lock")
			locks[lock] = r.full
			// Its record is in force in its own repository's #1, and nowhere else.
			rec := recordOf(r.full)
			Expect(rec).NotTo(BeNil())
			Expect(rec.ClaimID).To(Equal(string(win.UID)))
			Expect(rec.State).To(Equal(claim.RecordStateActive))
		}
	})

	It("lets at most maxActiveClaims claims of a repository hold a capability at once, and frees a slot when one ends", func() {
		a := readyServer()
		r := cappedAt(serve(teamA, a.Name), 2)

		// Three workers, three different issues: no two race for one target's lock, only
		// for the repository's two slots.
		workers := make([]*claimer, 3)
		claims := make([]*fleetv1alpha1.TaskClaim, 3)
		for i := range workers {
			workers[i] = newClaimer(teamA, r.full)
			claims[i] = workers[i].claimIssue(r.full, int64(i+1))
		}
		for _, tc := range claims {
			Eventually(phaseOf(tc)).Should(Equal(fleetv1alpha1.ClaimPhaseValidated))
		}
		var wg sync.WaitGroup
		for i, tc := range claims {
			wg.Go(func() {
				defer GinkgoRecover()
				workers[i].pin(tc)
			})
		}
		wg.Wait()
		var active []*fleetv1alpha1.TaskClaim
		refused := -1
		for i, tc := range claims {
			Eventually(phaseOf(tc)).Should(Or(Equal(fleetv1alpha1.ClaimPhaseActive), HavePrefix(fleetv1alpha1.ClaimPhaseRejected+"/")))
			if cur := claimOf(tc); cur.Status.Phase == fleetv1alpha1.ClaimPhaseActive {
				active = append(active, cur)
			} else {
				refused = i
				Expect(cur.Status.Result.FailedPredicate).To(Equal("repository_claim_limit"))
				Expect(cur.Status.Result.Class).To(Equal(string(claim.ClassContention)))
			}
		}
		Expect(active).To(HaveLen(2), "two slots, two active claims")
		Expect(refused).To(BeNumerically(">=", 0))
		held := slotHolders(teamA, claim.RepositoryKey{Server: a.Name, ID: r.id})
		Expect(held()).To(ConsistOf(string(active[0].UID), string(active[1].UID)))
		lost := claimOf(claims[refused])
		rec, _, err := adminGitea.Read(ctx, claim.Target{Repository: r.full, Kind: claim.KindIssue, Number: int64(refused + 1)})
		Expect(err).NotTo(HaveOccurred())
		Expect(rec == nil || rec.ClaimID != string(lost.UID) || rec.State != claim.RecordStateActive).To(BeTrue(), "the refused claim published nothing")

		By("one claim ends: its slot is free, and the refused worker's next claim wins it")
		Expect(workers[indexOf(claims, active[0])].update(active[0], func(c *fleetv1alpha1.TaskClaim) { c.Spec.Release = true })).To(Succeed())
		Eventually(held).Should(ConsistOf(string(active[1].UID)))
		again := workers[refused].claimIssue(r.full, int64(refused+1))
		Eventually(phaseOf(again)).Should(Equal(fleetv1alpha1.ClaimPhaseValidated))
		workers[refused].pin(again)
		Eventually(phaseOf(again)).Should(Equal(fleetv1alpha1.ClaimPhaseActive))
		Expect(held()).To(ConsistOf(string(active[1].UID), string(claimOf(again).UID)))
	})

	It("keeps a repository's claims across a manager restart while its workers heartbeat: a release and a claim made while no manager runs "+
		"are finished by the next one, and the slots follow", func() {
		a := readyServer()
		r := cappedAt(serve(teamA, a.Name), 2)
		workers := []*claimer{newClaimer(teamA, r.full), newClaimer(teamA, r.full), newClaimer(teamA, r.full)}
		renewals := heartbeating(300*time.Millisecond, workers...)
		slots := slotHolders(teamA, claim.RepositoryKey{Server: a.Name, ID: r.id})
		recordOn := func(n int64) *claim.Record {
			rec, _, err := adminGitea.Read(ctx, claim.Target{Repository: r.full, Kind: claim.KindIssue, Number: n})
			Expect(err).NotTo(HaveOccurred())
			return rec
		}

		By("two claims take the repository's two slots")
		held := make([]*fleetv1alpha1.TaskClaim, 2)
		for i := range held {
			held[i] = workers[i].claimIssue(r.full, int64(i+1))
			Eventually(phaseOf(held[i])).Should(Equal(fleetv1alpha1.ClaimPhaseValidated))
			workers[i].pin(held[i])
			Eventually(phaseOf(held[i])).Should(Equal(fleetv1alpha1.ClaimPhaseActive))
		}
		Expect(slots()).To(ConsistOf(string(held[0].UID), string(held[1].UID)))

		By("the manager stops; meanwhile the first worker releases its claim and the third claims issue 3")
		running.stop()
		restarted := false
		DeferCleanup(func() {
			if !restarted { // the spec failed while no manager ran: the suite's next specs need one
				running = startManager()
			}
		})
		Expect(workers[0].update(held[0], func(c *fleetv1alpha1.TaskClaim) { c.Spec.Release = true })).To(Succeed())
		late := workers[2].claimIssue(r.full, 3)
		Consistently(phaseOf(late), 2*time.Second).Should(BeEmpty(), "nothing decides a claim while no manager runs")
		Expect(recordOn(1)).To(HaveField("State", claim.RecordStateActive), "the released claim's record stays in force until a manager ends it")
		Expect(slots()).To(HaveLen(2))

		By("a new manager ends the released claim, frees its slot, and decides the new claim into it")
		running, restarted = startManager(), true
		Eventually(phaseOf(held[0])).Should(Equal(fleetv1alpha1.ClaimPhaseReleased))
		// The phase is written first; the record is ended, the slot freed and RecordCleared
		// set after it (finish).
		Eventually(func() *claim.Record { return recordOn(1) }).Should(HaveField("State", claim.RecordStateReleased), "the record of the released claim is ended in Gitea")
		Eventually(func() bool {
			return meta.IsStatusConditionTrue(claimOf(held[0]).Status.Conditions, fleetv1alpha1.RecordClearedCondition)
		}).Should(BeTrue())
		Eventually(phaseOf(late)).Should(Equal(fleetv1alpha1.ClaimPhaseValidated))
		workers[2].pin(late)
		Eventually(phaseOf(late)).Should(Equal(fleetv1alpha1.ClaimPhaseActive))
		Expect(slots()).To(ConsistOf(string(held[1].UID), string(late.UID)))
		Expect(recordOn(3)).To(SatisfyAll(HaveField("ClaimID", string(late.UID)), HaveField("State", claim.RecordStateActive)))

		By("the claim active across the restart is still active, its record unchanged, under the new manager's rechecks")
		Consistently(phaseOf(held[1]), 3*time.Second).Should(Equal(fleetv1alpha1.ClaimPhaseActive))
		Expect(recordOn(2)).To(SatisfyAll(HaveField("ClaimID", string(held[1].UID)), HaveField("State", claim.RecordStateActive)))
		Expect(renewals()).To(BeNumerically(">", 10), "the workers heartbeat throughout")
		GinkgoWriter.Printf("restart spec: %d heartbeats renewed\n", renewals())
	})

	It("refuses a claim on a repository that no GiteaRepository of the claim's namespace names, and touches nothing", func() {
		a := readyServer()
		mine := serve(teamA, a.Name)
		// A worker of team-b, bound to team-a's repository, claims in it from team-b.
		outsider := newClaimer(teamB, mine.full)
		tc := outsider.claim(mine.full)
		Eventually(phaseOf(tc)).Should(Equal(fleetv1alpha1.ClaimPhaseRejected + "/controller_repository_mismatch"))
		Expect(claimOf(tc).Status.Repository).To(BeNil())
		leases := &coordinationv1.LeaseList{}
		Expect(k8sClient.List(ctx, leases, client.InNamespace(teamB))).To(Succeed())
		Expect(leases.Items).To(BeEmpty(), "no lock was made for it")
		Expect(recordOf(mine.full)).To(BeNil(), "nothing was published")
	})

	It("ends the capabilities on a server that stops answering, refuses claims there, and keeps claiming on the other server", func() {
		a := readyServer()
		b, proxy := proxiedServer()
		onA, onB := serve(teamA, a.Name), serve(teamA, b.Name)
		holder := newClaimer(teamA, onB.full)
		held := holder.claim(onB.full)
		Eventually(phaseOf(held)).Should(Equal(fleetv1alpha1.ClaimPhaseValidated))
		holder.pin(held)
		Eventually(phaseOf(held)).Should(Equal(fleetv1alpha1.ClaimPhaseActive))

		Expect(proxy.Stop()).To(Succeed())
		// Fail closed: the capability ends as soon as the repository is not Ready; the
		// record is ended once the server answers again, and the finalizer holds till then.
		Eventually(phaseOf(held)).Should(Equal(fleetv1alpha1.ClaimPhaseRevoked))
		ended := claimOf(held)
		Expect(ended.Status.EndedReason).To(Equal(string(claim.TriggerOwnershipLoss)))
		Expect(ended.Status.Capability).To(BeNil())
		Expect(ended.Finalizers).To(ContainElement(fleetv1alpha1.ClaimFinalizer))
		Expect(meta.IsStatusConditionTrue(ended.Status.Conditions, fleetv1alpha1.RecordClearedCondition)).To(BeFalse())

		late := newClaimer(teamA, onB.full)
		refused := late.claim(onB.full)
		Eventually(phaseOf(refused)).Should(Equal(fleetv1alpha1.ClaimPhaseRejected + "/repository_not_ready"))
		Eventually(func() []string { return eventReasons(refused.Name) }).Should(ContainElement(fleetv1alpha1.ReasonRepositoryNotReady), "an Event says which repository is not Ready and why")

		other := newClaimer(teamA, onA.full)
		fine := other.claim(onA.full)
		Eventually(phaseOf(fine)).Should(Equal(fleetv1alpha1.ClaimPhaseValidated))
		other.pin(fine)
		Eventually(phaseOf(fine)).Should(Equal(fleetv1alpha1.ClaimPhaseActive), "the other server's claims go on")

		Expect(proxy.Start()).To(Succeed())
		Eventually(func() []string { return claimOf(held).Finalizers }).Should(BeEmpty(), "the record is ended once the server answers")
		Expect(meta.IsStatusConditionTrue(claimOf(held).Status.Conditions, fleetv1alpha1.RecordClearedCondition)).To(BeTrue())
		Expect(recordOf(onB.full)).To(HaveField("State", claim.RecordStateRevoked), "the record was ended as the claim was")
	})

	It("holds a deleted GiteaRepository until its claims released their records, ends its active capabilities, and deletes its locks", func() {
		a := readyServer()
		b, proxy := proxiedServer()
		onA, onB, elsewhere := serve(teamA, a.Name), serve(teamA, b.Name), serve(teamB, a.Name)
		heldA, heldB, bystander := activeClaim(onA), activeClaim(onB), activeClaim(elsewhere)
		for _, r := range []served{onA, onB} {
			Expect(getRepo(r.obj).Finalizers).To(ContainElement(fleetv1alpha1.RepositoryFinalizer))
		}
		lockGone := func(tc *fleetv1alpha1.TaskClaim) func() bool {
			return func() bool {
				err := k8sClient.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: claimOf(tc).Status.Repository.LockName}, &coordinationv1.Lease{})
				return apierrors.IsNotFound(err)
			}
		}
		repoGone := func(r served) func() bool {
			return func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(r.obj), &fleetv1alpha1.GiteaRepository{}))
			}
		}

		By("deleting the repository of a server that answers: its capability ends and its record is released")
		Expect(k8sClient.Delete(ctx, onA.obj)).To(Succeed())
		Eventually(phaseOf(heldA)).Should(Equal(fleetv1alpha1.ClaimPhaseRevoked))
		Expect(claimOf(heldA).Status.EndedReason).To(Equal(string(claim.TriggerOwnershipLoss)))
		Eventually(repoGone(onA)).Should(BeTrue())
		Expect(claimOf(heldA).Finalizers).To(BeEmpty())
		Expect(recordOf(onA.full)).To(HaveField("State", claim.RecordStateRevoked))
		Eventually(lockGone(heldA)).Should(BeTrue(), "no lock of the deleted repository is left")

		By("deleting the repository of a server that is down: the object waits for the record")
		Expect(proxy.Stop()).To(Succeed())
		Eventually(phaseOf(heldB)).Should(Equal(fleetv1alpha1.ClaimPhaseRevoked))
		Expect(k8sClient.Delete(ctx, onB.obj)).To(Succeed())
		Eventually(readyOf(onB.obj)).Should(And(HaveField("Reason", fleetv1alpha1.ReasonRepositoryDeleting), HaveField("Message", ContainSubstring("1 claim"))))
		Consistently(repoGone(onB), "3s").Should(BeFalse(), "the record is still in force in Gitea")
		Expect(proxy.Start()).To(Succeed())
		Eventually(repoGone(onB)).Should(BeTrue())
		Expect(recordOf(onB.full)).To(HaveField("State", claim.RecordStateRevoked))
		Eventually(lockGone(heldB)).Should(BeTrue())

		By("leaving the claims of the other namespace's repository alone")
		Expect(phaseOf(bystander)()).To(Equal(fleetv1alpha1.ClaimPhaseActive))
		Expect(recordOf(elsewhere.full)).To(HaveField("State", claim.RecordStateActive))
	})

	It("sweeps the orphaned records of every GiteaRepository, on each repository's own server", func() {
		a := readyServer()
		b, _ := proxiedServer()
		onA, onB, kept := serve(teamA, a.Name), serve(teamB, b.Name), serve(teamA, b.Name)
		orphans := []*fleetv1alpha1.TaskClaim{activeClaim(onA), activeClaim(onB)}
		stays := activeClaim(kept)

		By("force-deleting two claims: their records stay in force in Gitea")
		// The finalizer is dropped and the claim deleted at that very resourceVersion, so
		// the manager never gets to end the record itself (as when a claim is force-deleted
		// while the manager is down).
		for _, tc := range orphans {
			Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := &fleetv1alpha1.TaskClaim{}
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(tc), cur); err != nil {
					return err
				}
				cur.Finalizers = nil
				if err := k8sClient.Update(ctx, cur); err != nil {
					return err
				}
				rv := cur.ResourceVersion
				return k8sClient.Delete(ctx, cur, client.Preconditions{ResourceVersion: &rv})
			})).To(Succeed())
		}
		for _, r := range []served{onA, onB} {
			Expect(recordOf(r.full)).To(HaveField("State", claim.RecordStateActive))
		}

		sw := &taskclaim.Sweeper{Reader: k8sClient, Client: k8sClient, Repositories: resolver, TTL: time.Hour, Clock: clock.RealClock{}}
		res, err := sw.Sweep(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Records).To(ContainElements(
			claim.Target{Repository: onA.full, Kind: claim.KindIssue, Number: 1},
			claim.Target{Repository: onB.full, Kind: claim.KindIssue, Number: 1}))
		for i, r := range []served{onA, onB} {
			rec := recordOf(r.full)
			Expect(rec.ClaimID).To(Equal(string(orphans[i].UID)))
			Expect(rec.State).To(Equal(claim.RecordStateRevoked), "ended on its own server")
		}
		Expect(recordOf(kept.full)).To(HaveField("ClaimID", string(stays.UID)))
		Expect(recordOf(kept.full)).To(HaveField("State", claim.RecordStateActive), "the record of a claim that exists is left alone")
		Expect(phaseOf(stays)()).To(Equal(fleetv1alpha1.ClaimPhaseActive))
	})
})

// eventReasons lists the reasons of the Events about the object named name.
func eventReasons(name string) []string {
	list := &corev1.EventList{}
	if err := k8sClient.List(ctx, list); err != nil {
		return []string{fmt.Sprint(err)}
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// indexOf is the position in claims of the claim tc is a copy of.
func indexOf(claims []*fleetv1alpha1.TaskClaim, tc *fleetv1alpha1.TaskClaim) int {
	for i, c := range claims {
		if c.Name == tc.Name {
			return i
		}
	}
	return -1
}
