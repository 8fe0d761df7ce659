package claim

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// world is an in-memory stand-in for the two stores a claim writes: the
// per-target Lease (resourceVersion compare-and-swap) and the Gitea issue
// body holding the claim record (content_version compare-and-swap).
type world struct {
	mu             sync.Mutex
	base           TargetState
	leaseRV        int // 0: the Lease does not exist
	leaseHolder    string
	record         *Record
	contentVersion int
}

func newWorld(base TargetState) *world { return &world{base: base, leaseRV: 100, contentVersion: 1} }

// read is an inspection: a consistent snapshot of everything a decision needs.
func (w *world) read() (TargetState, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.base
	st.LeaseHolder = w.leaseHolder
	if w.leaseRV > 0 {
		st.LeaseGeneration = strconv.Itoa(w.leaseRV)
	}
	if w.record != nil {
		rec := *w.record
		st.ClaimRecord = &rec
	}
	return st, w.contentVersion
}

// casLease updates the Lease only if it is still at expected.
func (w *world) casLease(expected, holder string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	current := ""
	if w.leaseRV > 0 {
		current = strconv.Itoa(w.leaseRV)
	}
	if current != expected {
		return false
	}
	w.leaseRV++
	w.leaseHolder = holder
	return true
}

// publish writes the claim record only if the body is still at version cv.
func (w *world) publish(cv int, rec Record) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cv != w.contentVersion {
		return false
	}
	w.contentVersion++
	w.record = &rec
	return true
}

// contender runs one worker through validate → claim → CAS → publish →
// read back → activate, and returns the final result.
type contender struct {
	worker  Worker
	claimID string
	v       Validation
}

func (c contender) validate(t *testing.T, w *world, requested Target) contender {
	st, _ := w.read()
	in := fxValidateInput(c.worker, requested, st)
	in.ClaimID = c.claimID
	c.v = mustValidate(t, in)
	return c
}

func (c contender) claim(w *world, requested Target, now time.Time, pause func()) (*Capability, Result) {
	fresh, cv := w.read()
	acq, r := DecideClaim(ClaimInput{
		Worker: c.worker, ClaimID: c.claimID, Spec: requested, PinnedValue: c.v.Pin, Validated: c.v,
		Fresh: fresh, ControllerRepository: fxRepo, CapabilityVerdict: VerdictAllowed, Now: now,
	})
	if r.Refused() {
		return nil, r
	}
	pause()
	if !acq.AlreadyHeld {
		if ok := w.casLease(acq.ExpectedGeneration, c.claimID); !ok {
			return nil, ContentionLoss(PredicateLeaseCASConflict, requested)
		}
	}
	pause()
	rec := Record{ClaimID: c.claimID, Worker: c.worker.Name, Identity: c.worker.Identity,
		ExpiresAt: now.Add(time.Hour), State: RecordStateActive}
	if !w.publish(cv, rec) {
		return nil, ContentionLoss(PredicateContentVersionConflict, requested)
	}
	back, _ := w.read()
	return Activate(ActivateInput{
		Validation: acq.Validation, ClaimID: c.claimID, LeaseName: "lease-target",
		LeaseGeneration: back.LeaseGeneration, LeaseHolder: back.LeaseHolder, Record: back.ClaimRecord, Now: now,
	})
}

func contenders(t *testing.T, w *world, n int, requested Target) []contender {
	out := make([]contender, n)
	for i := range out {
		c := contender{worker: fxWorker(fmt.Sprintf("w%d", i), fmt.Sprintf("user%d", i)), claimID: fmt.Sprintf("claim-%d", i)}
		out[i] = c.validate(t, w, requested)
	}
	return out
}

// assertOneWinner: exactly one acquired capability; every loser holds a
// typed contention result that names only the requested target.
func assertOneWinner(t *testing.T, caps []*Capability, results []Result, requested Target) {
	t.Helper()
	winners := 0
	for i, r := range results {
		switch r.Outcome {
		case OutcomeAcquired:
			winners++
			if caps[i] == nil {
				t.Fatalf("contender %d acquired without a capability", i)
			}
		case OutcomeNotAcquired:
			if caps[i] != nil {
				t.Fatalf("loser %d holds a capability", i)
			}
			if r.Class != ClassContention || !r.ContentionIsNormal || !r.ReassessFromFreshState || r.RetryPermitted {
				t.Fatalf("loser %d result: %+v", i, r)
			}
			assertTypedLoss(t, r, requested)
		default:
			t.Fatalf("contender %d: unexpected %+v", i, r)
		}
	}
	if winners != 1 {
		t.Fatalf("%d winners, want exactly 1: %+v", winners, results)
	}
}

