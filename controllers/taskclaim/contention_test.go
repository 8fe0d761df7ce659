package taskclaim_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// contentionPredicates are the ways a racer can lose: the winner's record or lock seen on
// re-read, or the winner's compare-and-swap seen at the write.
var contentionPredicates = []string{
	"claim_record_foreign", "lease_held_foreign", "claim_generation_advanced",
	"lease_cas_conflict", "content_version_conflict", "claim_cas_conflict", "claim_record_not_ours", "lease_not_held",
}

// round is one contention round: several workers validated on one fresh issue, then
// pinning at the same instant.
type round struct {
	index  int
	racers []*worker
	target fleetv1alpha1.TaskTarget
	claims []*fleetv1alpha1.TaskClaim
	winner *fleetv1alpha1.TaskClaim
	losers []*fleetv1alpha1.TaskClaim
}

// contentionWaves is how many waves of rounds each kind of contention spec runs:
// FLEET_CONTENTION_WAVES when set (make stress sets it high), otherwise a few. Each wave
// races every worker once, in rounds on disjoint workers that run at the same time, so
// the rounds also contend with each other for the controller and Gitea.
func contentionWaves() int {
	if n, err := strconv.Atoi(os.Getenv("FLEET_CONTENTION_WAVES")); err == nil && n > 0 {
		return n
	}
	return 4
}

