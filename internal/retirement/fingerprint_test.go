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
	"errors"
	"sort"
	"testing"
	"time"
)

func fpRows() []Row {
	rows := []Row{eligibleRow("a", 10), liveRow("b", 20), eligibleRow("c", 30)}
	rows[2].Phase = "Retired"
	rows[2].RetiredAt = "2026-02-01T00:00:00Z"
	return rows
}

func TestFingerprintOrderIndependence(t *testing.T) {
	rows := fpRows()
	want := RegistryFingerprint(rows)
	perms := [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {1, 2, 0}}
	for _, perm := range perms {
		var rs []Row
		for _, i := range perm {
			rs = append(rs, rows[i])
		}
		if got := RegistryFingerprint(rs); got != want {
			t.Fatalf("order %v gives %s, want %s", perm, got, want)
		}
		if got := CandidateFingerprint(rs, testRepo); got != CandidateFingerprint(rows, testRepo) {
			t.Fatalf("candidate fingerprint depends on order %v", perm)
		}
	}
	// Exact duplicates and same-name rows in different namespaces order
	// canonically too.
	dup := append(fpRows(), eligibleRow("a", 10))
	dup[3].Namespace = "other"
	d1 := RegistryFingerprint(dup)
	d2 := RegistryFingerprint([]Row{dup[3], dup[2], dup[1], dup[0]})
	if d1 != d2 {
		t.Fatalf("duplicate names break order independence")
	}
}

func TestFingerprintTimeIndependence(t *testing.T) {
	in := baseInput()
	fresh := liveRow("fresh", 300)
	fresh.OwnershipState = "stale"
	in.Rows = append(in.Rows, fresh)
	in.Probes["fresh"] = gone()
	p1 := BuildPlan(in)
	in.Now = testNow.Add(10 * time.Hour)
	p2 := BuildPlan(in)
	if p1.RegistryFingerprint != p2.RegistryFingerprint {
		t.Fatalf("registry fingerprint moved with Now")
	}
	// Sanity: the plans really differ, only the registry token does not.
	if p1.CandidateCount != 2 || p2.CandidateCount != 3 || p1.CandidateFingerprint == p2.CandidateFingerprint {
		t.Fatalf("candidate counts %d %d", p1.CandidateCount, p2.CandidateCount)
	}
	// Probes and task claims are not registry content either.
	in.Probes = nil
	in.ActiveWorkflowOwners = []string{"keeper"}
	if p3 := BuildPlan(in); p3.RegistryFingerprint != p1.RegistryFingerprint {
		t.Fatalf("registry fingerprint moved with probes/claims")
	}
}

// fieldMutators changes exactly one fingerprint field of a row.
var fieldMutators = map[string]func(r *Row){
	"name":                func(r *Row) { r.Name += "x" },
	"namespace":           func(r *Row) { r.Namespace += "x" },
	"clientInstanceID":    func(r *Row) { r.ClientInstanceID += "x" },
	"workerNamespace":     func(r *Row) { r.WorkerNamespace += "x" },
	"identity":            func(r *Row) { r.Identity += "x" },
	"remote":              func(r *Row) { r.Remote = "prgs" },
	"repository":          func(r *Row) { r.Binding = "gitea:b/42" },
	"heartbeatTTLSeconds": func(r *Row) { r.HeartbeatTTLSeconds = "901" },
	"lastHeartbeatAt":     func(r *Row) { r.LastHeartbeatAt = "2026-03-01T10:00:01Z" },
	"ownershipState":      func(r *Row) { r.OwnershipState = "live" },
	"phase":               func(r *Row) { r.Phase = "Retired" },
	"pid":                 func(r *Row) { r.PID++ },
	"hostID":              func(r *Row) { r.HostID += "x" },
	"bootID":              func(r *Row) { r.BootID += "x" },
	"startTime":           func(r *Row) { r.StartTime = i64(*r.StartTime + 1) },
	"generationID":        func(r *Row) { r.GenerationID += "x" },
	"sessionID":           func(r *Row) { r.SessionID += "x" },
	"fencingEpoch":        func(r *Row) { r.FencingEpoch = i64(*r.FencingEpoch + 1) },
}

func TestEveryFingerprintFieldMovesIt(t *testing.T) {
	fields := FingerprintFields()
	if len(fields) != len(fieldMutators) {
		t.Fatalf("FingerprintFields has %d entries, test knows %d", len(fields), len(fieldMutators))
	}
	base := fpRows()
	want := RegistryFingerprint(base)
	wantCand := CandidateFingerprint(base, testRepo)
	for _, f := range fields {
		mut, ok := fieldMutators[f]
		if !ok {
			t.Fatalf("no mutator for field %q", f)
		}
		rows := fpRows()
		mut(&rows[0])
		if RegistryFingerprint(rows) == want {
			t.Errorf("changing %s did not move the registry fingerprint", f)
		}
		if CandidateFingerprint(rows, testRepo) == wantCand {
			t.Errorf("changing %s did not move the candidate fingerprint", f)
		}
	}
	// Presence matters for optional integers.
	for _, mut := range []func(r *Row){
		func(r *Row) { r.StartTime = nil },
		func(r *Row) { r.FencingEpoch = nil },
		func(r *Row) { r.StartTime = i64(0) },
	} {
		rows := fpRows()
		mut(&rows[0])
		if RegistryFingerprint(rows) == want {
			t.Errorf("optional integer change did not move the fingerprint")
		}
	}
	// Row creation and deletion.
	if RegistryFingerprint(base[:2]) == want || RegistryFingerprint(append(fpRows(), eligibleRow("d", 40))) == want {
		t.Errorf("row count change did not move the fingerprint")
	}
	if RegistryFingerprint(nil) == RegistryFingerprint([]Row{}) && RegistryFingerprint(nil) == want {
		t.Errorf("empty registry collides")
	}
}

