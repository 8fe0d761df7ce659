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
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

var (
	testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// testHost's current boot began an hour before testNow, after the
	// heartbeat of eligibleRow.
	testHost = Host{HostID: "host-a", BootID: "boot-1", BootTime: testNow.Add(-time.Hour)}
)

const testRepo = "acme/widgets"

func i64(v int64) *int64 { return &v }

// eligibleRow returns a row that passes every check when probed gone.
func eligibleRow(name string, pid int64) Row {
	return Row{
		Name:                name,
		Namespace:           "fleet",
		ClientInstanceID:    "inst-" + name,
		WorkerNamespace:     "team",
		Identity:            "bot-" + name,
		Remote:              "dadeschools",
		Repository:          testRepo,
		Binding:             testRepo,
		HeartbeatTTLSeconds: "900",
		HostID:              testHost.HostID,
		BootID:              testHost.BootID,
		PID:                 pid,
		StartTime:           i64(1000 + pid),
		GenerationID:        "gen-" + name,
		SessionID:           "sess-" + name,
		FencingEpoch:        i64(3),
		Phase:               fleet.Active,
		OwnershipState:      fleet.Stale,
		LastHeartbeatAt:     testNow.Add(-2 * time.Hour).Format(time.RFC3339),
		TokenFingerprint:    "tok-" + name,
		Revisions:           map[string]string{"config": "r1"},
		ResourceVersion:     "17",
	}
}

// liveRow returns a row whose heartbeat is fresh and which has no probe.
func liveRow(name string, pid int64) Row {
	r := eligibleRow(name, pid)
	r.LastHeartbeatAt = testNow.Add(-time.Minute).Format(time.RFC3339)
	r.OwnershipState = fleet.Live
	return r
}

func gone() Probe { return Probe{State: fleet.PIDGone} }

// baseInput holds one untouched eligible row ("keeper") and one row
// ("target") that each case mutates to fail exactly one requirement.
func baseInput() Input {
	return Input{
		Rows:                []Row{eligibleRow("keeper", 100), eligibleRow("target", 200)},
		CanonicalRepository: testRepo,
		CanonicalBinding:    testRepo,
		Now:                 testNow,
		Host:                testHost,
		Probes:              map[string]Probe{"keeper": gone(), "target": gone()},
	}
}

func findAssessment(p Plan, name string) (Assessment, bool) {
	for _, a := range append(append([]Assessment{}, p.Candidates...), p.Preserved...) {
		if a.WorkerIdentity == name {
			return a, true
		}
	}
	return Assessment{}, false
}

