package taskclaim_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/controller/taskclaim"
)

// contentionPredicates are the ways a racer can lose: the winner's record or lock seen on
// re-read, or the winner's compare-and-swap seen at the write.
var contentionPredicates = []string{
	"claim_record_foreign", "lease_held_foreign", "claim_generation_advanced",
	"lease_cas_conflict", "content_version_conflict", "claim_cas_conflict", "claim_record_not_ours", "lease_not_held",
}

// round is one contention round: several workers validated on one issue, then pinning at
// the same instant.
type round struct {
	racers []*worker
	target fleetv1alpha1.TaskTarget
	claims []*fleetv1alpha1.TaskClaim
	winner *fleetv1alpha1.TaskClaim
	losers []*fleetv1alpha1.TaskClaim
}

var _ = Describe("Contention", Ordered, func() {
	const roundsOfTwo, roundsOfFour = 50, 50
	var (
		workers      []*worker
		twos, fours  []*round
		predicates   = map[string]int{}
		winsByWorker = map[string]int{}
		allLosers    []*fleetv1alpha1.TaskClaim
		// paths are the contention counters' increments over each kind of round.
		paths = map[string]map[string]float64{}
	)

	BeforeAll(func() {
		t0 := time.Now()
		for range 4 {
			workers = append(workers, newWorker(nsMain))
		}
		pairs := [][2]int{{0, 1}, {2, 3}, {0, 2}, {1, 3}, {0, 3}, {1, 2}}
		By("creating one fresh issue per round and every racer's claim up front")
		for i := range roundsOfTwo + roundsOfFour {
			r := &round{target: issueTarget(newIssue(fmt.Sprintf("contention round %d", i)))}
			if i < roundsOfTwo {
				p := pairs[i%len(pairs)]
				r.racers = []*worker{workers[p[0]], workers[p[1]]}
				twos = append(twos, r)
			} else {
				r.racers = workers
				fours = append(fours, r)
			}
			for _, w := range r.racers {
				r.claims = append(r.claims, w.claim(r.target))
			}
		}
		By("waiting until every racer holds a pin issued while the lock is free")
		for _, r := range append(append([]*round{}, twos...), fours...) {
			for _, tc := range r.claims {
				waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
			}
			free := lease(nsMain, r.target)
			Expect(holderOf(free)).To(BeEmpty())
			for _, tc := range r.claims {
				Expect(fetch(tc).Status.Validation.ClaimGeneration).To(Equal(free.ResourceVersion), "every racer pinned the free lock")
			}
		}
		timing(fmt.Sprintf("contention setup (4 workers, %d issues, %d validations)",
			roundsOfTwo+roundsOfFour, 2*roundsOfTwo+4*roundsOfFour), time.Since(t0))
	})

	// race pins every racer's claim at the same instant and checks the outcome: exactly one
	// Active claim, every other one a typed, final contention refusal naming only the
	// requested issue; the Gitea record and the lock belong to the winner.
	race := func(i int, r *round) {
		GinkgoHelper()
		pins := make([]string, len(r.claims))
		for j, tc := range r.claims {
			pins[j] = fetch(tc).Status.Validation.Pin
		}
		start := make(chan struct{})
		errs := make([]error, len(r.claims))
		var wg sync.WaitGroup
		for j, tc := range r.claims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[j] = updateSpec(r.racers[j].c, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Pin = pins[j] })
			}()
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
				winsByWorker[r.racers[j].name]++
				continue
			}
			res := cur.Status.Result
			Expect(res.Class).To(Equal("contention"), "round %d racer %d: %s", i, j, describe(cur))
			Expect(contentionPredicates).To(ContainElement(res.FailedPredicate))
			checkRefusal(cur, refusal{"contention", "foreign_claimed", res.FailedPredicate})
			Expect(res.ContentionIsNormal).To(BeTrue())
			Expect(res.ReassessFromFreshState).To(BeTrue())
			Expect(res.RetryPermitted).To(BeFalse())
			predicates[res.FailedPredicate]++
			r.losers = append(r.losers, cur)
		}
		Expect(r.winner).NotTo(BeNil(), "round %d: no winner", i)
		Expect(r.losers).To(HaveLen(len(r.claims) - 1))

		rec := readRecord(r.target)
		Expect(rec).NotTo(BeNil())
		Expect(rec.ClaimID).To(Equal(string(r.winner.UID)), "round %d: the Gitea record is the winner's", i)
		Expect(rec.State).To(Equal(claim.RecordStateActive))
		Expect(holderOf(lease(nsMain, r.target))).To(Equal(string(r.winner.UID)), "round %d: the lock is the winner's", i)

		// Give the task back so the next round starts from a quiet controller.
		Expect(updateSpec(k8s, r.winner, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Release = true })).To(Succeed())
		// A worker holds one claim at a time: its next round starts once this one ended.
		waitPhase(r.winner, fleetv1alpha1.ClaimPhaseReleased)
		allLosers = append(allLosers, r.losers...)
	}

	It(fmt.Sprintf("gives two workers selecting one issue exactly one winner, %d times", roundsOfTwo), func() {
		t0 := time.Now()
		before := contentionCounts()
		for i, r := range twos {
			race(i, r)
		}
		paths["two"] = countsSince(before)
		timing(fmt.Sprintf("contention %d two-worker rounds", len(twos)), time.Since(t0))
	})

	It(fmt.Sprintf("gives four workers selecting one issue exactly one winner, %d times", roundsOfFour), func() {
		t0 := time.Now()
		before := contentionCounts()
		for i, r := range fours {
			race(len(twos)+i, r)
		}
		paths["four"] = countsSince(before)
		timing(fmt.Sprintf("contention %d four-worker rounds", len(fours)), time.Since(t0))
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
