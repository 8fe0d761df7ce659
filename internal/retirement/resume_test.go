package retirement

import (
	"reflect"
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

func TestDecideResume(t *testing.T) {
	started := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	const ref = "ns/plan"
	at := started.Add(time.Second).Format(time.RFC3339)
	retiredRow := func(name string) Row {
		return Row{Name: name, Phase: "Retired", OwnershipState: "historical", RetiredBy: ref, RetiredAt: at}
	}
	active := func(name string) Row { return Row{Name: name, Phase: "Active", OwnershipState: "stale"} }
	fps := map[string]string{}
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		fps[id] = RowFingerprint(active(id))
	}
	progress := Progress{State: ApplyInProgress, Applier: "host-a-x1", StartedAt: started, RenewedAt: started.Add(5 * time.Second),
		Intended:             []string{"a", "b", "c", "d", "e", "f"},
		IntendedVersions:     map[string]string{"a": "10", "b": "11", "c": "12", "d": "13", "e": "14", "f": "15"},
		IntendedFingerprints: fps}
	fresh := Plan{
		Candidates: []Assessment{{WorkerIdentity: "c"}, {WorkerIdentity: "d"}, {WorkerIdentity: "f"}},
		Preserved:  []Assessment{{WorkerIdentity: "e", ReasonCode: ReasonPIDAlive, Detail: "pid 7 answers", Evidence: map[string]string{"pid": "7"}}},
	}
	changed := active("d")
	changed.LastHeartbeatAt = "2026-12-01T08:00:00Z"
	// a retired by the first applier (its resourceVersion moved with that write), b
	// deleted, c unchanged, d changed since (its heartbeat), e unchanged but alive again,
	// f written since without a change the approval covers (a condition); z requested
	// but never intended.
	in := Resumption{
		Progress: progress, Requested: []string{"a", "b", "c", "d", "e", "f", "z"}, PlanRef: ref,
		Rows:     []Row{retiredRow("a"), active("c"), changed, active("e"), active("f")},
		Versions: map[string]string{"a": "20", "c": "12", "d": "21", "e": "14", "f": "22"},
		Fresh:    fresh,
	}
	d := DecideResume(in)
	if !d.Resumable {
		t.Fatalf("not resumable: %s", d.Detail)
	}
	if !slices.Equal(d.Retired, []string{"a"}) {
		t.Errorf("retired before = %v, want [a]", d.Retired)
	}
	var write []string
	for _, r := range d.Retire {
		write = append(write, r.Name)
	}
	if !slices.Equal(write, []string{"c", "f"}) {
		t.Errorf("to write = %v, want [c f]: only rows the approval still describes that are still candidates", write)
	}
	want := map[string]string{"b": ReasonRowChangedSincePlan, "d": ReasonRowChangedSincePlan, "e": ReasonNotInCandidateSet, "z": ReasonNotInCandidateSet}
	got := map[string]Assessment{}
	for _, a := range d.Preserved {
		got[a.WorkerIdentity] = a
		if a.Detail == "" {
			t.Errorf("%s preserved without detail", a.WorkerIdentity)
		}
	}
	if len(got) != len(want) {
		t.Errorf("preserved %v, want %v", got, want)
	}
	for id, reason := range want {
		if got[id].ReasonCode != reason {
			t.Errorf("%s preserved as %q, want %q", id, got[id].ReasonCode, reason)
		}
	}
	if ev := got["e"].Evidence; ev[EvidencePlanReasonCode] != ReasonPIDAlive || ev["pid"] != "7" {
		t.Errorf("e's evidence does not carry the fresh plan's reason: %v", ev)
	}
	if !strings.Contains(got["d"].Detail, "13") || !strings.Contains(got["d"].Detail, "21") {
		t.Errorf("d's detail does not name both resourceVersions: %q", got["d"].Detail)
	}
	if !slices.IsSortedFunc(d.Preserved, func(x, y Assessment) int { return strings.Compare(x.WorkerIdentity, y.WorkerIdentity) }) {
		t.Errorf("preserved not sorted: %v", d.Preserved)
	}

	t.Run("an intent without resourceVersions or fingerprints is not resumed", func(t *testing.T) {
		old := in
		old.Progress.IntendedVersions = map[string]string{"a": "10", "b": "11", "c": "12", "d": "13", "f": "15"}
		if d := DecideResume(old); d.Resumable || len(d.Retire) != 0 || !strings.Contains(d.Detail, `"e"`) {
			t.Errorf("resumable without e's resourceVersion: %+v", d)
		}
		old = in
		old.Progress.IntendedFingerprints = map[string]string{"a": fps["a"]}
		if d := DecideResume(old); d.Resumable || len(d.Retire) != 0 {
			t.Errorf("resumable without fingerprints: %+v", d)
		}
	})
	t.Run("a taker that may not resume completes the report from the rows", func(t *testing.T) {
		revoked := in
		revoked.NotResumed = "the approval is no longer honoured (approver lost the verb)"
		d := DecideResume(revoked)
		if d.Resumable || len(d.Retire) != 0 || d.Detail != revoked.NotResumed {
			t.Fatalf("resumed although the taker may not: %+v", d)
		}
		want := CompleteInterrupted(Interrupted{Progress: revoked.Progress, Requested: revoked.Requested, PlanRef: ref, Rows: revoked.Rows, NotResumed: revoked.NotResumed})
		if !reflect.DeepEqual(d.Report, want) {
			t.Errorf("report = %+v, want the completed one %+v", d.Report, want)
		}
		if !d.Report.Recovered || !slices.Equal(d.Report.Retired, []string{"a"}) || !strings.Contains(d.Report.Detail, "approver lost the verb") {
			t.Errorf("the completed report does not count a, or does not say why: %+v", d.Report)
		}
		old := in
		old.Progress.IntendedVersions = nil
		if d := DecideResume(old); !d.Report.Recovered || d.Report.Detail == "" {
			t.Errorf("an intent without versions completes no report: %+v", d.Report)
		}
	})
	t.Run("a row retired by another plan is not counted nor written", func(t *testing.T) {
		other := in
		other.Rows = []Row{{Name: "a", Phase: "Retired", RetiredBy: "ns/other", RetiredAt: at}, active("c"), active("d"), active("e")}
		d := DecideResume(other)
		if len(d.Retired) != 0 {
			t.Errorf("retired %v, want none", d.Retired)
		}
		for _, a := range d.Preserved {
			if a.WorkerIdentity == "a" && a.ReasonCode != ReasonRowChangedSincePlan {
				t.Errorf("a preserved as %s", a.ReasonCode)
			}
		}
	})
}