func TestPreserveReasonPerCode(t *testing.T) {
	tests := []struct {
		name   string
		want   string
		mutate func(in *Input, r *Row)
	}{
		{"phase retired", ReasonAlreadyTerminal, func(_ *Input, r *Row) { r.Phase = fleet.Retired; r.OwnershipState = fleet.Historical }},
		{"phase unknown value", ReasonAlreadyTerminal, func(_ *Input, r *Row) { r.Phase = "" }},
		{"no start time", ReasonIncompleteIdentity, func(_ *Input, r *Row) { r.StartTime = nil }},
		{"no pid", ReasonIncompleteIdentity, func(_ *Input, r *Row) { r.PID = 0 }},
		{"ttl 0.0", ReasonIncompleteIdentity, func(_ *Input, r *Row) { r.HeartbeatTTLSeconds = "0.0" }},
		{"ttl NaN", ReasonIncompleteIdentity, func(_ *Input, r *Row) { r.HeartbeatTTLSeconds = "NaN" }},
		{"blank identity", ReasonIncompleteIdentity, func(_ *Input, r *Row) { r.Identity = "  " }},
		{"no host id", ReasonIncompleteIdentity, func(_ *Input, r *Row) { r.HostID = "" }},
		{"heartbeat garbage", ReasonUnparsableHeartbeat, func(_ *Input, r *Row) { r.LastHeartbeatAt = "yesterday" }},
		{"heartbeat without zone", ReasonUnparsableHeartbeat, func(_ *Input, r *Row) { r.LastHeartbeatAt = "2026-03-01T10:00:00" }},
		{"heartbeat missing", ReasonUnparsableHeartbeat, func(_ *Input, r *Row) { r.LastHeartbeatAt = "" }},
		{"fresh and alive", ReasonWorkerLive, func(in *Input, r *Row) {
			r.LastHeartbeatAt = testNow.Add(-time.Minute).Format(time.RFC3339)
			in.Probes["target"] = Probe{State: fleet.PIDAlive, ObservedStartTime: r.StartTime}
		}},
		{"fresh and unprobed", ReasonWorkerLive, func(in *Input, r *Row) {
			r.LastHeartbeatAt = testNow.Add(-time.Minute).Format(time.RFC3339)
			delete(in.Probes, "target")
		}},
		{"legacy pid- instance", ReasonUntrustedProvenance, func(_ *Input, r *Row) { r.ClientInstanceID = "pid-4242" }},
		{"legacy proc- instance", ReasonUntrustedProvenance, func(_ *Input, r *Row) { r.ClientInstanceID = "proc-4242" }},
		{"other repository", ReasonRepositoryAmbiguous, func(_ *Input, r *Row) { r.Repository, r.Binding = "acme/other", "acme/other" }},
		{"a name that binds nothing", ReasonRepositoryAmbiguous, func(_ *Input, r *Row) { r.Repository, r.Binding = "acme/ghost", "" }},
		{"the same name, bound to another server's repository", ReasonRepositoryAmbiguous, func(_ *Input, r *Row) { r.Binding = "gitea:b/42" }},
		{"no repository", ReasonRepositoryAmbiguous, func(_ *Input, r *Row) { r.Repository = "" }},
		{"non-canonical repository", ReasonRepositoryAmbiguous, func(_ *Input, r *Row) { r.Repository = "acme/widgets/extra" }},
		{"other host, unprobed", ReasonHostBindingUnproven, func(in *Input, r *Row) { r.HostID = "host-b"; delete(in.Probes, "target") }},
		{"other host, probe says gone", ReasonHostBindingUnproven, func(_ *Input, r *Row) { r.HostID = "host-b" }},
		{"row boot unknown", ReasonBootIdentityUnknown, func(_ *Input, r *Row) { r.BootID = "" }},
		{"probe unknown", ReasonPIDLivenessUnknown, func(in *Input, _ *Row) { in.Probes["target"] = Probe{State: fleet.PIDUnknown, Detail: "EPERM"} }},
		{"probe missing", ReasonPIDLivenessUnknown, func(in *Input, _ *Row) { delete(in.Probes, "target") }},
		{"probe unrecognised", ReasonPIDLivenessUnknown, func(in *Input, _ *Row) { in.Probes["target"] = Probe{State: "zombie"} }},
		{"lapsed heartbeat but alive", ReasonPIDAlive, func(in *Input, r *Row) {
			in.Probes["target"] = Probe{State: fleet.PIDAlive, ObservedStartTime: r.StartTime}
		}},
		{"alive across a boot boundary", ReasonPIDAlive, func(in *Input, r *Row) {
			r.BootID = "boot-0"
			in.Probes["target"] = Probe{State: fleet.PIDAlive}
		}},
		{"gone but registered start time observed", ReasonPIDAlive, func(in *Input, r *Row) {
			in.Probes["target"] = Probe{State: fleet.PIDGone, ObservedStartTime: r.StartTime}
		}},
		{"probe reused", ReasonPIDReuseDetected, func(in *Input, _ *Row) { in.Probes["target"] = Probe{State: fleet.PIDReused} }},
		{"occupied with a different start time", ReasonPIDReuseDetected, func(in *Input, _ *Row) {
			in.Probes["target"] = Probe{State: fleet.PIDAlive, ObservedStartTime: i64(99999)}
		}},
		{"fresh heartbeat, reused pid", ReasonPIDReuseDetected, func(in *Input, r *Row) {
			r.LastHeartbeatAt = testNow.Add(-time.Minute).Format(time.RFC3339)
			in.Probes["target"] = Probe{State: fleet.PIDReused}
		}},
		{"fresh heartbeat, process gone", ReasonHeartbeatNotExpired, func(_ *Input, r *Row) {
			r.LastHeartbeatAt = testNow.Add(-time.Minute).Format(time.RFC3339)
		}},
		{"stored state live", ReasonAmbiguousOwnership, func(_ *Input, r *Row) { r.OwnershipState = fleet.Live }},
		{"stored state empty", ReasonAmbiguousOwnership, func(_ *Input, r *Row) { r.OwnershipState = "" }},
		{"session shared with live row", ReasonConflictingIdentity, func(in *Input, r *Row) {
			o := liveRow("other", 300)
			o.SessionID = r.SessionID
			in.Rows = append(in.Rows, o)
		}},
		{"generation shared with unprobeable row", ReasonConflictingIdentity, func(in *Input, r *Row) {
			o := eligibleRow("other", 300)
			o.GenerationID = r.GenerationID
			in.Rows = append(in.Rows, o) // no probe: unknown
		}},
		{"process identity shared with alive row", ReasonConflictingIdentity, func(in *Input, r *Row) {
			o := eligibleRow("other", r.PID)
			o.StartTime = r.StartTime
			in.Rows = append(in.Rows, o)
			in.Probes["other"] = Probe{State: fleet.PIDAlive}
		}},
		{"a pod's process identity shared with an alive row of the same pod", ReasonConflictingIdentity, func(in *Input, r *Row) {
			r.PodUID = "6f1c2a52-3b7d-4e2a-9a4f-0c1d2e3f4a5b"
			o := eligibleRow("other", r.PID)
			o.PodUID, o.StartTime = r.PodUID, r.StartTime
			in.Rows = append(in.Rows, o)
			in.Probes["other"] = Probe{State: fleet.PIDAlive}
		}},
		{"duplicate worker identity", ReasonConflictingIdentity, func(in *Input, r *Row) {
			o := eligibleRow("target", 300)
			o.Namespace = "elsewhere"
			in.Rows = append(in.Rows, o)
		}},
		{"client instance shared with live row", ReasonClientInstanceConflict, func(in *Input, r *Row) {
			o := liveRow("other", 300)
			o.ClientInstanceID = r.ClientInstanceID
			in.Rows = append(in.Rows, o)
		}},
		{"client instance shared with unprobeable row", ReasonClientInstanceConflict, func(in *Input, r *Row) {
			o := eligibleRow("other", 300)
			o.ClientInstanceID = r.ClientInstanceID
			in.Rows = append(in.Rows, o)
		}},
		{"active workflow owner", ReasonProtectedWorkflowOwner, func(in *Input, _ *Row) {
			in.ActiveWorkflowOwners = []string{"target", "not-registered"}
		}},
	}

	covered := map[string]bool{}
	// Two pods' workers may share a namespace pid: another pod's alive worker with this
	// row's host, boot and pid is no conflict.
	t.Run("another pod's alive worker with the same namespace pid", func(t *testing.T) {
		in := baseInput()
		r := &in.Rows[1]
		r.PodUID = "6f1c2a52-3b7d-4e2a-9a4f-0c1d2e3f4a5b"
		o := eligibleRow("other", r.PID)
		o.PodUID, o.StartTime = "0a0b0c0d-1111-2222-3333-444455556666", r.StartTime
		in.Rows = append(in.Rows, o)
		in.Probes["other"] = Probe{State: fleet.PIDAlive}
		if got, _ := findAssessment(BuildPlan(in), "target"); got.ReasonCode != ReasonEligibleStaleOrphan {
			t.Fatalf("target reason = %q (%s), want eligible", got.ReasonCode, got.Detail)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := baseInput()
			tt.mutate(&in, &in.Rows[1])
			p := BuildPlan(in)

			got, ok := findAssessment(p, "target")
			if !ok {
				t.Fatalf("target not assessed")
			}
			if got.ReasonCode != tt.want {
				t.Fatalf("target reason = %q (%s), want %q", got.ReasonCode, got.Detail, tt.want)
			}
			if got.Detail == "" {
				t.Fatalf("empty detail")
			}
			for _, k := range []string{EvidenceClassification, EvidenceHeartbeatExpiresAt, EvidenceHeartbeatExpired, EvidenceProbeState, EvidenceRowHostID, EvidenceHostID, EvidenceRowBootID, EvidenceHostBootID} {
				if _, ok := got.Evidence[k]; !ok {
					t.Fatalf("evidence lacks %q: %v", k, got.Evidence)
				}
			}
			if tt.want == ReasonConflictingIdentity || tt.want == ReasonClientInstanceConflict {
				if got.Evidence[EvidenceConflictingWorkers] == "" {
					t.Fatalf("conflict evidence missing: %v", got.Evidence)
				}
			}
			keeper, _ := findAssessment(p, "keeper")
			if keeper.ReasonCode != ReasonEligibleStaleOrphan {
				t.Fatalf("keeper reason = %q (%s), want eligible", keeper.ReasonCode, keeper.Detail)
			}
			if !reflect.DeepEqual(p.CandidateWorkerIdentities, []string{"keeper"}) {
				t.Fatalf("candidates = %v", p.CandidateWorkerIdentities)
			}
			if tt.want == ReasonProtectedWorkflowOwner && !reflect.DeepEqual(p.ProtectedActiveWorkflowOwners, []string{"target"}) {
				t.Fatalf("protected owners = %v", p.ProtectedActiveWorkflowOwners)
			}
			checkPlanShape(t, in, p)
		})
		covered[tt.want] = true
	}
	for _, code := range CheckOrder() {
		if !covered[code] {
			t.Errorf("no test case reaches %s", code)
		}
	}
}