func runContention(t *testing.T, n int, requested Target, base TargetState) {
	w := newWorld(base)
	cs := contenders(t, w, n, requested)
	caps := make([]*Capability, n)
	results := make([]Result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			caps[i], results[i] = c.claim(w, requested, fxNow.Add(time.Minute), func() {})
		}()
	}
	close(start)
	wg.Wait()
	assertOneWinner(t, caps, results, requested)
}

// TestTwoWorkerContention and TestFourWorkerContention: concurrent claims on
// one validated target yield exactly one winner; each loser gets a typed
// reassess-from-fresh-state result, never a retry.
func TestTwoWorkerContention(t *testing.T) {
	for i := range 200 {
		t.Run(strconv.Itoa(i), func(t *testing.T) { runContention(t, 2, fxIssue(), fxIssueState()) })
	}
}

func TestFourWorkerContention(t *testing.T) {
	for i := range 200 {
		requested, base := fxIssue(), fxIssueState()
		if i%2 == 1 {
			base = fxPRState()
			base.Author, base.Pushers = "zed", []string{"zed"}
			requested = fxPR()
		}
		t.Run(strconv.Itoa(i), func(t *testing.T) { runContention(t, 4, requested, base) })
	}
}

// TestContentionInterleavings pins down each deterministic interleaving of
// two claims and the predicate the loser reports.
func TestContentionInterleavings(t *testing.T) {
	now := fxNow.Add(time.Minute)
	t.Run("winner finishes before the loser reads", func(t *testing.T) {
		w := newWorld(fxIssueState())
		cs := contenders(t, w, 2, fxIssue())
		capA, rA := cs[0].claim(w, fxIssue(), now, func() {})
		capB, rB := cs[1].claim(w, fxIssue(), now, func() {})
		assertOneWinner(t, []*Capability{capA, capB}, []Result{rA, rB}, fxIssue())
		if rB.FailedPredicate != "claim_record_foreign" {
			t.Fatalf("loser predicate %s", rB.FailedPredicate)
		}
	})
	t.Run("both decide, then both swap the Lease", func(t *testing.T) {
		w := newWorld(fxIssueState())
		cs := contenders(t, w, 2, fxIssue())
		var capB *Capability
		var rB Result
		// B decides and swaps while A is paused between its decision and its swap.
		capA, rA := cs[0].claim(w, fxIssue(), now, func() {
			if capB == nil && rB.Outcome == "" {
				capB, rB = cs[1].claim(w, fxIssue(), now, func() {})
			}
		})
		assertOneWinner(t, []*Capability{capA, capB}, []Result{rA, rB}, fxIssue())
		if rA.FailedPredicate != "lease_cas_conflict" {
			t.Fatalf("loser predicate %s", rA.FailedPredicate)
		}
	})
	t.Run("Lease taken between validation and claim", func(t *testing.T) {
		w := newWorld(fxIssueState())
		cs := contenders(t, w, 2, fxIssue())
		if ok := w.casLease("100", "claim-1"); !ok {
			t.Fatal("setup swap failed")
		}
		_, rA := cs[0].claim(w, fxIssue(), now, func() {})
		if rA.FailedPredicate != "lease_held_foreign" || rA.Class != ClassContention {
			t.Fatalf("loser %+v", rA)
		}
	})
	t.Run("Lease moved and freed between validation and claim", func(t *testing.T) {
		w := newWorld(fxIssueState())
		cs := contenders(t, w, 1, fxIssue())
		w.casLease("100", "someone")
		w.casLease("101", "")
		_, r := cs[0].claim(w, fxIssue(), now, func() {})
		if r.FailedPredicate != "claim_generation_advanced" || r.Class != ClassContention {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("record race lost after winning the Lease", func(t *testing.T) {
		w := newWorld(fxIssueState())
		cs := contenders(t, w, 1, fxIssue())
		cap0, r := cs[0].claim(w, fxIssue(), now, func() {
			// Someone writes the issue body between our read and our guarded write.
			w.mu.Lock()
			w.contentVersion++
			w.mu.Unlock()
		})
		if cap0 != nil || r.FailedPredicate != "content_version_conflict" {
			t.Fatalf("%+v %+v", cap0, r)
		}
	})
}
