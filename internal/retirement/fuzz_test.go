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
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

func FuzzCanonicalNumber(f *testing.F) {
	for _, s := range []string{"900", "900.0", `"900"`, "9e2", "-0", "NaN", "+Inf", "1e999999", ".5", "0.0000001", "1e", "  7  "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c1, err1 := CanonicalNumber(s)
		c2, err2 := CanonicalNumber(s)
		if c1 != c2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("not deterministic for %q", s)
		}
		if err1 != nil {
			return
		}
		// Canonical text is a fixed point and valid float syntax.
		if again, err := CanonicalNumber(c1); err != nil || again != c1 {
			t.Fatalf("canonical %q of %q re-canonicalises to %q, %v", c1, s, again, err)
		}
		if _, err := strconv.ParseFloat(c1, 64); err != nil {
			if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
				t.Fatalf("canonical %q does not parse: %v", c1, err)
			}
		}
		// Quoting and surrounding blanks never change the value.
		if q, err := CanonicalNumber(` "` + c1 + `" `); err != nil || q != c1 {
			t.Fatalf("quoted form of %q gives %q, %v", c1, q, err)
		}
		_, _ = Number(s).Duration()
		_ = Number(s).Positive()
	})
}

// byteSource hands out fuzz bytes; once exhausted it returns zeros.
type byteSource struct{ b []byte }

func (s *byteSource) next() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *byteSource) pick(opts ...string) string { return opts[int(s.next())%len(opts)] }

func (s *byteSource) optInt(opts ...int64) *int64 {
	c := int(s.next()) % (len(opts) + 1)
	if c == len(opts) {
		return nil
	}
	v := opts[c]
	return &v
}

// fuzzInput builds a small registry from fuzz bytes. Every row starts as an
// eligible one and receives a few mutations drawn from tiny alphabets, so
// that candidates are common and names, sessions, pids and instance ids
// collide often.
func fuzzInput(data []byte) Input {
	src := &byteSource{b: data}
	n := int(src.next()) % 12
	hb := []string{"", "garbage", "2026-03-01T11:59:00Z", "2026-03-01T09:00:00Z", "2026-03-01T12:00:00Z", "2026-03-01T11:50:00.5+00:00", "2026-03-01T11:00:00"}
	in := Input{
		CanonicalRepository: testRepo,
		CanonicalBinding:    testRepo,
		Now:                 testNow,
		Host:                testHost,
		Probes:              map[string]Probe{},
	}
	switch src.next() % 16 {
	case 0:
		in.CanonicalRepository = src.pick("ACME/widgets", "", "bad", "a/b/c")
		in.CanonicalBinding = src.pick("acme/widgets", "", "gitea:a/42")
	case 1:
		in.Host = Host{HostID: src.pick("host-a", ""), BootID: src.pick("boot-1", "")}
	case 2:
		in.Host.BootTime = time.Time{}
	case 3:
		in.Host.BootTime = testNow.Add(-150 * time.Minute)
	}
	mutations := []func(r *Row){
		func(r *Row) { r.Namespace = src.pick("fleet", "other") },
		func(r *Row) { r.ClientInstanceID = src.pick("inst-a", "inst-b", "pid-1", "proc-2", "", "inst-") },
		func(r *Row) { r.WorkerNamespace = src.pick("team", "", "ops") },
		func(r *Row) { r.Identity = src.pick("bot", "", "bot2") },
		func(r *Row) { r.Remote = src.pick("dadeschools", "prgs", "") },
		func(r *Row) {
			r.Repository = src.pick("Acme/Widgets", "acme/other", "", "acme/widgets/x", " acme/widgets")
			r.Binding = src.pick("acme/widgets", "", "acme/other", "gitea:a/42", "gitea:b/42")
		},
		func(r *Row) {
			r.HeartbeatTTLSeconds = Number(src.pick("900.0", "0", "-5", "NaN", "", "1e400", "60", "1e-30"))
		},
		func(r *Row) { r.HostID = src.pick("host-a", "host-b", "") },
		func(r *Row) { r.BootID = src.pick("boot-1", "boot-0", "") },
		func(r *Row) { r.PID = int64(src.next()%4) - 1 },
		func(r *Row) { r.StartTime = src.optInt(1000, 2000) },
		func(r *Row) { r.GenerationID = src.pick("", "g1", "g2") },
		func(r *Row) { r.SessionID = src.pick("", "s1", "s2") },
		func(r *Row) { r.FencingEpoch = src.optInt(1, 2) },
		func(r *Row) { r.Phase = src.pick(fleet.Active, fleet.Retired, "") },
		func(r *Row) { r.OwnershipState = src.pick(fleet.Stale, fleet.Live, fleet.Historical, "") },
		func(r *Row) { r.LastHeartbeatAt = hb[int(src.next())%len(hb)] },
	}
	for i := 0; i < n; i++ {
		name := src.pick("w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8", "w9")
		r := eligibleRow(name, 100+int64(src.next()%6))
		r.StartTime = src.optInt(1000, 2000, 1000, 1000)
		for k := int(src.next() % 4); k > 0; k-- {
			mutations[int(src.next())%len(mutations)](&r)
		}
		in.Rows = append(in.Rows, r)
		switch src.next() % 8 {
		case 0:
			// no probe
		case 1:
			in.Probes[name] = Probe{State: fleet.PIDAlive, ObservedStartTime: src.optInt(1000, 2000)}
		case 2:
			in.Probes[name] = Probe{State: fleet.PIDReused, ObservedStartTime: src.optInt(1000, 2000)}
		case 3:
			in.Probes[name] = Probe{State: fleet.PIDUnknown}
		case 4:
			in.Probes[name] = Probe{State: fleet.PIDGone, ObservedStartTime: src.optInt(1000, 2000)}
		default:
			in.Probes[name] = gone()
		}
		if src.next()%5 == 0 {
			in.ActiveWorkflowOwners = append(in.ActiveWorkflowOwners, name)
		}
	}
	return in
}

