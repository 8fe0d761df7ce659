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
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"sort"
	"strings"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// Hash domains: a token of one kind can never equal a token of another kind,
// and a change to the encoding or the field list (which is part of the
// header) changes every token.
const (
	registryDomain  = "fleet.giteatools.dev/retirement/registry-fingerprint/v2"
	candidateDomain = "fleet.giteatools.dev/retirement/candidate-fingerprint/v2"
	rowDomain       = "fleet.giteatools.dev/retirement/row-fingerprint/v2"
)

// fingerprintFields is the authoritative field list, in encoding order.
// appendRow must encode exactly these fields in exactly this order.
var fingerprintFields = [...]string{
	"name",
	"namespace",
	"clientInstanceID",
	"workerNamespace",
	"identity",
	"remote",
	"repository",
	"heartbeatTTLSeconds",
	"lastHeartbeatAt",
	"ownershipState",
	"phase",
	"pid",
	"hostID",
	"bootID",
	"startTime",
	"generationID",
	"sessionID",
	"fencingEpoch",
}

// FingerprintFields returns (a copy of) the row fields that feed the registry
// and candidate fingerprints, in the order they are encoded. Fields not
// listed — tokenFingerprint, revisions, retiredAt/retiredBy/retirementReason
// and resourceVersion — never influence a fingerprint.
func FingerprintFields() []string {
	out := make([]string, len(fingerprintFields))
	copy(out, fingerprintFields[:])
	return out
}

// RegistryFingerprint returns "sha256:<hex>" over the retirement-relevant
// content of rows. It does not depend on the order of rows nor on when it is
// computed: only on the values of FingerprintFields.
//
// Encoding: a header (domain, field names, row count) followed by one record
// per row in canonical order (by name, then namespace, then encoded bytes).
// Every string is length-prefixed (uvarint), integers are fixed-width
// big-endian, optional integers carry a presence byte and the TTL carries a
// tag saying whether it is a canonical number or invalid raw text. The
// encoding is therefore injective: no choice of field contents can make two
// different registries serialise alike.
func RegistryFingerprint(rows []Row) string {
	enc := encodeRows(rows)
	return enc.hash(registryDomain, nil, enc.sortedOrder(rows))
}

// CandidateFingerprint returns "sha256:<hex>" over the given candidate rows
// together with the canonical value of the plan's repository binding
// (Input.CanonicalBinding; trimmed and lower-cased, matching the case-insensitive
// repository comparison). It uses the same row encoding as RegistryFingerprint
// under a different domain.
func CandidateFingerprint(candidates []Row, canonicalBinding string) string {
	enc := encodeRows(candidates)
	return enc.hash(candidateDomain, []string{normalizeRepository(canonicalBinding)}, enc.sortedOrder(candidates))
}

// encodedRows holds the canonical encoding of each row, back to back, in the
// order of the input slice: row i is buf[off[i]:off[i+1]].
type encodedRows struct {
	buf []byte
	off []int
}

// newEncodedRows returns an empty encoding with room for n rows.
func newEncodedRows(n int) *encodedRows {
	// A typical row encodes to 200–300 bytes; reserve enough to avoid
	// regrowing the buffer in the common case.
	return &encodedRows{buf: make([]byte, 0, n*256), off: make([]int, 1, n+1)}
}

// add appends the encoding of r (with its precomputed TTL text).
func (e *encodedRows) add(r *Row, ttl ttlText) {
	e.buf = appendRow(e.buf, r, ttl)
	e.off = append(e.off, len(e.buf))
}

// encodeRows encodes every row, in the order of the slice.
func encodeRows(rows []Row) *encodedRows {
	e := newEncodedRows(len(rows))
	for i := range rows {
		e.add(&rows[i], newTTLText(rows[i].HeartbeatTTLSeconds))
	}
	return e
}

func (e *encodedRows) row(i int32) []byte { return e.buf[e.off[i]:e.off[i+1]] }

// sortedOrder returns row indices in canonical order: by name, namespace and
// finally the encoded bytes (so even exact duplicates order canonically).
func (e *encodedRows) sortedOrder(rows []Row) []int32 {
	order := make([]int32, len(rows))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		ra, rb := &rows[a], &rows[b]
		if c := strings.Compare(ra.Name, rb.Name); c != 0 {
			return c
		}
		if c := strings.Compare(ra.Namespace, rb.Namespace); c != 0 {
			return c
		}
		return bytes.Compare(e.row(a), e.row(b))
	})
	return order
}

// hash writes the header and the selected rows (in the given order) into
// SHA-256. Adjacent rows that are also adjacent in the buffer are written
// with a single call.
func (e *encodedRows) hash(domain string, extra []string, order []int32) string {
	h := sha256.New()
	hdr := make([]byte, 0, 512)
	hdr = appendString(hdr, domain)
	hdr = binary.AppendUvarint(hdr, uint64(len(fingerprintFields)))
	for _, f := range fingerprintFields {
		hdr = appendString(hdr, f)
	}
	hdr = binary.AppendUvarint(hdr, uint64(len(extra)))
	for _, x := range extra {
		hdr = appendString(hdr, x)
	}
	hdr = binary.AppendUvarint(hdr, uint64(len(order)))
	h.Write(hdr)

	start, end := -1, -1
	for _, i := range order {
		s, t := e.off[i], e.off[i+1]
		if s == end {
			end = t
			continue
		}
		if start >= 0 {
			h.Write(e.buf[start:end])
		}
		start, end = s, t
	}
	if start >= 0 {
		h.Write(e.buf[start:end])
	}
	var sum [sha256.Size]byte
	return "sha256:" + hex.EncodeToString(h.Sum(sum[:0]))
}

