/*
Copyright 2026 The fleet-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package fleet

import (
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ttl := 900 * time.Second
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }

	tests := []struct {
		name      string
		in        ClassifyInput
		wantState string
		wantNext  time.Time
	}{
		{"retired is historical even when fresh", ClassifyInput{Now: now, Phase: Retired, LastHeartbeatAt: at(-time.Second), HeartbeatTTL: ttl, PID: PIDAlive}, Historical, time.Time{}},
		{"missing heartbeat is stale", ClassifyInput{Now: now, Phase: Active, HeartbeatTTL: ttl, PID: PIDAlive}, Stale, time.Time{}},
		{"fresh and unknown probe is live", ClassifyInput{Now: now, Phase: Active, LastHeartbeatAt: at(-time.Minute), HeartbeatTTL: ttl, PID: PIDUnknown}, Live, now.Add(-time.Minute + ttl)},
		{"fresh and alive probe is live", ClassifyInput{Now: now, Phase: Active, LastHeartbeatAt: at(-time.Minute), HeartbeatTTL: ttl, PID: PIDAlive}, Live, now.Add(-time.Minute + ttl)},
		{"fresh and empty probe is live", ClassifyInput{Now: now, Phase: Active, LastHeartbeatAt: at(-time.Minute), HeartbeatTTL: ttl}, Live, now.Add(-time.Minute + ttl)},
		{"fresh but gone is stale", ClassifyInput{Now: now, Phase: Active, LastHeartbeatAt: at(-time.Minute), HeartbeatTTL: ttl, PID: PIDGone}, Stale, time.Time{}},
		{"fresh but reused is stale", ClassifyInput{Now: now, Phase: Active, LastHeartbeatAt: at(-time.Minute), HeartbeatTTL: ttl, PID: PIDReused}, Stale, time.Time{}},
		{"lapsed but alive stays stale (probe never grants)", ClassifyInput{Now: now, Phase: Active, LastHeartbeatAt: at(-time.Hour), HeartbeatTTL: ttl, PID: PIDAlive}, Stale, time.Time{}},
		{"exactly at expiry is stale", ClassifyInput{Now: now, Phase: Active, LastHeartbeatAt: at(-ttl), HeartbeatTTL: ttl, PID: PIDAlive}, Stale, time.Time{}},
		{"one ns before expiry is live", ClassifyInput{Now: now, Phase: Active, LastHeartbeatAt: at(-ttl + time.Nanosecond), HeartbeatTTL: ttl}, Live, now.Add(time.Nanosecond)},
		{"zero ttl is stale", ClassifyInput{Now: now, Phase: Active, LastHeartbeatAt: at(time.Hour), HeartbeatTTL: 0}, Stale, time.Time{}},
		{"empty phase treated as active", ClassifyInput{Now: now, LastHeartbeatAt: at(0), HeartbeatTTL: ttl}, Live, now.Add(ttl)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, next := Classify(tt.in)
			if state != tt.wantState || !next.Equal(tt.wantNext) {
				t.Fatalf("Classify = (%q, %v), want (%q, %v)", state, next, tt.wantState, tt.wantNext)
			}
		})
	}
}

func TestPIDState(t *testing.T) {
	tests := []struct {
		in        PIDState
		norm      PIDState
		withdraws bool
	}{
		{PIDAlive, PIDAlive, false},
		{PIDGone, PIDGone, true},
		{PIDReused, PIDReused, true},
		{PIDUnknown, PIDUnknown, false},
		{"", PIDUnknown, false},
		{"ALIVE", PIDUnknown, false},
	}
	for _, tt := range tests {
		if got := tt.in.Normalize(); got != tt.norm {
			t.Errorf("%q.Normalize() = %q, want %q", tt.in, got, tt.norm)
		}
		if got := tt.in.Withdraws(); got != tt.withdraws {
			t.Errorf("%q.Withdraws() = %v, want %v", tt.in, got, tt.withdraws)
		}
	}
}

func TestInstanceIDTrust(t *testing.T) {
	tests := []struct {
		id     string
		legacy bool
	}{
		{"inst-4f2a", false},
		{"inst-", true},
		{"pid-1234", true},
		{"proc-1234", true},
		{"", true},
		{"legacy-pid-9", true},
		{"INST-abc", true},
	}
	for _, tt := range tests {
		if got := IsLegacyInstanceID(tt.id); got != tt.legacy {
			t.Errorf("IsLegacyInstanceID(%q) = %v, want %v", tt.id, got, tt.legacy)
		}
		if got := IsTrustedInstanceID(tt.id); got == tt.legacy {
			t.Errorf("IsTrustedInstanceID(%q) = %v, want %v", tt.id, got, !tt.legacy)
		}
	}
}

func TestSnapshot(t *testing.T) {
	obs := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name           string
		members        []Member
		live, stale    int
		historical     int
		blockerWorkers []string
		safe           bool
	}{
		{name: "empty fleet is safe", safe: true},
		{
			name: "historical legacy rows never make it unsafe",
			members: []Member{
				{Name: "w1", ClientInstanceID: "pid-1", Phase: Retired, OwnershipState: Historical},
				{Name: "w2", ClientInstanceID: "inst-a", Phase: Active, OwnershipState: Live},
			},
			live: 1, historical: 1, safe: true,
		},
		{
			name: "stale legacy rows raise no blocker",
			members: []Member{
				{Name: "w1", ClientInstanceID: "proc-1", Phase: Active, OwnershipState: Stale},
			},
			stale: 1, safe: true,
		},
		{
			name: "live legacy rows block, ordered by worker",
			members: []Member{
				{Name: "zeta", ClientInstanceID: "pid-1", Phase: Active, OwnershipState: Live},
				{Name: "alpha", ClientInstanceID: "weird", Phase: Active, OwnershipState: Live},
				{Name: "mid", ClientInstanceID: "inst-x", Phase: Active, OwnershipState: Live},
				{Name: "old", ClientInstanceID: "pid-2", Phase: Retired, OwnershipState: Live},
			},
			live: 3, historical: 1, blockerWorkers: []string{"alpha", "zeta"}, safe: false,
		},
		{
			name: "unrecognised state counts as stale",
			members: []Member{
				{Name: "a", ClientInstanceID: "pid-1", Phase: Active, OwnershipState: ""},
				{Name: "b", ClientInstanceID: "pid-1", Phase: Active, OwnershipState: Historical},
			},
			stale: 2, safe: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Snapshot(tt.members, obs)
			if s.LiveCount != tt.live || s.StaleCount != tt.stale || s.HistoricalCount != tt.historical {
				t.Fatalf("counts = %d/%d/%d, want %d/%d/%d", s.LiveCount, s.StaleCount, s.HistoricalCount, tt.live, tt.stale, tt.historical)
			}
			if s.LiveFleetSafe != tt.safe {
				t.Fatalf("LiveFleetSafe = %v, want %v", s.LiveFleetSafe, tt.safe)
			}
			if len(s.Blockers) != len(tt.blockerWorkers) {
				t.Fatalf("blockers = %+v, want workers %v", s.Blockers, tt.blockerWorkers)
			}
			for i, b := range s.Blockers {
				if b.Worker != tt.blockerWorkers[i] || b.Code != BlockerLegacyIncompleteIdentity || b.Detail == "" {
					t.Fatalf("blocker %d = %+v, want worker %q", i, b, tt.blockerWorkers[i])
				}
			}
			if !s.ObservedAt.Equal(obs) {
				t.Fatalf("ObservedAt = %v", s.ObservedAt)
			}
		})
	}
}

func TestObservationTokenMovesWithTime(t *testing.T) {
	obs := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	members := []Member{
		{Name: "a", ClientInstanceID: "inst-a", Phase: Active, OwnershipState: Live},
		{Name: "b", ClientInstanceID: "inst-b", Phase: Active, OwnershipState: Stale},
	}
	reversed := []Member{members[1], members[0]}

	t0 := Snapshot(members, obs).ObservationToken
	if got := Snapshot(reversed, obs).ObservationToken; got != t0 {
		t.Fatalf("token depends on member order: %s vs %s", got, t0)
	}
	if got := Snapshot(members, obs.Add(400*time.Millisecond)).ObservationToken; got != t0 {
		t.Fatalf("token moved within the same second")
	}
	if got := Snapshot(members, obs.Add(time.Second)).ObservationToken; got == t0 {
		t.Fatalf("token did not move with the observation second")
	}
	changed := []Member{members[0], {Name: "b", ClientInstanceID: "inst-b", Phase: Retired, OwnershipState: Historical}}
	if got := Snapshot(changed, obs).ObservationToken; got == t0 {
		t.Fatalf("token did not move with a row change")
	}
}