func FuzzFingerprint(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice over"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		fp := RegistryFingerprint(in.Rows)
		if fp != RegistryFingerprint(in.Rows) {
			t.Fatalf("not deterministic")
		}
		rev := make([]Row, len(in.Rows))
		for i, r := range in.Rows {
			rev[len(rev)-1-i] = r
		}
		if RegistryFingerprint(rev) != fp {
			t.Fatalf("depends on row order")
		}
		if CandidateFingerprint(rev, in.CanonicalBinding) != CandidateFingerprint(in.Rows, in.CanonicalBinding) {
			t.Fatalf("candidate fingerprint depends on row order")
		}
		if len(in.Rows) > 0 {
			mod := append([]Row(nil), in.Rows...)
			mod[0].SessionID += "!"
			if RegistryFingerprint(mod) == fp {
				t.Fatalf("session change did not move the fingerprint")
			}
		}
	})
}

func FuzzPlan(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1})
	f.Add([]byte("a registry full of workers that are long gone and some that are not"))
	f.Add([]byte{11, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 1, 0, 0, 0, 3, 4, 1, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		p1 := BuildPlan(in)
		p2 := BuildPlan(in)
		if !reflect.DeepEqual(p1, p2) {
			t.Fatalf("plan not deterministic")
		}
		checkFuzzPlan(t, in, p1)

		// Neither the row order nor the claim order matters.
		rev := in
		rev.Rows = make([]Row, len(in.Rows))
		for i, r := range in.Rows {
			rev.Rows[len(in.Rows)-1-i] = r
		}
		rev.ActiveWorkflowOwners = append([]string(nil), in.ActiveWorkflowOwners...)
		slices.Reverse(rev.ActiveWorkflowOwners)
		if !reflect.DeepEqual(BuildPlan(rev), p1) {
			t.Fatalf("plan depends on input order")
		}

		// Time never moves the registry fingerprint.
		later := in
		later.Now = in.Now.Add(7 * time.Hour)
		if BuildPlan(later).RegistryFingerprint != p1.RegistryFingerprint {
			t.Fatalf("registry fingerprint depends on Now")
		}
		// A clean approval of the plan against the same rows proceeds and
		// retires exactly the candidates.
		d := DecideApply(Approval{RegistryFingerprint: p1.RegistryFingerprint, CandidateFingerprint: p1.CandidateFingerprint,
			WorkerIdentities: p1.CandidateWorkerIdentities}, p1, in.Rows)
		// A CandidateSet approval of the same plan decides exactly the same.
		cs := DecideApply(Approval{Binding: BindingCandidateSet, CandidateFingerprint: p1.CandidateFingerprint,
			WorkerIdentities: p1.CandidateWorkerIdentities}, p1, in.Rows)
		if !reflect.DeepEqual(cs, d) {
			t.Fatalf("CandidateSet decision %+v differs from Registry decision %+v on an unchanged registry", cs, d)
		}
		if len(p1.CandidateWorkerIdentities) == 0 {
			if d.Proceed || d.Outcome != OutcomeNothingRequested {
				t.Fatalf("empty approval decision %+v", d)
			}
			return
		}
		if !d.Proceed || len(d.Retire) != p1.CandidateCount || len(d.Preserved) != 0 {
			t.Fatalf("clean approval decision %+v", d)
		}
		for _, r := range d.Retire {
			pr := in.Probes[r.Name]
			if ok, reason, _ := RecheckBeforeWrite(r, &pr, in.Host); !ok {
				t.Fatalf("candidate %q fails recheck with the same probe: %s", r.Name, reason)
			}
		}
	})
}

