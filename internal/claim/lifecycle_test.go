package claim

import (
	"github.com/giteatools/fleet-controller/internal/fleet"

	"testing"
	"time"
)

func TestCheckActive(t *testing.T) {
	type env struct {
		c                   Capability
		now                 time.Time
		st                  TargetState
		w                   Worker
		verdict             string
		released, completed bool
	}
	setup := func(t *testing.T, in ValidateInput) env {
		return env{c: fxCapability(t, in), now: in.Now.Add(time.Minute), st: fxActiveState(in), w: in.Worker, verdict: VerdictAllowed}
	}
	tests := []struct {
		name string
		in   func() ValidateInput
		mut  func(*env)
		want Trigger
	}{
		{"stands", prIn, func(*env) {}, ""},
		{"issue stands", issueIn, func(*env) {}, ""},
		{"issue survives base-branch movement", issueIn, func(e *env) { e.st.ParityRevision = "abc1234" }, ""},
		{"released", prIn, func(e *env) { e.released = true }, TriggerRelease},
		{"release wins over everything", prIn, func(e *env) { e.released, e.completed, e.now = true, true, e.c.ExpiresAt }, TriggerRelease},
		{"cycle complete", prIn, func(e *env) { e.completed = true }, ExpiryCycleComplete},
		{"merged by this merger is completion", func() ValidateInput {
			return fxValidateInput(fxWorker("w1", "carol"), fxPR(), prStateFor(RoleMerger))
		}, func(e *env) { e.completed, e.st.State, e.st.Merged = true, StateClosed, true }, ExpiryCycleComplete},
		{"verdict lost", prIn, func(e *env) { e.verdict = "denied" }, TriggerFailedValidation},
		{"verdict unknown", issueIn, func(e *env) { e.verdict = "" }, TriggerFailedValidation},
		{"ownership before verdict", prIn, func(e *env) { e.verdict, e.st.LeaseHolder = "denied", "" }, TriggerOwnershipLoss},
		{"verdict loss before completion", reviewerIn, func(e *env) {
			e.verdict = "denied"
			e.st.Reviews, e.st.Reviewed = []Review{{ID: 1, Reviewer: "carol", State: ReviewComment, CommitID: fxHead}}, true
		}, TriggerFailedValidation},
		{"expired", prIn, func(e *env) { e.now = e.c.ExpiresAt }, ExpiryExpired},
		{"expired beyond", prIn, func(e *env) { e.now = e.c.ExpiresAt.Add(time.Hour) }, ExpiryExpired},
		{"no expiry set", prIn, func(e *env) { e.c.ExpiresAt = time.Time{} }, ExpiryExpired},
		{"blocking dependency added", issueIn, func(e *env) {
			e.st.Dependencies = append(e.st.Dependencies, DependencyEdge{Repository: fxRepo, Number: 8, State: StateOpen})
		}, TriggerBlock},
		{"dependency reopened", issueIn, func(e *env) {
			e.st.Dependencies = []DependencyEdge{{Repository: fxRepo, Number: 7, State: StateOpen}}
		}, TriggerBlock},
		{"blocked label", prIn, func(e *env) { e.st.Labels = []string{"BLOCKED"} }, TriggerBlock},
		{"role re-derived differently", prIn, func(e *env) { e.st.Approved = true }, TriggerFailedValidation},
		{"closed by someone else", prIn, func(e *env) { e.st.State = StateClosed }, TriggerFailedValidation},
		{"independence now fails", prIn, func(e *env) { e.st.Pushers = append(e.st.Pushers, "Carol") }, TriggerFailedValidation},
		{"author unknown now", prIn, func(e *env) { e.st.Author = "" }, TriggerFailedValidation},
		{"head moved", prIn, func(e *env) { e.st.Target.HeadSHA = fxOtherHead }, TriggerStaleState},
		{"parity moved", prIn, func(e *env) { e.st.ParityRevision = "abc1234" }, TriggerStaleState},
		{"parity not carried", prIn, func(e *env) { e.c.ParityRevision = "" }, TriggerStaleState},
		{"state read of another item", prIn, func(e *env) { e.st.Target.Number = 58 }, TriggerStaleState},
		{"state unknown", issueIn, func(e *env) { e.st.State = "" }, TriggerStaleState},
		{"record gone", prIn, func(e *env) { e.st.ClaimRecord = nil }, TriggerOwnershipLoss},
		{"record replaced", prIn, func(e *env) { e.st.ClaimRecord = foreignRecord() }, TriggerOwnershipLoss},
		{"record released in Gitea", prIn, func(e *env) { e.st.ClaimRecord.State = RecordStateReleased }, TriggerOwnershipLoss},
		{"record expired in Gitea", prIn, func(e *env) { e.st.ClaimRecord.ExpiresAt = e.now }, TriggerOwnershipLoss},
		{"lease holder changed", prIn, func(e *env) { e.st.LeaseHolder = "rival-claim-9191" }, TriggerOwnershipLoss},
		{"lease released", prIn, func(e *env) { e.st.LeaseHolder = "" }, TriggerOwnershipLoss},
		{"lease generation moved", prIn, func(e *env) { e.st.LeaseGeneration = "302" }, TriggerOwnershipLoss},
		{"assigned to someone else", issueIn, func(e *env) { e.st.Assignees = []string{"rivalperson"} }, TriggerOwnershipLoss},
		{"worker retired", prIn, func(e *env) { e.w.Phase = fleet.Retired }, TriggerOwnershipLoss},
		{"worker stale", prIn, func(e *env) { e.w.OwnershipState = fleet.Stale }, TriggerOwnershipLoss},
		{"worker identity changed", prIn, func(e *env) { e.w.Identity = "dave" }, TriggerOwnershipLoss},
		{"other worker", prIn, func(e *env) { e.w.Name = "w2" }, TriggerOwnershipLoss},
		{"ownership before staleness", prIn, func(e *env) {
			e.st.LeaseHolder, e.st.Target.HeadSHA = "", fxOtherHead
		}, TriggerOwnershipLoss},
		{"staleness before block", prIn, func(e *env) {
			e.st.Target.HeadSHA, e.st.Labels = fxOtherHead, []string{LabelBlocked}
		}, TriggerStaleState},
		{"block before failed validation", prIn, func(e *env) {
			e.st.Labels, e.st.Approved = []string{LabelBlocked}, true
		}, TriggerBlock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, tt.in())
			tt.mut(&e)
			trigger, ends := CheckActive(ActiveInput{Capability: e.c, Now: e.now, Fresh: e.st, Worker: e.w,
				Verdict: e.verdict, Released: e.released, CycleComplete: e.completed})
			if trigger != tt.want || ends != (tt.want != "") {
				t.Fatalf("CheckActive = %q %v, want %q", trigger, ends, tt.want)
			}
			if tt.want != "" && trigger.Revocation() == (trigger == ExpiryExpired || trigger == ExpiryCycleComplete || trigger == ExpiryWorkDone) {
				t.Fatalf("trigger %q is not exactly one of revocation or expiry", trigger)
			}
		})
	}
}

