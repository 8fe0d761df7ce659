package retirementplan_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

// The live-fleet scenario: how many workers run, how often each renews its heartbeat,
// and how long an approval takes to land after its plan.
const (
	liveWorkers     = 50
	deadRows        = 10
	heartbeatMin    = time.Second
	heartbeatJitter = time.Second // each renewal waits heartbeatMin + [0, heartbeatJitter)
	// approvalLandsFrom is long against the heartbeats: every live worker renews six to
	// twelve times between the plan and its approval (make stress runs the same with
	// FLEET_LIVE_APPROVAL_DELAY, e.g. 5m).
	approvalLandsFromDefault = 12 * time.Second
)

var approvalLandsFrom = testenv.DurationFromEnv("FLEET_LIVE_APPROVAL_DELAY", approvalLandsFromDefault)

// heartbeats renews registrations' heartbeats the way live workers do: one goroutine per
// worker, through the status subresource, every 1–2 s, until stopped. It also watches
// for what must never happen: a row it renews being Retired.
type heartbeats struct {
	ctx      context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
	renewals atomic.Int64
	mu       sync.Mutex
	retired  []string // rows found Retired while renewing
}

func startHeartbeats() *heartbeats {
	hb := &heartbeats{}
	hb.ctx, hb.stop = context.WithCancel(ctx)
	DeferCleanup(hb.Stop)
	return hb
}

// Beat renews wr's heartbeat now and then every 1–2 s.
func (hb *heartbeats) Beat(wr *fleetv1alpha1.WorkerRegistration) {
	key := client.ObjectKeyFromObject(wr)
	hb.wg.Add(1)
	go func() {
		defer hb.wg.Done()
		for {
			hb.renew(key)
			select {
			case <-hb.ctx.Done():
				return
			case <-time.After(heartbeatMin + rand.N(heartbeatJitter)):
			}
		}
	}()
}

// renew is one heartbeat; a conflict (the WorkerRegistration controller wrote the status
// in between) is simply retried at the next beat.
func (hb *heartbeats) renew(key client.ObjectKey) {
	cur := &fleetv1alpha1.WorkerRegistration{}
	if err := k8sClient.Get(hb.ctx, key, cur); err != nil {
		return
	}
	if cur.Status.Phase == fleetv1alpha1.PhaseRetired {
		hb.mu.Lock()
		hb.retired = append(hb.retired, key.Name)
		hb.mu.Unlock()
		return
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	if old := cur.Status.LastHeartbeatAt; old != nil && !now.After(old.Time) {
		now = metav1.NewTime(old.Add(time.Second)) // a renewal always moves the stamp
	}
	cur.Status.LastHeartbeatAt = &now
	if k8sClient.Status().Update(hb.ctx, cur) == nil {
		hb.renewals.Add(1)
	}
}

// Stop stops every heartbeat and waits for the goroutines to end (idempotent).
func (hb *heartbeats) Stop() {
	hb.stop()
	hb.wg.Wait()
}

// Retired lists the renewed rows that were ever found Retired.
func (hb *heartbeats) Retired() []string {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return append([]string(nil), hb.retired...)
}

// approveBound copies the plan's tokens and identities into spec.approval as client c
// (in c's own name and groups), under binding: a CandidateSet approval, or one whose
// binding is left out (the default, CandidateSet), carries no registry fingerprint.
func approveBound(c client.Client, p *fleetv1alpha1.RetirementPlan, binding string) error {
	a := approvalAs(whoAmI(c), p)
	a.Binding = binding
	if binding != fleetv1alpha1.ApprovalBindingRegistry {
		a.RegistryFingerprint = ""
	}
	return setApproval(c, p, a)
}

func expectApproved(p *fleetv1alpha1.RetirementPlan) {
	GinkgoHelper()
	c := meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ApprovedCondition)
	Expect(c).NotTo(BeNil(), "plan %s has no Approved condition", p.Name)
	Expect([]string{string(c.Status), c.Reason}).To(Equal([]string{"True", fleetv1alpha1.ReasonApprovalMatches}), "Approved of plan %s: %s", p.Name, c.Message)
}

// expectApprovalOutdated checks that an approval whose apply was refused (the registry or
// the candidate set moved) reads as no longer approving anything.
func expectApprovalOutdated(p *fleetv1alpha1.RetirementPlan) {
	GinkgoHelper()
	c := meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ApprovedCondition)
	Expect(c).NotTo(BeNil(), "plan %s has no Approved condition", p.Name)
	Expect([]string{string(c.Status), c.Reason}).To(Equal([]string{"False", fleetv1alpha1.ReasonApplyRefused}), "Approved of plan %s: %s", p.Name, c.Message)
	Expect(c.Message).To(HavePrefix("The approval no longer matches"))
}