func TestExcludedFieldsDoNotMoveFingerprint(t *testing.T) {
	want := RegistryFingerprint(fpRows())
	for name, mut := range map[string]func(r *Row){
		"tokenFingerprint": func(r *Row) { r.TokenFingerprint = "other" },
		"revisions":        func(r *Row) { r.Revisions = map[string]string{"config": "r2", "image": "x"} },
		"revisionsNil":     func(r *Row) { r.Revisions = nil },
		"retiredAt":        func(r *Row) { r.RetiredAt = "2026-03-01T00:00:00Z" },
		"retiredBy":        func(r *Row) { r.RetiredBy = "someone" },
		"retirementReason": func(r *Row) { r.RetirementReason = "eligible_stale_orphan" },
		"resourceVersion":  func(r *Row) { r.ResourceVersion = "99999" },
	} {
		rows := fpRows()
		for i := range rows {
			mut(&rows[i])
		}
		if got := RegistryFingerprint(rows); got != want {
			t.Errorf("excluded field %s moved the fingerprint", name)
		}
	}
}

func TestFingerprintCanonicalNumbers(t *testing.T) {
	variants := []Number{"900", "900.0", "9e2", "9.00E+2", `"900"`, " 900 ", "0900", "+900", NumberFromInt(900), NumberFromFloat(900)}
	var fps []string
	for _, v := range variants {
		rows := fpRows()
		rows[0].HeartbeatTTLSeconds = v
		fps = append(fps, RegistryFingerprint(rows))
	}
	for i := range fps {
		if fps[i] != fps[0] {
			t.Errorf("TTL %q fingerprints differently from %q", variants[i], variants[0])
		}
	}
	// An invalid TTL is still hashed (raw) and differs from a valid one.
	rows := fpRows()
	rows[0].HeartbeatTTLSeconds = "NaN"
	nan := RegistryFingerprint(rows)
	rows[0].HeartbeatTTLSeconds = "Inf"
	if nan == fps[0] || nan == RegistryFingerprint(rows) {
		t.Errorf("invalid TTL texts collide")
	}
}

func TestFingerprintNoDelimiterInjection(t *testing.T) {
	a, b := eligibleRow("x", 1), eligibleRow("x", 1)
	a.Name, a.Namespace = "ab", "c"
	b.Name, b.Namespace = "a", "bc"
	if RegistryFingerprint([]Row{a}) == RegistryFingerprint([]Row{b}) {
		t.Fatalf("field boundary is ambiguous")
	}
	c, d := eligibleRow("x", 1), eligibleRow("x", 1)
	c.SessionID, c.GenerationID = "s\x00", ""
	d.SessionID, d.GenerationID = "s", "\x00"
	if RegistryFingerprint([]Row{c}) == RegistryFingerprint([]Row{d}) {
		t.Fatalf("field boundary is ambiguous")
	}
	if RegistryFingerprint([]Row{a}) == CandidateFingerprint([]Row{a}, "") {
		t.Fatalf("registry and candidate domains collide")
	}
}

// The repository field holds the binding's canonical value: a different spelling of the
// same bound repository (a rename in Gitea, letter case) moves no fingerprint, the same
// spelling bound to another repository does, and an unbound row's declared text counts,
// apart from any bound value.
func TestFingerprintRepositoryIsTheBinding(t *testing.T) {
	base := fpRows()
	want := RegistryFingerprint(base)
	rows := fpRows()
	rows[0].Repository = "ACME/Renamed"
	if RegistryFingerprint(rows) != want {
		t.Errorf("a different spelling of the same binding moved the registry fingerprint")
	}
	rows = fpRows()
	rows[0].Binding = "gitea:a/1"
	if RegistryFingerprint(rows) == want {
		t.Errorf("the same spelling bound to another repository did not move the registry fingerprint")
	}
	unbound := fpRows()
	unbound[0].Binding = ""
	if RegistryFingerprint(unbound) == want {
		t.Errorf("a row whose name binds nothing fingerprints like a bound one")
	}
	other := fpRows()
	other[0].Binding = ""
	other[0].Repository = "acme/other"
	if RegistryFingerprint(other) == RegistryFingerprint(unbound) {
		t.Errorf("an unbound row's declared repository does not count")
	}
	spoof := fpRows()
	spoof[0].Binding = ""
	spoof[0].Repository = testRepo
	if RegistryFingerprint(spoof) == want {
		t.Errorf("an unbound row declaring the bound value's text collides with the bound row")
	}
}