func TestEligibleEdgeCases(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(in *Input, r *Row)
	}{
		{"base", func(*Input, *Row) {}},
		{"boot changed and pid free", func(_ *Input, r *Row) { r.BootID = "boot-0" }},
		{"gone with matching alive start time absent", func(in *Input, r *Row) { in.Probes["target"] = Probe{State: fleet.PIDGone, Detail: "ESRCH"} }},
		{"ttl as float text", func(_ *Input, r *Row) { r.HeartbeatTTLSeconds = "900.0" }},
		{"repository differs only in case", func(_ *Input, r *Row) { r.Repository = "ACME/Widgets" }},
		{"heartbeat with offset and fraction", func(_ *Input, r *Row) { r.LastHeartbeatAt = "2026-03-01T11:00:00.5+01:00" }},
		{"heartbeat exactly at expiry", func(_ *Input, r *Row) {
			r.LastHeartbeatAt = testNow.Add(-900 * time.Second).Format(time.RFC3339)
		}},
		{"shares session with a retired row", func(in *Input, r *Row) {
			o := liveRow("old", 300)
			o.Phase = fleet.Retired
			o.SessionID = r.SessionID
			in.Rows = append(in.Rows, o)
		}},
		{"shares client instance with a gone row", func(in *Input, r *Row) {
			o := eligibleRow("sibling", 300)
			o.ClientInstanceID = r.ClientInstanceID
			in.Rows = append(in.Rows, o)
			in.Probes["sibling"] = gone()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := baseInput()
			tt.mutate(&in, &in.Rows[1])
			p := BuildPlan(in)
			got, _ := findAssessment(p, "target")
			if got.ReasonCode != ReasonEligibleStaleOrphan {
				t.Fatalf("target reason = %q (%s), want eligible", got.ReasonCode, got.Detail)
			}
			checkPlanShape(t, in, p)
		})
	}
}

