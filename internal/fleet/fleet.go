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

// Package fleet classifies worker registrations as live, stale or historical
// and summarises a whole fleet into a read-only snapshot.
//
// The package is pure: it performs no I/O, reads no clock (the current time is
// always an argument) and does not depend on the Kubernetes API types. The
// controller converts WorkerRegistration objects into the small input structs
// defined here.
package fleet

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sort"
	"strings"
	"time"
)

// Ownership states a registration can be classified into.
const (
	// Live means the worker has heartbeated within its TTL and no process
	// probe has shown that its process is gone.
	Live = "live"
	// Stale means the registration is still Active but liveness cannot be
	// shown: the heartbeat is missing or lapsed, or a probe withdrew it.
	Stale = "stale"
	// Historical means the registration has been retired; it is kept as a
	// record and never counts as part of the running fleet.
	Historical = "historical"
)

// Registration phases.
const (
	// Active is the phase of a registration that has not been retired.
	Active = "Active"
	// Retired is the terminal phase; a retired registration never becomes
	// Active again.
	Retired = "Retired"
)

// EffectivePhase is the phase a registration is in: a registration whose status the
// controller has not written yet ("") is Active.
func EffectivePhase(phase string) string {
	if phase == "" {
		return Active
	}
	return phase
}

// PIDState is the answer of a process prober about one registered process.
type PIDState string

// Possible answers of a process prober.
const (
	// PIDAlive means the pid is occupied by exactly the registered process
	// (same start time).
	PIDAlive PIDState = "alive"
	// PIDGone means no process currently holds the pid number.
	PIDGone PIDState = "gone"
	// PIDReused means the pid number is held by a different process
	// incarnation than the registered one.
	PIDReused PIDState = "reused"
	// PIDUnknown means the prober could not tell (wrong host, permission
	// problem, no prober, ...).
	PIDUnknown PIDState = "unknown"
)

// Withdraws reports whether the probe answer proves that the registered
// process no longer runs. Only PIDGone and PIDReused do; an unrecognised
// value is treated like PIDUnknown and withdraws nothing.
func (s PIDState) Withdraws() bool {
	return s == PIDGone || s == PIDReused
}

// Normalize maps any unrecognised value (including "") to PIDUnknown.
func (s PIDState) Normalize() PIDState {
	switch s {
	case PIDAlive, PIDGone, PIDReused:
		return s
	default:
		return PIDUnknown
	}
}

// ClassifyInput is everything Classify needs to know about one registration.
type ClassifyInput struct {
	// Now is the evaluation instant; Classify never reads the clock.
	Now time.Time
	// Phase is the registration phase (Active or Retired).
	Phase string
	// LastHeartbeatAt is the last renewal; nil when the worker never
	// heartbeated or the stored value could not be parsed.
	LastHeartbeatAt *time.Time
	// HeartbeatTTL is how long one heartbeat keeps the worker fresh.
	HeartbeatTTL time.Duration
	// PID is the latest process probe answer, PIDUnknown when there is none.
	PID PIDState
}

// Classify returns the ownership state of one registration and, for a live
// worker, the instant at which it will turn stale unless it heartbeats again
// (zero time otherwise).
//
// The rules, in order:
//   - a Retired registration is Historical;
//   - a registration without a heartbeat is Stale;
//   - a non-positive TTL can never make a heartbeat fresh, so it is Stale;
//   - a heartbeat is fresh while Now is strictly before LastHeartbeatAt+TTL;
//     a fresh heartbeat makes the worker Live unless the probe says the
//     process is gone or the pid was reused;
//   - everything else is Stale.
//
// A probe therefore only ever removes liveness: PIDAlive cannot rescue a
// lapsed heartbeat, and PIDUnknown does not count against a fresh one. Any
// phase other than Retired (including an empty, not yet written phase) is
// treated as Active here.
func Classify(in ClassifyInput) (state string, nextTransition time.Time) {
	if in.Phase == Retired {
		return Historical, time.Time{}
	}
	if in.LastHeartbeatAt == nil || in.HeartbeatTTL <= 0 {
		return Stale, time.Time{}
	}
	expiry := in.LastHeartbeatAt.Add(in.HeartbeatTTL)
	if !in.Now.Before(expiry) {
		return Stale, time.Time{}
	}
	if in.PID.Withdraws() {
		return Stale, time.Time{}
	}
	return Live, expiry
}

// TrustedInstancePrefix is the prefix of launcher-minted client instance ids.
const TrustedInstancePrefix = "inst-"

// IsTrustedInstanceID reports whether a client instance id was minted by a
// launcher: it must start with "inst-" and carry something after the prefix.
// Legacy ids ("pid-…", "proc-…") and anything else are untrusted.
func IsTrustedInstanceID(id string) bool {
	return len(id) > len(TrustedInstancePrefix) && strings.HasPrefix(id, TrustedInstancePrefix)
}

// IsLegacyInstanceID reports whether a client instance id is a legacy or
// otherwise untrusted one: it starts with "pid-" or "proc-", or is not a
// launcher-minted "inst-…" id at all. It is the negation of
// IsTrustedInstanceID, spelled out for readability at call sites.
func IsLegacyInstanceID(id string) bool {
	if strings.HasPrefix(id, "pid-") || strings.HasPrefix(id, "proc-") {
		return true
	}
	return !IsTrustedInstanceID(id)
}

