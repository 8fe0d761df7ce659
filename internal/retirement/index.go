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

package retirement

import (
	"encoding/binary"
	"strconv"
)

// keyKind names the kinds of identity evidence two registrations can share.
type keyKind uint8

const (
	keyProcess        keyKind = iota // host id + boot id + pid
	keySession                       // session id
	keyGeneration                    // generation id
	keyClientInstance                // client instance id + worker namespace
	numKeyKinds
)

// identityKeys holds the digests of a row's identity evidence, computed once
// while the row is being derived so that indexing and conflict checks never
// touch the row's strings again. present has bit k set when the row carries
// evidence of kind k.
type identityKeys struct {
	digest  [numKeyKinds]uint64
	present uint8
}

func (k *identityKeys) has(kind keyKind) bool { return k.present&(1<<kind) != 0 }

// FNV-1a, 64 bit: deterministic (unlike hash/maphash, whose seeds are
// random), so a plan never depends on the process it was computed in.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// fnvField mixes a length-prefixed string, so adjacent fields cannot run
// into each other.
func fnvField(h uint64, s string) uint64 {
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(len(s)))
	h = fnvBytes(h, l[:])
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func fnvInt(h uint64, v int64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	return fnvBytes(h, b[:])
}

// identityKeysOf computes the evidence digests of r. Evidence that is absent
// (empty session, no host or pid, empty client instance id) is not keyed and
// so can never be "shared".
func identityKeysOf(r *Row) identityKeys {
	var k identityKeys
	start := func(kind keyKind) uint64 { return fnvBytes(fnvOffset, []byte{byte(kind)}) }
	if !blank(r.HostID) && r.PID > 0 {
		k.digest[keyProcess] = fnvInt(fnvField(fnvField(start(keyProcess), r.HostID), r.BootID), r.PID)
		k.present |= 1 << keyProcess
	}
	if r.SessionID != "" {
		k.digest[keySession] = fnvField(start(keySession), r.SessionID)
		k.present |= 1 << keySession
	}
	if r.GenerationID != "" {
		k.digest[keyGeneration] = fnvField(start(keyGeneration), r.GenerationID)
		k.present |= 1 << keyGeneration
	}
	if r.ClientInstanceID != "" {
		k.digest[keyClientInstance] = fnvField(fnvField(start(keyClientInstance), r.ClientInstanceID), r.WorkerNamespace)
		k.present |= 1 << keyClientInstance
	}
	return k
}

// sameEvidence compares the actual fields behind a digest, so a digest
// collision can never be mistaken for shared evidence.
func sameEvidence(kind keyKind, a, b *Row) bool {
	switch kind {
	case keyProcess:
		return a.HostID == b.HostID && a.BootID == b.BootID && a.PID == b.PID
	case keySession:
		return a.SessionID == b.SessionID
	case keyGeneration:
		return a.GenerationID == b.GenerationID
	default:
		return a.ClientInstanceID == b.ClientInstanceID && a.WorkerNamespace == b.WorkerNamespace
	}
}

// bucket remembers how many possibly-live rows carry one digest and the two
// of them that come first in canonical order: enough to find "another" row
// and name it deterministically, whatever the order rows were indexed in.
type bucket struct {
	n      int32
	a, b   int32 // row indexes
	ra, rb int32 // their canonical ranks
}

func (b *bucket) add(i, rank int32) {
	switch {
	case b.n == 0:
		b.a, b.ra = i, rank
	case rank < b.ra:
		b.b, b.rb = b.a, b.ra
		b.a, b.ra = i, rank
	case b.n == 1 || rank < b.rb:
		b.b, b.rb = i, rank
	}
	b.n++
}

// evidenceIndex maps (kind, digest) to the possibly-live rows carrying that
// evidence. All kinds share one map; the kind is folded into the digest.
type evidenceIndex map[uint64]bucket

// add indexes row i (canonical rank rank) under every key it carries.
func (ix evidenceIndex) add(k *identityKeys, i, rank int32) {
	for kind := keyKind(0); kind < numKeyKinds; kind++ {
		if k.has(kind) {
			b := ix[k.digest[kind]]
			b.add(i, rank)
			ix[k.digest[kind]] = b
		}
	}
}

// others names the possibly-live rows other than rc's own that share
// evidence of the given kind with it, or returns "" when there are none.
//
// Only the two first rows of a bucket are known individually; they are
// checked field by field. Should they both turn out to be digest collisions
// while the bucket holds further rows, those rows cannot be ruled out and a
// conflict is reported anyway: a collision can only ever preserve a row,
// never let one through.
func (p *planner) others(kind keyKind, rc *rowContext) string {
	if !rc.keys.has(kind) {
		return ""
	}
	b := p.index[rc.keys.digest[kind]]
	listed := [2]int32{b.a, b.b}
	nListed := min(int(b.n), 2)
	selfIndexed := rc.mayBeLive // a possibly-live row is in its own buckets
	others := int(b.n)
	if selfIndexed {
		others--
	}
	if others <= 0 {
		return ""
	}
	seen, match := 0, int32(-1)
	for _, i := range listed[:nListed] {
		if i == rc.idx {
			continue
		}
		seen++
		if match < 0 && sameEvidence(kind, &p.in.Rows[i], rc.row) {
			match = i
		}
	}
	switch {
	case match >= 0:
		name := strconv.Quote(p.in.Rows[match].Name)
		if others > 1 {
			name += " and up to " + strconv.Itoa(others-1) + " more"
		}
		return name
	case others > seen:
		return "(unlisted registrations; evidence digest is shared)"
	default:
		return ""
	}
}