func TestMissingCanonicalRepositoryPreservesAll(t *testing.T) {
	in := baseInput()
	in.CanonicalRepository = ""
	p := BuildPlan(in)
	if p.CandidateCount != 0 || p.PreservedReasonCounts[ReasonRepositoryAmbiguous] != 2 {
		t.Fatalf("plan = %+v", p)
	}
}

func TestControllerHostUnknown(t *testing.T) {
	in := baseInput()
	in.Host = Host{}
	p := BuildPlan(in)
	if p.CandidateCount != 0 || p.PreservedReasonCounts[ReasonHostBindingUnproven] != 2 {
		t.Fatalf("counts = %v", p.PreservedReasonCounts)
	}
	in = baseInput()
	in.Host.BootID = ""
	p = BuildPlan(in)
	if p.CandidateCount != 0 || p.PreservedReasonCounts[ReasonBootIdentityUnknown] != 2 {
		t.Fatalf("counts = %v", p.PreservedReasonCounts)
	}
}

func TestCheckChainCodes(t *testing.T) {
	order := CheckOrder()
	if len(order) != 16 {
		t.Fatalf("chain has %d checks", len(order))
	}
	seen := map[string]bool{}
	for i, c := range checkChain {
		if seen[c.code] || c.code != order[i] {
			t.Fatalf("check %d: code %q duplicated or out of order", i, c.code)
		}
		seen[c.code] = true
	}
}

