package retirement

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDecideApplier(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	held := func(applier string, renewedAgo time.Duration) Progress {
		return Progress{State: ApplyInProgress, Applier: applier, StartedAt: now.Add(-time.Hour), RenewedAt: now.Add(-renewedAgo)}
	}
	tests := []struct {
		name    string
		p       Progress
		me      string
		timeout time.Duration
		action  string
		after   time.Duration
	}{
		{"no apply started: start", Progress{}, "b", time.Minute, ApplierStart, 0},
		{"finished: done", Progress{State: ApplyFinished, Applier: "a", RenewedAt: now.Add(-time.Hour)}, "b", time.Minute, ApplierDone, 0},
		{"finished by me: done", Progress{State: ApplyFinished, Applier: "b"}, "b", time.Minute, ApplierDone, 0},
		{"held by another, fresh: wait the remaining time", held("a", 20*time.Second), "b", time.Minute, ApplierWait, 40 * time.Second},
		{"held by another, renewed just now: wait the whole timeout", held("a", 0), "b", time.Minute, ApplierWait, time.Minute},
		{"held by another, one instant before the timeout: wait", held("a", time.Minute-time.Millisecond), "b", time.Minute, ApplierWait, time.Millisecond},
		{"held by another, exactly at the timeout: take over", held("a", time.Minute), "b", time.Minute, ApplierTakeOver, 0},
		{"held by another, stale: take over", held("a", time.Hour), "b", time.Minute, ApplierTakeOver, 0},
		{"held by an earlier attempt of mine, fresh: wait like anyone", held("b", 10*time.Second), "b", time.Minute, ApplierWait, 50 * time.Second},
		{"held by an earlier incarnation of mine, stale: take over", held("b", 2*time.Minute), "b", time.Minute, ApplierTakeOver, 0},
		{"held by an unnamed applier, stale: take over", held("", 2*time.Minute), "b", time.Minute, ApplierTakeOver, 0},
		{"renewal stamped ahead of my clock: wait at most one timeout", held("a", -10*time.Minute), "b", time.Minute, ApplierWait, time.Minute},
		{"zero timeout means the default", held("a", 30*time.Second), "b", 0, ApplierWait, DefaultTakeoverTimeout - 30*time.Second},
		{"zero timeout, stale beyond the default: take over", held("a", DefaultTakeoverTimeout), "b", 0, ApplierTakeOver, 0},
		{"unknown state fails closed as a hold", Progress{State: "Paused", Applier: "a", RenewedAt: now}, "b", time.Minute, ApplierWait, time.Minute},
		{"short test timeout", held("a", 3*time.Second), "b", 2 * time.Second, ApplierTakeOver, 0},
	}
	for _, tt := range tests {
		d := DecideApplier(tt.p, tt.me, now, tt.timeout)
		if d.Action != tt.action || d.After != tt.after {
			t.Errorf("%s: DecideApplier = %s after %s, want %s after %s (%s)", tt.name, d.Action, d.After, tt.action, tt.after, d.Detail)
		}
		if d.Detail == "" {
			t.Errorf("%s: no detail", tt.name)
		}
	}
}

func TestRenewCadence(t *testing.T) {
	tests := []struct {
		base    Recheck
		timeout time.Duration
		want    Recheck
	}{
		{DefaultApproverRecheck, DefaultTakeoverTimeout, DefaultApproverRecheck},
		{DefaultApproverRecheck, 0, DefaultApproverRecheck},
		{DefaultApproverRecheck, 3 * time.Second, Recheck{Rows: 100, Interval: time.Second}},
		{Recheck{Rows: 1}, time.Minute, Recheck{Rows: 1, Interval: 20 * time.Second}},
		{Recheck{Interval: time.Hour}, time.Minute, Recheck{Interval: 20 * time.Second}},
	}
	for _, tt := range tests {
		if got := RenewCadence(tt.base, tt.timeout); got != tt.want {
			t.Errorf("RenewCadence(%+v, %s) = %+v, want %+v", tt.base, tt.timeout, got, tt.want)
		}
	}
}