// BlockerLegacyIncompleteIdentity is the blocker code for a live worker that
// runs under a legacy (untrusted) client instance id.
const BlockerLegacyIncompleteIdentity = "legacy_incomplete_identity"

// Member is one registration as seen by Snapshot.
type Member struct {
	// Name is the worker identity (the registration's name).
	Name string
	// ClientInstanceID is the launcher-provided instance id.
	ClientInstanceID string
	// WorkerNamespace is the worker's namespace (tenant), not the
	// Kubernetes namespace of the object.
	WorkerNamespace string
	// Phase is Active or Retired.
	Phase string
	// OwnershipState is the result of Classify for this registration.
	OwnershipState string
}

// Blocker is one reason the live fleet is not considered safe.
type Blocker struct {
	// Code is a stable machine-readable code, e.g. legacy_incomplete_identity.
	Code string
	// Worker is the worker identity the blocker is about.
	Worker string
	// Detail is a human-readable explanation.
	Detail string
}

// Summary is a read-only snapshot of the fleet.
type Summary struct {
	// LiveCount is the number of members counted as live.
	LiveCount int
	// StaleCount is the number of members counted as stale.
	StaleCount int
	// HistoricalCount is the number of retired members.
	HistoricalCount int
	// Blockers lists every reason the live fleet is unsafe, ordered by
	// worker name and then code.
	Blockers []Blocker
	// LiveFleetSafe is true exactly when Blockers is empty.
	LiveFleetSafe bool
	// ObservedAt is the observation instant passed to Snapshot.
	ObservedAt time.Time
	// ObservationToken is an observation stamp; see Snapshot.
	ObservationToken string
}

// Snapshot summarises members observed at observedAt.
//
// Counting: a member in phase Retired is historical whatever its stored
// ownership state; otherwise a member counts as live only when its
// OwnershipState is exactly "live", and as stale in every other case
// (including an empty or unrecognised state, and a "historical" state on a
// registration that is not actually Retired: neither proves anything).
//
// Safety rule: LiveFleetSafe is true if and only if there are no blockers.
// Today the only blocker is legacy_incomplete_identity, raised for every
// live member whose client instance id is legacy (see IsLegacyInstanceID).
// Stale and historical members never raise blockers, so retiring rows can
// lower StaleCount without making the fleet "safe" while live legacy
// workers remain, and historical rows can never make it unsafe.
//
// ObservationToken is "sha256:" + hex over observedAt truncated to whole
// seconds plus each member's name, phase and ownership state. Because the
// observation time is part of the digest it changes every second even when
// nothing in the fleet changed. It is an observation stamp for humans and
// logs only: nothing may gate a decision or a compare-and-swap on it (the
// retirement package provides a stable registry fingerprint for that).
func Snapshot(members []Member, observedAt time.Time) Summary {
	s := Summary{ObservedAt: observedAt}
	for _, m := range members {
		switch {
		case m.Phase == Retired:
			s.HistoricalCount++
		case m.OwnershipState == Live:
			s.LiveCount++
			if IsLegacyInstanceID(m.ClientInstanceID) {
				s.Blockers = append(s.Blockers, Blocker{
					Code:   BlockerLegacyIncompleteIdentity,
					Worker: m.Name,
					Detail: "live worker uses client instance id " + quote(m.ClientInstanceID) +
						", which is not launcher-minted (inst-…); its identity cannot be proven",
				})
			}
		default:
			s.StaleCount++
		}
	}
	sort.SliceStable(s.Blockers, func(i, j int) bool {
		a, b := s.Blockers[i], s.Blockers[j]
		if a.Worker != b.Worker {
			return a.Worker < b.Worker
		}
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Detail < b.Detail
	})
	s.LiveFleetSafe = len(s.Blockers) == 0
	s.ObservationToken = observationToken(members, observedAt)
	return s
}

func quote(s string) string {
	if s == "" {
		return `""`
	}
	return `"` + s + `"`
}

// observationToken hashes the observation second and a subset of each
// member's fields. Members are sorted first so the token does not depend on
// listing order.
func observationToken(members []Member, observedAt time.Time) string {
	rows := make([]string, 0, len(members))
	for _, m := range members {
		var b []byte
		b = appendLP(b, m.Name)
		b = appendLP(b, m.Phase)
		b = appendLP(b, m.OwnershipState)
		rows = append(rows, string(b))
	}
	sort.Strings(rows)
	h := sha256.New()
	var hdr []byte
	hdr = appendLP(hdr, "fleet-observation/v1")
	hdr = appendLP(hdr, observedAt.UTC().Truncate(time.Second).Format(time.RFC3339))
	hdr = binary.AppendUvarint(hdr, uint64(len(rows)))
	h.Write(hdr)
	for _, r := range rows {
		h.Write([]byte(r))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// appendLP appends s prefixed with its length, so concatenations of
// several strings can never be confused with each other.
func appendLP(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