func TestPlanDeterministicAndOrderIndependent(t *testing.T) {
	in := baseInput()
	in.Rows = append(in.Rows, liveRow("alive", 300), eligibleRow("b-stale", 400), eligibleRow("a-stale", 500))
	in.Probes["b-stale"] = gone()
	in.Probes["a-stale"] = Probe{State: fleet.PIDReused}
	in.ActiveWorkflowOwners = []string{"target", "alive"}
	p1 := BuildPlan(in)

	rev := in
	rev.Rows = make([]Row, len(in.Rows))
	for i, r := range in.Rows {
		rev.Rows[len(in.Rows)-1-i] = r
	}
	rev.ActiveWorkflowOwners = []string{"alive", "target", "alive"}
	p2 := BuildPlan(rev)
	if !reflect.DeepEqual(p1, p2) {
		t.Fatalf("plans differ:\n%+v\n%+v", p1, p2)
	}
	if !sort.StringsAreSorted(p1.CandidateWorkerIdentities) {
		t.Fatalf("identities unsorted: %v", p1.CandidateWorkerIdentities)
	}
	if !reflect.DeepEqual(p1.CandidateWorkerIdentities, []string{"b-stale", "keeper"}) {
		t.Fatalf("candidates = %v", p1.CandidateWorkerIdentities)
	}
	if !reflect.DeepEqual(p1.ProtectedActiveWorkflowOwners, []string{"alive", "target"}) {
		t.Fatalf("protected = %v", p1.ProtectedActiveWorkflowOwners)
	}
	if p1.Outcome != OutcomePlanned || p1.MutationPerformed || !p1.ReadOnly {
		t.Fatalf("plan flags wrong: %+v", p1)
	}
	checkPlanShape(t, in, p1)
}

// checkPlanShape asserts the invariants every plan must satisfy.
func checkPlanShape(t *testing.T, in Input, p Plan) {
	t.Helper()
	if p.Outcome != OutcomePlanned || p.MutationPerformed || !p.ReadOnly {
		t.Fatalf("plan flags wrong: outcome=%q mutation=%v readOnly=%v", p.Outcome, p.MutationPerformed, p.ReadOnly)
	}
	if p.AssessedCount != len(in.Rows) || p.CandidateCount+p.PreservedCount != p.AssessedCount ||
		p.CandidateCount != len(p.Candidates) || p.PreservedCount != len(p.Preserved) ||
		len(p.CandidateWorkerIdentities) != p.CandidateCount {
		t.Fatalf("counts do not add up: %+v", p)
	}
	sum := 0
	for _, c := range p.PreservedReasonCounts {
		sum += c
	}
	if sum != p.PreservedCount {
		t.Fatalf("reason counts sum %d, preserved %d", sum, p.PreservedCount)
	}
	if !strings.HasPrefix(p.RegistryFingerprint, "sha256:") || len(p.RegistryFingerprint) != 71 ||
		!strings.HasPrefix(p.CandidateFingerprint, "sha256:") || len(p.CandidateFingerprint) != 71 {
		t.Fatalf("bad fingerprints %q %q", p.RegistryFingerprint, p.CandidateFingerprint)
	}
	byName := map[string][]Row{}
	for _, r := range in.Rows {
		byName[r.Name] = append(byName[r.Name], r)
	}
	var cand []Row
	for i, a := range p.Candidates {
		if a.ReasonCode != ReasonEligibleStaleOrphan || a.WorkerIdentity != p.CandidateWorkerIdentities[i] {
			t.Fatalf("candidate %d malformed: %+v", i, a)
		}
		rs := byName[a.WorkerIdentity]
		if len(rs) != 1 {
			t.Fatalf("candidate %q matches %d rows", a.WorkerIdentity, len(rs))
		}
		r := rs[0]
		cand = append(cand, r)
		if pr, ok := in.Probes[r.Name]; !ok || pr.State != fleet.PIDGone {
			t.Fatalf("candidate %q has probe %+v", r.Name, pr)
		}
		if r.Phase != fleet.Active || r.HostID != in.Host.HostID || r.HostID == "" {
			t.Fatalf("candidate %q violates phase/host: %+v", r.Name, r)
		}
		for _, o := range in.ActiveWorkflowOwners {
			if o == r.Name {
				t.Fatalf("protected worker %q is a candidate", o)
			}
		}
	}
	for _, a := range p.Preserved {
		if a.ReasonCode == ReasonEligibleStaleOrphan || a.ReasonCode == "" {
			t.Fatalf("preserved row with reason %q", a.ReasonCode)
		}
		if a.Evidence == nil || a.Evidence[EvidenceProbeState] == "" || a.Evidence[EvidenceClassification] == "" {
			t.Fatalf("preserved %q lacks evidence", a.WorkerIdentity)
		}
	}
	if got := CandidateFingerprint(cand, in.CanonicalBinding); got != p.CandidateFingerprint {
		t.Fatalf("candidate fingerprint %s != recomputed %s", p.CandidateFingerprint, got)
	}
	if got := RegistryFingerprint(in.Rows); got != p.RegistryFingerprint {
		t.Fatalf("registry fingerprint %s != recomputed %s", p.RegistryFingerprint, got)
	}
}