// ttlText is the fingerprint form of a TTL: its canonical text when valid,
// otherwise the raw stored text, with a flag telling the two apart.
type ttlText struct {
	text  string
	valid bool
}

func newTTLText(n Number) ttlText {
	if c, err := n.Canonical(); err == nil {
		return ttlText{text: c, valid: true}
	}
	return ttlText{text: string(n)}
}

// appendRow appends the canonical encoding of the FingerprintFields of r.
func appendRow(b []byte, r *Row, ttl ttlText) []byte {
	b = append(b, 'R')
	b = appendString(b, r.Name)
	b = appendString(b, r.Namespace)
	b = appendString(b, r.ClientInstanceID)
	b = appendString(b, r.WorkerNamespace)
	b = appendString(b, r.Identity)
	b = appendString(b, r.Remote)
	// The repository field holds the binding's canonical value when it binds, so the
	// fingerprint names which repository (server and Gitea ID), not only how it is
	// spelled; a binding that names nothing keeps the declared text, flagged apart.
	if r.Binding != "" {
		b = append(b, 'b')
		b = appendString(b, r.Binding)
	} else {
		b = append(b, 'u')
		b = appendString(b, r.Repository)
	}
	if ttl.valid {
		b = append(b, 'n')
	} else {
		b = append(b, 'x')
	}
	b = appendString(b, ttl.text)
	b = appendString(b, r.LastHeartbeatAt)
	b = appendString(b, r.OwnershipState)
	b = appendString(b, r.Phase)
	b = binary.BigEndian.AppendUint64(b, uint64(r.PID))
	b = appendString(b, r.HostID)
	b = appendString(b, r.BootID)
	b = appendOptInt(b, r.StartTime)
	b = appendString(b, r.GenerationID)
	b = appendString(b, r.SessionID)
	b = appendOptInt(b, r.FencingEpoch)
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendOptInt(b []byte, v *int64) []byte {
	if v == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	return binary.BigEndian.AppendUint64(b, uint64(*v))
}

// fleetCandidateDomain separates the fleet candidate fingerprint from the others.
const fleetCandidateDomain = "fleet.giteatools.dev/retirement/fleet-candidate-fingerprint/v1"

// FleetCandidateFingerprint is the fleet plan's candidate fingerprint: "sha256:" and the
// hex SHA-256 of a domain line followed by one line "<hostID>=<host plan's candidate
// fingerprint>" per host, sorted by host id, each ending in a newline. It moves when any
// host's candidate set moves, and it does not depend on the order the host plans were
// made or read in, nor on which agent aggregated them.
func FleetCandidateFingerprint(hosts []HostShare) string {
	lines := make([]string, 0, len(hosts))
	for _, h := range hosts {
		lines = append(lines, h.HostID+"="+h.CandidateFingerprint)
	}
	sort.Strings(lines)
	sum := sha256.New()
	sum.Write([]byte(fleetCandidateDomain + "\n"))
	for _, l := range lines {
		sum.Write([]byte(l + "\n"))
	}
	return "sha256:" + hex.EncodeToString(sum.Sum(nil))
}

// RegistryFingerprintBeforeSiblings is the registry fingerprint a host plan compares a
// registry-bound approval with. The approval names the whole namespace's registry as the
// fleet plan saw it, and the fleet's host plans apply at the same time: a sibling host
// plan's retirement of its own rows moves the registry between this host's plan and its
// fresh read, although nothing the approval bound has changed. So a row of another host
// that is Retired by fleetPlanRef (the namespace/name every host plan of that fleet plan
// writes into retiredBy) is counted in the only form a candidate can have had at plan
// time: Active and stale. Every other row counts as it is now.
//
// This cannot let a change through: the reverted row matches the plan-time fingerprint
// only if, at plan time, it was an Active, stale row with every other fingerprinted
// field as it is now, so the one change is its own retirement. A row retired by
// anything else, a row of this host, or a row that was live at plan time still moves
// the fingerprint.
func RegistryFingerprintBeforeSiblings(rows []Row, fleetPlanRef, hostID string) string {
	if fleetPlanRef == "" {
		return RegistryFingerprint(rows)
	}
	var before []Row
	for i := range rows {
		r := rows[i]
		if r.HostID != hostID && r.RetiredBy == fleetPlanRef && r.Phase == fleet.Retired {
			if before == nil {
				before = slices.Clone(rows)
			}
			r.Phase, r.OwnershipState = fleet.Active, fleet.Stale
			before[i] = r
		}
	}
	if before == nil {
		return RegistryFingerprint(rows)
	}
	return RegistryFingerprint(before)
}

// RowFingerprint returns "sha256:<hex>" over one row, in the encoding of the registry and
// candidate fingerprints (every field an approval covers, nothing else: not the
// resourceVersion, labels or conditions). An apply records it for each row it sets out
// to write, so a takeover that resumes the apply can tell a row the approval still
// describes from one that changed since.
//
// It is over the row's own content: the repository as the row declares it, not what that
// name resolves to in the namespace (Row.Binding), which is not the row's to change and
// which the fresh plan of every apply and takeover judges again. So a row fingerprinted
// before it was bound and read again after still compares equal.
func RowFingerprint(r Row) string {
	r.Binding = ""
	enc := encodeRows([]Row{r})
	return enc.hash(rowDomain, nil, []int32{0})
}

// RowUnchanged says whether row now is still the row whose RowFingerprint was approved:
// a write since that changed no fingerprinted field (a label, a condition) leaves it
// unchanged; any other change does not.
func RowUnchanged(approved string, now Row) bool {
	return approved != "" && RowFingerprint(now) == approved
}