var _ = Describe("Contention", Ordered, func() {
	// contenders race in each wave: six rounds of two, or three rounds of four, at once.
	const contenders = 12
	waves := contentionWaves()
	var (
		workers      []*worker
		twos, fours  []*round
		mu           sync.Mutex // guards the tallies below, written by concurrent rounds
		predicates   = map[string]int{}
		winsByWorker = map[string]int{}
		allLosers    []*fleetv1alpha1.TaskClaim
		// paths are the contention counters' increments over each kind of round.
		paths = map[string]map[string]float64{}
	)

	BeforeAll(func() {
		t0 := time.Now()
		for range contenders {
			workers = append(workers, newWorker(nsMain))
		}
		timing(fmt.Sprintf("contention setup (%d workers)", contenders), time.Since(t0))
	})

	// race pins every racer's claim at the same instant and checks the outcome: exactly one
	// Active claim, every other one a typed, final contention refusal naming only the
	// requested issue; the Gitea record and the lock belong to the winner. It runs in a
	// goroutine of its own, beside the wave's other rounds.
	race := func(r *round) {
		defer GinkgoRecover()
		i := r.index
		pins := make([]string, len(r.claims))
		for j, tc := range r.claims {
			pins[j] = waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated).Status.Validation.Pin
		}
		// Validation made the lock; nobody holds it yet, and every racer pinned it free.
		free := lease(nsMain, r.target)
		Expect(free).NotTo(BeNil(), "round %d: no lock after validation", i)
		Expect(holderOf(free)).To(BeEmpty())
		for _, tc := range r.claims {
			Expect(fetch(tc).Status.Validation.ClaimGeneration).To(Equal(free.ResourceVersion), "round %d: every racer pinned the free lock", i)
		}
		start := make(chan struct{})
		errs := make([]error, len(r.claims))
		var wg sync.WaitGroup
		for j, tc := range r.claims {
			wg.Go(func() {
				<-start
				errs[j] = updateSpec(r.racers[j].c, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Pin = pins[j] })
			})
		}
		close(start)
		wg.Wait()
		for j, err := range errs {
			Expect(err).NotTo(HaveOccurred(), "round %d: racer %d could not present its pin", i, j)
		}

		final := make([]*fleetv1alpha1.TaskClaim, len(r.claims))
		Eventually(func(g Gomega) {
			for j, tc := range r.claims {
				cur := &fleetv1alpha1.TaskClaim{}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur)).To(Succeed())
				g.Expect(cur.Status.Phase).To(BeElementOf(fleetv1alpha1.ClaimPhaseActive, fleetv1alpha1.ClaimPhaseRejected),
					"round %d racer %d", i, j)
				final[j] = cur
			}
		}).Should(Succeed())

		for j, cur := range final {
			if cur.Status.Phase == fleetv1alpha1.ClaimPhaseActive {
				Expect(r.winner).To(BeNil(), "round %d: two winners (%s and %s)", i, names(r.winner), cur.Name)
				r.winner = cur
				continue
			}
			res := cur.Status.Result
			Expect(res.Class).To(Equal("contention"), "round %d racer %d: %s", i, j, describe(cur))
			Expect(contentionPredicates).To(ContainElement(res.FailedPredicate))
			checkRefusal(cur, refusal{"contention", "foreign_claimed", res.FailedPredicate})
			Expect(res.ContentionIsNormal).To(BeTrue())
			Expect(res.ReassessFromFreshState).To(BeTrue())
			Expect(res.RetryPermitted).To(BeFalse())
			r.losers = append(r.losers, cur)
		}
		Expect(r.winner).NotTo(BeNil(), "round %d: no winner", i)
		Expect(r.losers).To(HaveLen(len(r.claims) - 1))

		rec := readRecord(r.target)
		Expect(rec).NotTo(BeNil())
		Expect(rec.ClaimID).To(Equal(string(r.winner.UID)), "round %d: the Gitea record is the winner's", i)
		Expect(rec.State).To(Equal(claim.RecordStateActive))
		Expect(holderOf(lease(nsMain, r.target))).To(Equal(string(r.winner.UID)), "round %d: the lock is the winner's", i)

		// Give the task back: a worker holds one claim at a time, so its next wave starts
		// once this one ended.
		Expect(updateSpec(k8s, r.winner, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Release = true })).To(Succeed())
		waitPhase(r.winner, fleetv1alpha1.ClaimPhaseReleased)
		mu.Lock()
		defer mu.Unlock()
		for j, tc := range r.claims {
			if tc.Name == r.winner.Name {
				winsByWorker[r.racers[j].name]++
			}
		}
		for _, tc := range r.losers {
			predicates[tc.Status.Result.FailedPredicate]++
		}
		allLosers = append(allLosers, r.losers...)
	}

	// runWaves races size workers per round: in each wave the workers, shuffled, are cut
	// into rounds of size, each on a fresh issue; a wave's rounds run at once.
	runWaves := func(size int, first int) []*round {
		GinkgoHelper()
		var all []*round
		for wave := range waves {
			order := rand.Perm(len(workers))
			var rounds []*round
			for k := 0; k+size <= len(order); k += size {
				r := &round{index: first + len(all) + len(rounds)}
				r.target = issueTarget(newIssue(fmt.Sprintf("contention round %d (wave %d)", r.index, wave)))
				for _, o := range order[k : k+size] {
					r.racers = append(r.racers, workers[o])
					r.claims = append(r.claims, workers[o].claim(r.target))
				}
				rounds = append(rounds, r)
			}
			var wg sync.WaitGroup
			for _, r := range rounds {
				wg.Go(func() { race(r) })
			}
			wg.Wait()
			all = append(all, rounds...)
		}
		return all
	}

	It("gives two workers selecting one issue exactly one winner, in concurrent rounds", func() {
		t0 := time.Now()
		before := contentionCounts()
		twos = runWaves(2, 0)
		paths["two"] = countsSince(before)
		timing(fmt.Sprintf("contention %d two-worker rounds in %d waves", len(twos), waves), time.Since(t0))
	})

	It("gives four workers selecting one issue exactly one winner, in concurrent rounds", func() {
		t0 := time.Now()
		before := contentionCounts()
		fours = runWaves(4, len(twos))
		paths["four"] = countsSince(before)
		timing(fmt.Sprintf("contention %d four-worker rounds in %d waves", len(fours), waves), time.Since(t0))
	})

	It("never retries a lost claim, and leaves Gitea no comment about a loss", func() {
		rvs := map[string]string{}
		for _, tc := range allLosers {
			rvs[tc.Name] = tc.ResourceVersion
		}
		Consistently(func(g Gomega) {
			for _, tc := range allLosers {
				cur := &fleetv1alpha1.TaskClaim{}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur)).To(Succeed())
				g.Expect(cur.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseRejected))
				g.Expect(cur.ResourceVersion).To(Equal(rvs[tc.Name]), "claim %s was written again", tc.Name)
			}
		}, 3*time.Second, 500*time.Millisecond).Should(Succeed())

		for _, r := range append(append([]*round{}, twos...), fours...) {
			waitPhase(r.winner, fleetv1alpha1.ClaimPhaseReleased)
			for _, tc := range r.losers {
				Expect(transitionsOf(tc)).To(BeEmpty(), "claim %s: a refusal is an Event and a metric, not a Gitea comment", tc.Name)
				Expect(eventReasons(tc)).To(ContainElement(fleetv1alpha1.ReasonRejected), "claim %s", tc.Name)
			}
			Expect(eventsOf(transitionsOf(r.winner))).To(Equal([]string{"claimed", "released"}))
		}

		two, four := 0, 0
		for _, r := range twos {
			two += len(r.losers)
		}
		for _, r := range fours {
			four += len(r.losers)
		}
		var ps []string
		for p, n := range predicates {
			ps = append(ps, fmt.Sprintf("%s=%d", p, n))
		}
		sort.Strings(ps)
		var ws []string
		for w, n := range winsByWorker {
			ws = append(ws, fmt.Sprintf("%s=%d", w, n))
		}
		sort.Strings(ws)
		evidence("contention: %d two-worker rounds (%d winners, %d losers), %d four-worker rounds (%d winners, %d losers)",
			len(twos), len(twos), two, len(fours), len(fours), four)
		evidence("contention: loser predicates %s; wins by worker %s", strings.Join(ps, " "), strings.Join(ws, " "))

		By("counting the paths the losers lost on, at the manager's reconcile concurrency")
		total := map[string]float64{}
		for _, kind := range []string{"two", "four"} {
			evidence("contention: %s-worker rounds at %d concurrent reconciles: %s %s", kind, reconcilers,
				taskclaim.ContentionMetric, describeCounts(paths[kind]))
			for p, n := range paths[kind] {
				total[p] += n
			}
		}
		var losses float64
		for _, n := range total {
			losses += n
		}
		Expect(losses).To(BeNumerically("==", two+four), "every loss is counted on exactly one path")
		Expect(total[taskclaim.ContentionLeaseConflict]).To(BeNumerically(">=", 1),
			"with concurrent reconciles some racer must lose the Lease compare-and-swap itself: %s", describeCounts(total))
	})
})