func TestFailureSpecificEvidence(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(in *Input, r *Row)
		want   map[string]string
		absent []string
	}{
		{"candidate carries only the common evidence", func(*Input, *Row) {}, map[string]string{
			EvidenceClassification: fleet.Stale, EvidenceHeartbeatExpired: "true", EvidenceProbeState: "gone",
			EvidenceRowHostID: "host-a", EvidenceHostID: "host-a", EvidenceRowBootID: "boot-1", EvidenceHostBootID: "boot-1",
			EvidenceHeartbeatExpiresAt: "2026-03-01T10:15:00Z",
		}, []string{EvidenceEffectiveProbeState, EvidencePID, EvidenceActiveWorkflowOwner}},
		{"reuse records the process identity", func(in *Input, _ *Row) {
			in.Probes["target"] = Probe{State: fleet.PIDAlive, ObservedStartTime: i64(5), Detail: "stat"}
		}, map[string]string{
			EvidenceProbeState: "alive", EvidenceEffectiveProbeState: "reused", EvidencePID: "200",
			EvidenceRowStartTime: "1200", EvidenceObservedStartTime: "5", EvidenceProbeDetail: "stat",
		}, nil},
		{"other host records the discarded probe", func(_ *Input, r *Row) { r.HostID = "host-b" }, map[string]string{
			EvidenceProbeState: "gone", EvidenceEffectiveProbeState: "unknown", EvidenceRowHostID: "host-b", EvidenceHostID: "host-a",
		}, nil},
		{"repository", func(_ *Input, r *Row) { r.Repository, r.Binding = "acme/x", "" }, map[string]string{
			EvidenceRepository: "acme/x", EvidenceCanonicalRepository: testRepo, EvidenceCanonicalBinding: testRepo,
		}, []string{EvidenceBinding}},
		{"repository bound elsewhere", func(_ *Input, r *Row) { r.Binding = "gitea:b/42" }, map[string]string{
			EvidenceRepository: testRepo, EvidenceBinding: "gitea:b/42", EvidenceCanonicalBinding: testRepo,
		}, nil},
		{"incomplete", func(_ *Input, r *Row) { r.HeartbeatTTLSeconds = "NaN"; r.Remote = "" }, map[string]string{
			EvidenceMissingFields: "remote,heartbeatTTLSeconds", EvidenceHeartbeatTTLSeconds: "NaN",
			EvidenceHeartbeatExpired: "unknown", EvidenceHeartbeatExpiresAt: "",
		}, nil},
		{"owner", func(in *Input, _ *Row) { in.ActiveWorkflowOwners = []string{"target"} }, map[string]string{
			EvidenceActiveWorkflowOwner: "true",
		}, nil},
		{"ownership", func(_ *Input, r *Row) { r.OwnershipState = "live" }, map[string]string{EvidenceOwnershipState: "live"}, nil},
		{"terminal", func(_ *Input, r *Row) { r.Phase = fleet.Retired }, map[string]string{EvidencePhase: fleet.Retired, EvidenceClassification: fleet.Historical}, nil},
		{"heartbeat", func(_ *Input, r *Row) { r.LastHeartbeatAt = "soon" }, map[string]string{EvidenceLastHeartbeatAt: "soon"}, nil},
		{"provenance", func(_ *Input, r *Row) { r.ClientInstanceID = "proc-9" }, map[string]string{EvidenceClientInstanceID: "proc-9"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := baseInput()
			tt.mutate(&in, &in.Rows[1])
			a, _ := findAssessment(BuildPlan(in), "target")
			for k, v := range tt.want {
				if got, ok := a.Evidence[k]; !ok || got != v {
					t.Errorf("evidence[%s] = %q (present %v), want %q; all: %v", k, got, ok, v, a.Evidence)
				}
			}
			for _, k := range tt.absent {
				if _, ok := a.Evidence[k]; ok {
					t.Errorf("evidence has unexpected %s: %v", k, a.Evidence)
				}
			}
		})
	}
}