func TestCandidateFingerprintBindsRepository(t *testing.T) {
	rows := fpRows()
	if CandidateFingerprint(rows, "acme/widgets") == CandidateFingerprint(rows, "acme/gadgets") {
		t.Fatalf("repository not bound")
	}
	if CandidateFingerprint(rows, "acme/widgets") != CandidateFingerprint(rows, " ACME/Widgets ") {
		t.Fatalf("repository comparison form not canonical")
	}
}

func TestFingerprintFieldsIsACopy(t *testing.T) {
	f := FingerprintFields()
	f[0] = "mutated"
	if FingerprintFields()[0] != "name" {
		t.Fatalf("FingerprintFields exposes internal state")
	}
	sorted := append([]string(nil), RequiredIdentityFields()...)
	sort.Strings(sorted)
	if len(sorted) != 8 {
		t.Fatalf("required fields = %v", sorted)
	}
}

func TestCanonicalNumber(t *testing.T) {
	tests := []struct {
		in, want string
		err      bool
	}{
		{"900", "900", false},
		{"900.0", "900", false},
		{"900.000", "900", false},
		{"9e2", "900", false},
		{"9E+2", "900", false},
		{"90000e-2", "900", false},
		{`"900"`, "900", false},
		{` " 900.0 " `, "900", false},
		{"0900", "900", false},
		{"+900", "900", false},
		{"-900", "-900", false},
		{"0", "0", false},
		{"-0.0", "0", false},
		{"0e99", "0", false},
		{".5", "0.5", false},
		{"5.", "5", false},
		{"1.50", "1.5", false},
		{"0.000001", "0.000001", false},
		{"0.0000001", "1e-7", false},
		{"123456789012345678901", "123456789012345678901", false},
		{"1234567890123456789012", "1.234567890123456789012e+21", false},
		{"1e20", "100000000000000000000", false},
		{"1e21", "1e+21", false},
		{"1e22", "1e+22", false},
		{"12.5e-3", "0.0125", false},
		{"", "", true},
		{" ", "", true},
		{"NaN", "", true},
		{"Inf", "", true},
		{"-Infinity", "", true},
		{"0x10", "", true},
		{"1e", "", true},
		{"1e+", "", true},
		{".", "", true},
		{"--1", "", true},
		{"1.2.3", "", true},
		{"1_000", "", true},
		{`"900`, "", true},
		{"1e99999999999", "", true},
		{"1e1000000", "1e+1000000", false},
		{"1e-1000000", "1e-1000000", false},
		{"0.001e1000002", "1e+999999", false},
		{"100e999999", "", true},
		{"1e1000001", "", true},
	}
	for _, tt := range tests {
		got, err := CanonicalNumber(tt.in)
		if tt.err {
			if err == nil || !errors.Is(err, ErrInvalidNumber) {
				t.Errorf("CanonicalNumber(%q) = %q, %v; want ErrInvalidNumber", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("CanonicalNumber(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestNumberHelpers(t *testing.T) {
	tests := []struct {
		n        Number
		positive bool
		dur      time.Duration
		err      bool
	}{
		{"900", true, 900 * time.Second, false},
		{"900.0", true, 900 * time.Second, false},
		{"0.5", true, 500 * time.Millisecond, false},
		{"0", false, 0, false},
		{"-5", false, -5 * time.Second, false},
		{"1e400", true, time.Duration(1<<63 - 1), false},
		{"-1e400", false, time.Duration(-1 << 63), false},
		{"99999999999999999999", true, time.Duration(1<<63 - 1), false},
		{NumberFromFloat(nan()), false, 0, true},
		{NumberFromFloat(inf()), false, 0, true},
		{"abc", false, 0, true},
	}
	for _, tt := range tests {
		if got := tt.n.Positive(); got != tt.positive {
			t.Errorf("%q.Positive() = %v", tt.n, got)
		}
		d, err := tt.n.Duration()
		if (err != nil) != tt.err || d != tt.dur {
			t.Errorf("%q.Duration() = %v, %v; want %v (err %v)", tt.n, d, err, tt.dur, tt.err)
		}
	}
}

// A row's own fingerprint is over what the row holds: whether its repository name was
// resolved in the namespace when it was read does not change it, its declared name does.
func TestRowFingerprintIsTheRowsOwn(t *testing.T) {
	bound := eligibleRow("a", 10)
	unbound := bound
	unbound.Binding = ""
	if RowFingerprint(bound) != RowFingerprint(unbound) {
		t.Fatalf("the row fingerprint depends on the binding's resolution")
	}
	other := bound
	other.Repository = "acme/other"
	if RowFingerprint(other) == RowFingerprint(bound) {
		t.Fatalf("the row fingerprint does not cover the declared repository")
	}
}