// getPlan reads a plan afresh.
func getPlan(p *fleetv1alpha1.RetirementPlan) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	out := &fleetv1alpha1.RetirementPlan{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), out)).To(Succeed())
	return out
}

func names(wrs []*fleetv1alpha1.WorkerRegistration) []string {
	out := make([]string, 0, len(wrs))
	for _, wr := range wrs {
		out = append(out, wr.Name)
	}
	sort.Strings(out)
	return out
}

var _ = Describe("RetirementPlan approval in a live fleet", func() {
	It("retires exactly the dead rows an approval after the plan under a CandidateSet binding, never a live one; "+
		"a Registry binding gets registry_revision_moved and a changed or revived dead row candidate_set_moved", func() {
		ns := newNamespace()
		hb := startHeartbeats()

		By(fmt.Sprintf("starting %d live workers (real children of this host) heartbeating every %s–%s", liveWorkers, heartbeatMin, heartbeatMin+heartbeatJitter))
		live := make([]*fleetv1alpha1.WorkerRegistration, 0, liveWorkers)
		for i := range liveWorkers {
			wr := fleet.Registration(ns, fmt.Sprintf("live-%02d", i), startChild())
			Expect(k8sClient.Create(ctx, wr)).To(Succeed())
			hb.Beat(wr)
			live = append(live, wr)
		}
		Eventually(func(g Gomega) {
			for _, wr := range live {
				cur := &fleetv1alpha1.WorkerRegistration{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wr), cur)).To(Succeed())
				g.Expect([]string{cur.Status.Phase, cur.Status.OwnershipState}).To(
					Equal([]string{fleetv1alpha1.PhaseActive, fleetv1alpha1.OwnershipLive}), wr.Name)
			}
		}).Should(Succeed())

		By(fmt.Sprintf("registering %d dead rows (exited processes, heartbeat an hour old) and one more that will revive", deadRows))
		dead := make([]*fleetv1alpha1.WorkerRegistration, 0, deadRows)
		for i := range deadRows {
			dead = append(dead, eligible(ns, fmt.Sprintf("dead-%02d", i+1)))
		}
		reviving := eligible(ns, "dead-revives")
		moving := dead[deadRows-1] // its heartbeat moves, but it stays a candidate

		By("planning before a dead row revives (the plan a CandidateSet approval will find moved)")
		beforeRevival := createPlan(ns)
		Expect(beforeRevival.Status.CandidateWorkerIdentities).To(Equal(append(names(dead), reviving.Name)))
		Expect(beforeRevival.Status.PreservedReasonCounts).To(HaveKeyWithValue("worker_live", BeEquivalentTo(liveWorkers)))

		By("reviving a dead row: its heartbeat is renewed like a live worker's")
		hb.Beat(reviving)
		Eventually(func(g Gomega) {
			cur := get(reviving)
			g.Expect(cur.Status.LastHeartbeatAt).NotTo(BeNil())
			g.Expect(time.Since(cur.Status.LastHeartbeatAt.Time)).To(BeNumerically("<", 10*time.Second))
		}).Should(Succeed())

		By("planning before a dead row changes a fingerprint field but stays a candidate")
		beforeChange := createPlan(ns)
		Expect(beforeChange.Status.CandidateWorkerIdentities).To(Equal(names(dead)))
		heartbeat(moving, 2*hour) // an older heartbeat: still expired, still eligible
		Expect(get(moving).Status.OwnershipState).To(Equal(fleetv1alpha1.OwnershipStale))

		By("planning the plans the two bindings approve")
		candidateSet, registry := createPlan(ns), createPlan(ns)
		for _, p := range []*fleetv1alpha1.RetirementPlan{candidateSet, registry} {
			Expect(p.Status.CandidateWorkerIdentities).To(Equal(names(dead)))
			Expect(p.Status.CandidateFingerprint).To(Equal(candidateSet.Status.CandidateFingerprint))
			Expect(reasonOf(p.Status.Preserved, reviving.Name)).NotTo(BeEmpty(), "the revived row is no candidate")
		}
		Expect(candidateSet.Status.CandidateFingerprint).NotTo(Equal(beforeChange.Status.CandidateFingerprint))

		plannedAt := registry.Status.PlannedAt.Time
		renewalsAtPlan, countedFrom := hb.renewals.Load(), time.Now()
		By(fmt.Sprintf("waiting until %s after the plans while the fleet heartbeats", approvalLandsFrom))
		time.Sleep(time.Until(plannedAt.Add(approvalLandsFrom + time.Second)))
		// Counted over the wait itself (the plans took a while, so it is shorter than
		// approvalLandsFrom): at least half the renewals the workers' slowest pace gives.
		renewalsDuringWait, counted := hb.renewals.Load()-renewalsAtPlan, time.Since(countedFrom)
		Expect(renewalsDuringWait).To(BeNumerically(">=", int64(liveWorkers)*int64(counted/(heartbeatMin+heartbeatJitter))/2),
			"the live workers kept heartbeating (%d renewals in %s)", renewalsDuringWait, counted)

		By("approving the Registry-bound plan: the heartbeats moved the registry")
		Expect(approveBound(gitops(), registry, fleetv1alpha1.ApprovalBindingRegistry)).To(Succeed())
		registry = waitOutcome(registry, fleetv1alpha1.OutcomeRegistryRevisionMoved)
		expectApprovalOutdated(registry)
		Expect(registry.Status.RetiredCount).To(BeZero())
		Expect(registry.Status.MutationPerformed).To(BeFalse())
		expectActive(live...)
		expectActive(dead...)

		for _, moved := range []*fleetv1alpha1.RetirementPlan{beforeRevival, beforeChange} {
			By("approving a CandidateSet-bound plan made before an approved dead row changed: " + moved.Name)
			Expect(approveBound(gitops(), moved, fleetv1alpha1.ApprovalBindingCandidateSet)).To(Succeed())
			moved = waitOutcome(moved, fleetv1alpha1.OutcomeCandidateSetMoved)
			expectApprovalOutdated(moved)
			Expect(moved.Status.RetiredCount).To(BeZero())
			Expect(moved.Status.MutationPerformed).To(BeFalse())
			expectReadiness(moved, "False", "True", fleetv1alpha1.ReasonApplyRefused)
			expectActive(live...)
			expectActive(dead...)
			expectActive(reviving)
		}

		By("approving the plan with its candidate tokens alone, binding left out: that is CandidateSet, and the live workers' heartbeats do not void it")
		Expect(approveBound(gitops(), candidateSet, "")).To(Succeed())
		candidateSet = waitOutcome(candidateSet, fleetv1alpha1.OutcomeApplied)
		Expect(candidateSet.Spec.Approval.Binding).To(BeEmpty())
		Expect(meta.FindStatusCondition(candidateSet.Status.Conditions, fleetv1alpha1.ApprovedCondition).Message).To(ContainSubstring("binding CandidateSet"))
		appliedAfter := candidateSet.Status.AppliedAt.Sub(candidateSet.Status.PlannedAt.Time)
		Expect(appliedAfter).To(BeNumerically(">=", approvalLandsFrom))
		expectApproved(candidateSet)
		Expect(candidateSet.Status.Retired).To(Equal(names(dead)), "exactly the dead rows")
		Expect(candidateSet.Status.RetiredCount).To(BeEquivalentTo(deadRows))
		Expect(candidateSet.Status.ApplyPreserved).To(BeEmpty())
		Expect(candidateSet.Status.ApplyComplete).To(HaveValue(BeTrue()))
		expectReadiness(candidateSet, "True", "", fleetv1alpha1.ReasonApplySucceeded)
		expectApplied(candidateSet, metav1.ConditionTrue, fleetv1alpha1.ReasonApplySucceeded)
		for _, wr := range dead {
			cur := get(wr)
			Expect(cur.Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired), wr.Name)
			Expect(cur.Status.RetiredBy).To(Equal(ns + "/" + candidateSet.Name))
		}
		Expect(candidateSet.Status.PostApply).NotTo(BeNil())
		Expect(candidateSet.Status.PostApply.HistoricalWorkerCount).To(BeEquivalentTo(deadRows))

		By("nothing live was ever retired")
		expectActive(live...)
		expectActive(reviving)
		hb.Stop()
		Expect(hb.Retired()).To(BeEmpty(), "a heartbeating worker found its registration Retired")
		expectActive(live...)

		AddReportEntry("live fleet", fmt.Sprintf(
			"%d live workers + 1 revived row heartbeating every %s–%s (%d renewals in the %s wait); %d dead rows; "+
				"Registry approval: %s; CandidateSet approvals of the plans before the revival / the changed heartbeat: %s / %s; "+
				"CandidateSet approval applied %s after its plan: %s, %d retired",
			liveWorkers, heartbeatMin, heartbeatMin+heartbeatJitter, renewalsDuringWait, approvalLandsFrom, deadRows,
			registry.Status.Outcome, getPlan(beforeRevival).Status.Outcome, getPlan(beforeChange).Status.Outcome,
			appliedAfter.Round(time.Second), candidateSet.Status.Outcome, candidateSet.Status.RetiredCount))
	})
})