// A plan whose binding names no repository of its namespace retires nothing: every row,
// even one bound to the very repository the plan names, is preserved with the reason.
func TestPlanBoundToNoRepository(t *testing.T) {
	in := baseInput()
	in.RepositoryProblem = "acme/widgets is named by two GiteaRepositories"
	p := BuildPlan(in)
	if p.CandidateCount != 0 || p.PreservedReasonCounts[ReasonRepositoryAmbiguous] != len(in.Rows) {
		t.Fatalf("candidates %d, preserved %v; want none and all %d repository_binding_ambiguous", p.CandidateCount, p.PreservedReasonCounts, len(in.Rows))
	}
	for _, a := range p.Preserved {
		if !strings.Contains(a.Detail, in.RepositoryProblem) {
			t.Fatalf("%s: detail %q does not say why", a.WorkerIdentity, a.Detail)
		}
	}
}

// A plan whose repository object has not resolved its Gitea repository ID has no
// canonical binding: nothing can be compared with it, so every row is preserved.
func TestPlanWithoutCanonicalBindingPreservesAll(t *testing.T) {
	in := baseInput()
	in.CanonicalBinding = ""
	p := BuildPlan(in)
	if p.CandidateCount != 0 || p.PreservedReasonCounts[ReasonRepositoryAmbiguous] != len(in.Rows) {
		t.Fatalf("plan = %+v, want every row %s", p.PreservedReasonCounts, ReasonRepositoryAmbiguous)
	}
	for _, a := range p.Preserved {
		if !strings.Contains(a.Detail, "no canonical binding") {
			t.Errorf("%s: detail %q does not say the plan's binding has no canonical value", a.WorkerIdentity, a.Detail)
		}
	}
}

// Rows and plan compare by the binding's canonical value: two rows spelling the bound
// repository differently are both candidates, and a row whose name now resolves to a
// repository on another server is not, though its spelling equals the plan's.
func TestRepositoryComparedByCanonicalBinding(t *testing.T) {
	in := baseInput()
	in.CanonicalBinding = "gitea:a/42"
	in.Rows[0].Binding = "gitea:a/42"
	in.Rows[0].Repository = "ACME/Widgets"
	in.Rows[1].Binding = "gitea:b/42"
	p := BuildPlan(in)
	if p.CandidateCount != 1 || p.Candidates[0].WorkerIdentity != "keeper" {
		t.Fatalf("candidates = %v, want keeper only", p.CandidateWorkerIdentities)
	}
	a, _ := findAssessment(p, "target")
	if a.ReasonCode != ReasonRepositoryAmbiguous || !strings.Contains(a.Detail, "resolves to gitea:b/42") {
		t.Fatalf("target = %+v, want %s saying where its binding resolves", a, ReasonRepositoryAmbiguous)
	}
}