// checkFuzzPlan asserts the safety invariants on an arbitrary plan.
func checkFuzzPlan(t *testing.T, in Input, p Plan) {
	t.Helper()
	if p.Outcome != OutcomePlanned || p.MutationPerformed || !p.ReadOnly {
		t.Fatalf("plan flags wrong")
	}
	if p.AssessedCount != len(in.Rows) || p.CandidateCount+p.PreservedCount != p.AssessedCount ||
		p.CandidateCount != len(p.Candidates) || p.PreservedCount != len(p.Preserved) ||
		len(p.CandidateWorkerIdentities) != p.CandidateCount {
		t.Fatalf("counts do not add up")
	}
	sum := 0
	for code, c := range p.PreservedReasonCounts {
		if c <= 0 || code == ReasonEligibleStaleOrphan {
			t.Fatalf("bad reason count %s=%d", code, c)
		}
		sum += c
	}
	if sum != p.PreservedCount {
		t.Fatalf("reason counts do not add up")
	}
	known := map[string]bool{}
	for _, c := range CheckOrder() {
		known[c] = true
	}
	for _, a := range p.Preserved {
		if !known[a.ReasonCode] {
			t.Fatalf("unknown preserve reason %q", a.ReasonCode)
		}
	}
	names := map[string]int{}
	for _, r := range in.Rows {
		names[r.Name]++
	}
	owners := map[string]bool{}
	for _, o := range in.ActiveWorkflowOwners {
		owners[o] = true
	}
	for i, id := range p.CandidateWorkerIdentities {
		if i > 0 && p.CandidateWorkerIdentities[i-1] >= id {
			t.Fatalf("candidate identities not strictly sorted")
		}
		if names[id] != 1 {
			t.Fatalf("candidate %q matches %d rows", id, names[id])
		}
		if owners[id] {
			t.Fatalf("protected worker %q is a candidate", id)
		}
		pr, ok := in.Probes[id]
		if !ok || pr.State != fleet.PIDGone || pr.ObservedStartTime != nil {
			t.Fatalf("candidate %q has probe %+v", id, pr)
		}
		var r Row
		for _, x := range in.Rows {
			if x.Name == id {
				r = x
			}
		}
		if r.Phase != fleet.Active || r.OwnershipState != fleet.Stale || !fleet.IsTrustedInstanceID(r.ClientInstanceID) ||
			r.HostID != in.Host.HostID || r.BootID == "" || in.Host.BootID == "" || r.StartTime == nil || r.PID <= 0 {
			t.Fatalf("candidate %q violates the conjunction: %+v", id, r)
		}
		if r.BootID != in.Host.BootID {
			hb, ok := parseHeartbeat(r.LastHeartbeatAt)
			if in.Host.BootTime.IsZero() || !ok || !hb.Before(in.Host.BootTime) {
				t.Fatalf("candidate %q of boot %s has no heartbeat before this boot (%v): %+v", id, r.BootID, in.Host.BootTime, r)
			}
		}
	}
}
