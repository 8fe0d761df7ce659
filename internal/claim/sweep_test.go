package claim

import (
	"testing"
	"time"
)

func TestOrphanedRecords(t *testing.T) {
	now := time.Date(2026, 7, 31, 12, 0, 0, 0, time.UTC)
	rec := func(id string, state RecordState, expires time.Time) PublishedRecord {
		return PublishedRecord{Target: fxIssue(), Record: Record{ClaimID: id, State: state, ExpiresAt: expires}}
	}
	live := map[string]bool{"alive": true}
	exists := func(id string) bool { return live[id] }
	in := []PublishedRecord{
		rec("alive", RecordStateActive, now.Add(time.Hour)),        // its claim exists
		rec("gone", RecordStateActive, now.Add(time.Hour)),         // orphaned
		rec("gone-ended", RecordStateReleased, now.Add(time.Hour)), // not in force
		rec("gone-lapsed", RecordStateActive, now),                 // lapsed at its expiry
		rec("", RecordStateActive, now.Add(time.Hour)),             // no claim id: not a claim of ours
		rec("gone-unknown-state", "weird", now.Add(time.Hour)),     // unknown state counts as in force
	}
	got := OrphanedRecords(in, exists, now)
	var ids []string
	for _, p := range got {
		ids = append(ids, p.Record.ClaimID)
	}
	if len(ids) != 2 || ids[0] != "gone" || ids[1] != "gone-unknown-state" {
		t.Fatalf("OrphanedRecords = %v", ids)
	}
}

func TestLockRemovable(t *testing.T) {
	now := time.Date(2026, 7, 31, 12, 0, 0, 0, time.UTC)
	idle := time.Hour
	live := map[string]bool{"alive": true}
	exists := func(id string) bool { return live[id] }
	tests := []struct {
		name string
		l    Lock
		want bool
	}{
		{"held by an existing claim", Lock{Holder: "alive", Owners: []string{"alive"}}, false},
		{"held by a claim that is gone", Lock{Holder: "gone", Owners: []string{"gone"}}, true},
		{"held by a gone claim, owned by an existing one", Lock{Holder: "gone", Owners: []string{"alive"}}, false},
		{"held by a gone claim without owner reference", Lock{Holder: "gone"}, true},
		{"free, idle long enough", Lock{IdleSince: now.Add(-idle)}, true},
		{"free, released recently", Lock{IdleSince: now.Add(-idle + time.Second)}, false},
		{"free, idle time unknown", Lock{}, false},
		{"free but owned by an existing claim", Lock{Owners: []string{"alive"}, IdleSince: now.Add(-2 * idle)}, false},
	}
	for _, tt := range tests {
		if got := LockRemovable(tt.l, exists, now, idle); got != tt.want {
			t.Errorf("%s: LockRemovable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestEndResult(t *testing.T) {
	for phase, want := range map[string]Outcome{
		PhaseReleased: OutcomeReleased, PhaseCompleted: OutcomeCompleted,
		PhaseExpired: OutcomeExpired, PhaseRevoked: OutcomeRevoked,
	} {
		r := EndResult(phase, fxIssue())
		if r.Outcome != want || r.Refused() || r.Class != "" || r.RuleSetDigest != RuleSetDigest() || r.Target != fxIssue() {
			t.Errorf("EndResult(%s) = %+v", phase, r)
		}
	}
}