func TestTriggerPartition(t *testing.T) {
	for _, tr := range []Trigger{TriggerRelease, TriggerBlock, TriggerFailedValidation, TriggerStaleState, TriggerOwnershipLoss} {
		if !tr.Revocation() {
			t.Errorf("%s should be a revocation", tr)
		}
		if p := EndPhase(tr); p != PhaseRevoked && p != PhaseReleased {
			t.Errorf("revocation %s ends %s", tr, p)
		}
	}
	for _, tr := range []Trigger{ExpiryExpired, ExpiryCycleComplete, ExpiryWorkDone} {
		if tr.Revocation() {
			t.Errorf("%s should be an expiry, not a revocation", tr)
		}
		if p := EndPhase(tr); p != PhaseExpired && p != PhaseCompleted {
			t.Errorf("expiry %s ends %s", tr, p)
		}
	}
	if Trigger("").Revocation() {
		t.Error("empty trigger classified")
	}
}

// TestReturnToNeutral: after release or completion the capability is gone;
// the worker, now neutral, holds nothing, can inspect and validate again,
// and its ended record no longer counts as a claim on the target.
func TestReturnToNeutral(t *testing.T) {
	for _, end := range []struct {
		name                string
		released, completed bool
		recordState         RecordState
	}{
		{"release", true, false, RecordStateReleased},
		{"completion", false, true, RecordStateCompleted},
	} {
		t.Run(end.name, func(t *testing.T) {
			in := issueIn()
			c := fxCapability(t, in)
			st := fxActiveState(in)
			trigger, ends := CheckActive(ActiveInput{Capability: c, Now: in.Now, Fresh: st, Worker: in.Worker,
				Verdict: VerdictAllowed, Released: end.released, CycleComplete: end.completed})
			if !ends || trigger == "" {
				t.Fatal("capability did not end")
			}
			// The reconciler drops the capability: the worker is neutral.
			var held *Capability
			q := Query{Worker: "w1", Repository: fxRepo, Target: fxIssue(), Operation: OpPushBranch, Now: in.Now}
			if ok, reason := Authorize(held, false, q); ok || reason != ReasonNoCapability {
				t.Fatalf("neutral worker allowed: %s", reason)
			}
			// The old capability, should anyone still hold a copy, is refused as revoked.
			if ok, reason := Authorize(&c, true, q); ok || reason != ReasonRevoked {
				t.Fatalf("ended capability allowed: %s", reason)
			}
			// Ended record and a released Lease: a new validation by anyone succeeds.
			st.ClaimRecord.State = end.recordState
			st.LeaseHolder = ""
			other := fxValidateInput(fxWorker("w2", "erin"), fxIssue(), st)
			other.ClaimID = "claim-uid-next"
			if _, r := Validate(other); r.Outcome != OutcomeValidated {
				t.Fatalf("target still claimed after %s: %+v", end.name, r)
			}
		})
	}
}

func TestEndsUnread(t *testing.T) {
	now := time.Date(2026, 7, 31, 12, 0, 0, 0, time.UTC)
	later := now.Add(time.Minute)
	tests := []struct {
		name               string
		released, complete bool
		expires            time.Time
		want               Trigger
	}{
		{"released", true, false, later, TriggerRelease},
		{"released and complete: release first", true, true, later, TriggerRelease},
		{"cycle complete", false, true, later, ExpiryCycleComplete},
		{"expired", false, false, now, ExpiryExpired},
		{"no expiry known", false, false, time.Time{}, ExpiryExpired},
		{"stands", false, false, later, ""},
	}
	for _, tt := range tests {
		got, ends := EndsUnread(tt.released, tt.complete, tt.expires, now)
		if got != tt.want || ends != (tt.want != "") {
			t.Errorf("%s: EndsUnread = %q, %v", tt.name, got, ends)
		}
	}
}