func TestCompleteInterrupted(t *testing.T) {
	started := time.Date(2026, 12, 1, 10, 0, 0, 500_000_000, time.UTC) // stored as 10:00:00
	const ref = "ns/plan"
	at := func(d time.Duration) string { return started.Add(d).UTC().Format(time.RFC3339) }
	retiredRow := func(name, by, when string) Row {
		return Row{Name: name, Phase: "Retired", OwnershipState: "historical", RetiredBy: by, RetiredAt: when}
	}
	active := func(name string) Row { return Row{Name: name, Phase: "Active", OwnershipState: "stale"} }
	progress := func(intended ...string) Progress {
		return Progress{State: ApplyInProgress, Applier: "host-a-x1", StartedAt: started, RenewedAt: started.Add(5 * time.Second), Intended: intended}
	}
	type want struct {
		outcome   string
		retired   []string
		preserved map[string]string // identity -> reason code
		mutation  bool
	}
	tests := []struct {
		name string
		in   Interrupted
		want want
	}{
		{"crash after two of five writes",
			Interrupted{Progress: progress("a", "b", "c", "d", "e"), Requested: []string{"a", "b", "c", "d", "e"}, PlanRef: ref,
				Rows: []Row{retiredRow("a", ref, at(time.Second)), retiredRow("b", ref, at(2*time.Second)), active("c"), active("d"), active("e")}},
			want{OutcomeApplied, []string{"a", "b"}, map[string]string{"c": ReasonApplyInterrupted, "d": ReasonApplyInterrupted, "e": ReasonApplyInterrupted}, true}},
		{"lost final write: every row written",
			Interrupted{Progress: progress("a", "b"), Requested: []string{"b", "a"}, PlanRef: ref,
				Rows: []Row{retiredRow("a", ref, at(0)), retiredRow("b", ref, at(time.Second))}},
			want{OutcomeApplied, []string{"a", "b"}, map[string]string{}, true}},
		{"crash before the first write: nothing retired",
			Interrupted{Progress: progress("a", "b"), Requested: []string{"a", "b"}, PlanRef: ref, Rows: []Row{active("a"), active("b")}},
			want{OutcomeTransactionFailed, nil, map[string]string{"a": ReasonApplyInterrupted, "b": ReasonApplyInterrupted}, false}},
		{"retired in the same second the intent was recorded counts (whole seconds)",
			Interrupted{Progress: progress("a"), Requested: []string{"a"}, PlanRef: ref,
				Rows: []Row{retiredRow("a", ref, started.Truncate(time.Second).Format(time.RFC3339))}},
			want{OutcomeApplied, []string{"a"}, map[string]string{}, true}},
		{"retired by another plan does not count",
			Interrupted{Progress: progress("a", "b"), Requested: []string{"a", "b"}, PlanRef: ref,
				Rows: []Row{retiredRow("a", "ns/other", at(time.Second)), retiredRow("b", ref, at(time.Second))}},
			want{OutcomeApplied, []string{"b"}, map[string]string{"a": ReasonApplyInterrupted}, true}},
		{"retired by an earlier plan of the same name does not count",
			Interrupted{Progress: progress("a"), Requested: []string{"a"}, PlanRef: ref, Rows: []Row{retiredRow("a", ref, at(-time.Hour))}},
			want{OutcomeTransactionFailed, nil, map[string]string{"a": ReasonApplyInterrupted}, false}},
		{"an unreadable retiredAt does not count",
			Interrupted{Progress: progress("a"), Requested: []string{"a"}, PlanRef: ref, Rows: []Row{retiredRow("a", ref, "yesterday")}},
			want{OutcomeTransactionFailed, nil, map[string]string{"a": ReasonApplyInterrupted}, false}},
		{"a deleted row does not count",
			Interrupted{Progress: progress("a", "b"), Requested: []string{"a", "b"}, PlanRef: ref, Rows: []Row{retiredRow("b", ref, at(0))}},
			want{OutcomeApplied, []string{"b"}, map[string]string{"a": ReasonApplyInterrupted}, true}},
		{"a retired row the apply never intended is not claimed; a requested row it did not intend is not_in_candidate_set",
			Interrupted{Progress: progress("a"), Requested: []string{"a", "z"}, PlanRef: ref,
				Rows: []Row{retiredRow("a", ref, at(0)), retiredRow("z", ref, at(0)), retiredRow("y", ref, at(0))}},
			want{OutcomeApplied, []string{"a"}, map[string]string{"z": ReasonNotInCandidateSet}, true}},
	}
	for _, tt := range tests {
		rep := CompleteInterrupted(tt.in)
		got := map[string]string{}
		for _, p := range rep.Preserved {
			got[p.WorkerIdentity] = p.ReasonCode
			if p.Detail == "" {
				t.Errorf("%s: preserved %s has no detail", tt.name, p.WorkerIdentity)
			}
			if p.ReasonCode == ReasonApplyInterrupted && !strings.Contains(p.Detail, "new plan") {
				t.Errorf("%s: preserved %s does not say a new plan retires it: %q", tt.name, p.WorkerIdentity, p.Detail)
			}
		}
		if rep.Outcome != tt.want.outcome || !slices.Equal(rep.Retired, tt.want.retired) || rep.RetiredCount != len(tt.want.retired) ||
			len(got) != len(tt.want.preserved) || rep.MutationPerformed != tt.want.mutation {
			t.Errorf("%s: report = %s retired %v (%d) preserved %v mutation %v; want %s retired %v preserved %v mutation %v", tt.name,
				rep.Outcome, rep.Retired, rep.RetiredCount, got, rep.MutationPerformed, tt.want.outcome, tt.want.retired, tt.want.preserved, tt.want.mutation)
		}
		for id, reason := range tt.want.preserved {
			if got[id] != reason {
				t.Errorf("%s: %s preserved as %q, want %q", tt.name, id, got[id], reason)
			}
		}
		if !rep.Interrupted || !rep.Recovered {
			t.Errorf("%s: a completed report must be Interrupted and Recovered", tt.name)
		}
		v := JudgeApply(rep)
		if v.Success || v.Succeeded || v.Applied || v.Complete == nil || *v.Complete || v.Reason != ConditionApplyInterrupted {
			t.Errorf("%s: verdict %+v: an interrupted apply is never a success nor complete", tt.name, v)
		}
		if !slices.IsSorted(rep.Retired) {
			t.Errorf("%s: retired not sorted: %v", tt.name, rep.Retired)
		}
	}
}