func TestSummarizeResume(t *testing.T) {
	d := ResumeDecision{Resumable: true, Retired: []string{"a", "b"},
		Preserved: []Assessment{{WorkerIdentity: "d", ReasonCode: ReasonRowChangedSincePlan, Detail: "written since"}}}
	rep := SummarizeResume(d, []string{"c", "e"}, nil, "", "host-a-x1", "host-a-y2")
	if rep.Outcome != OutcomeApplied || !slices.Equal(rep.Retired, []string{"a", "b", "c", "e"}) || rep.RetiredCount != 4 || !rep.Resumed || rep.Interrupted || rep.Recovered {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(rep.Detail, "host-a-y2 resumed the apply held by host-a-x1") || !strings.Contains(rep.Detail, "2 row(s) were retired before the takeover and 2 after") {
		t.Errorf("detail %q", rep.Detail)
	}
	v := JudgeApply(rep)
	if !v.Success || !v.Applied || v.Reason != ConditionApplyResumed || v.Complete == nil || !*v.Complete || !strings.Contains(v.Message, "resumed") {
		t.Errorf("verdict %+v", v)
	}

	stopped := SummarizeResume(d, []string{"c"}, []Assessment{{WorkerIdentity: "e", ReasonCode: ReasonApplyInterrupted, Detail: "fence moved"}}, "the workflow fence moved", "host-a-x1", "host-a-y2")
	if !stopped.Interrupted || !stopped.Resumed {
		t.Errorf("a resumption that stopped: %+v", stopped)
	}
	if v := JudgeApply(stopped); v.Success || v.Reason != ConditionApplyPartial || v.Complete == nil || *v.Complete {
		t.Errorf("a resumption that stopped reads as %+v", v)
	}
	if rep := SummarizeResume(ResumeDecision{Resumable: true}, nil, nil, "", "", "b"); !strings.Contains(rep.Detail, "an unnamed applier") {
		t.Errorf("detail %q", rep.Detail)
	}
}

func TestStandInTakeoverTimeout(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{{0, 2 * DefaultTakeoverTimeout}, {8 * time.Second, 16 * time.Second}, {-time.Second, 2 * DefaultTakeoverTimeout}} {
		if got := StandInTakeoverTimeout(tc.in); got != tc.want {
			t.Errorf("StandInTakeoverTimeout(%s) = %s, want %s", tc.in, got, tc.want)
		}
		if got := StandInTakeoverTimeout(tc.in); got <= tc.in {
			t.Errorf("the stand-in must wait longer than a returning agent: %s <= %s", got, tc.in)
		}
	}
}

func TestRowFingerprint(t *testing.T) {
	base := Row{Name: "a", Namespace: "ns", Identity: "w", Phase: "Active", OwnershipState: "stale", LastHeartbeatAt: "2026-12-01T10:00:00Z", PID: 7, HostID: "h"}
	fp := RowFingerprint(base)
	if !strings.HasPrefix(fp, "sha256:") || len(fp) != len("sha256:")+64 {
		t.Fatalf("shape %q", fp)
	}
	same := base
	same.ResourceVersion = "99"
	if RowFingerprint(same) != fp {
		t.Error("the resourceVersion changed the row fingerprint")
	}
	for name, edit := range map[string]func(*Row){
		"heartbeat": func(r *Row) { r.LastHeartbeatAt = "2026-12-01T11:00:00Z" },
		"ownership": func(r *Row) { r.OwnershipState = "live" },
		"pid":       func(r *Row) { r.PID = 8 },
		"phase":     func(r *Row) { r.Phase = "Retired" },
	} {
		r := base
		edit(&r)
		if RowFingerprint(r) == fp {
			t.Errorf("a changed %s leaves the row fingerprint as it was", name)
		}
	}
	labelled := base
	labelled.ResourceVersion = "100"
	if !RowUnchanged(fp, labelled) || RowUnchanged(fp, func() Row { r := base; r.PID = 9; return r }()) || RowUnchanged("", base) {
		t.Error("RowUnchanged does not follow the fingerprint, or accepts a missing one")
	}
	if RowFingerprint(base) == RegistryFingerprint([]Row{base}) {
		t.Error("the row fingerprint shares the registry fingerprint's domain")
	}
}