// contentionCounts reads fleet_taskclaim_contention_total by path from the metrics
// registry the manager serves.
func contentionCounts() map[string]float64 {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() != taskclaim.ContentionMetric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "path" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	Expect(out).To(HaveKey(taskclaim.ContentionLeaseConflict), "the contention counter is registered")
	return out
}

// countsSince is the increase of every path since before.
func countsSince(before map[string]float64) map[string]float64 {
	GinkgoHelper()
	out := map[string]float64{}
	for p, n := range contentionCounts() {
		out[p] = n - before[p]
	}
	return out
}

func describeCounts(c map[string]float64) string {
	var ps []string
	for p, n := range c {
		ps = append(ps, fmt.Sprintf("%s=%g", p, n))
	}
	sort.Strings(ps)
	return strings.Join(ps, " ")
}

func names(tc *fleetv1alpha1.TaskClaim) string {
	if tc == nil {
		return "<none>"
	}
	return tc.Name
}

// The Lease serialises every claim of one namespace on one target: only the Lease's
// winner goes on to write the Gitea record, so racers inside the manager cannot reach
// Gitea's 409. What can is a change outside the Lease (a person editing the issue,
// another controller with its own locks) landing between the winner's own read and its
// guarded write. This drives that moment through a seam around the real client.
var _ = Describe("The guarded Gitea write under contention", func() {
	It("loses with a typed contention refusal when the body moved after the claim read it", func() {
		w := newWorker(nsDirect)
		t := issueTarget(newIssue("contention: body edited before the write"))
		h := &hookedGitea{Gitea: gc, beforePublish: func() {
			Expect(srv.EditBody(ctx, repo, t.Number, "Task: edited by a person after the claim read it.\n")).To(Succeed())
		}}
		r := directReconciler(h, k8s, clock.RealClock{})
		tc := validateDirect(r, w, t)
		before := contentionCounts()
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		got := expectRefused(tc, refusal{"contention", "foreign_claimed", "content_version_conflict"})
		Expect(got.Status.Result.ContentionIsNormal).To(BeTrue())
		since := countsSince(before)
		evidence("contention: Gitea 409 through the seam: %s %s", taskclaim.ContentionMetric, describeCounts(since))
		Expect(since[taskclaim.ContentionGiteaConflict]).To(BeNumerically("==", 1))
		Expect(readRecord(t)).To(BeNil(), "nothing was written over the edit")
		Expect(holderOf(lease(nsDirect, t))).To(BeEmpty(), "the lock is given back")
		expectNeutral(w, t)
	})
})
