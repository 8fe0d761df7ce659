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
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// approvalBound is the approval of p under binding: a CandidateSet approval carries no
// registry fingerprint.
func approvalBound(p Plan, binding string) Approval {
	a := approvalFor(p)
	a.Binding = binding
	if binding == BindingCandidateSet {
		a.RegistryFingerprint = ""
	}
	return a
}

// rowNamed returns the row called name in in.Rows.
func rowNamed(t *testing.T, in *Input, name string) *Row {
	t.Helper()
	for i := range in.Rows {
		if in.Rows[i].Name == name {
			return &in.Rows[i]
		}
	}
	t.Fatalf("no row %q", name)
	return nil
}

// TestDecideApplyBindings runs every change between plan and apply under both bindings.
// The fixture (applyFixture) has two candidates, keeper and target, and one live worker,
// alive. "" as an outcome means proceed, retiring keeper and target.
func TestDecideApplyBindings(t *testing.T) {
	tests := []struct {
		name string
		// change mutates the world between plan and apply (nil: nothing changes).
		change func(t *testing.T, in *Input)
		// approval mutates the approval after it was copied from the plan.
		approval     func(a *Approval)
		registry     string // outcome under BindingRegistry
		candidateSet string // outcome under BindingCandidateSet
	}{
		{name: "nothing changed"},
		{
			name: "a live worker heartbeats",
			change: func(t *testing.T, in *Input) {
				rowNamed(t, in, "alive").LastHeartbeatAt = testNow.Add(-2 * time.Second).Format(time.RFC3339)
			},
			registry: OutcomeRegistryRevisionMoved,
		},
		{
			name: "fifty live workers heartbeat",
			change: func(t *testing.T, in *Input) {
				for i := range 50 {
					in.Rows = append(in.Rows, liveRow(fmt.Sprintf("live-%02d", i), int64(1000+i)))
				}
			},
			registry: OutcomeRegistryRevisionMoved,
		},
		{
			name:     "a live worker is retired by someone else",
			change:   func(t *testing.T, in *Input) { rowNamed(t, in, "alive").Phase = fleet.Retired },
			registry: OutcomeRegistryRevisionMoved,
		},
		{
			name: "a candidate's heartbeat is renewed (fresh again)",
			change: func(t *testing.T, in *Input) {
				rowNamed(t, in, "target").LastHeartbeatAt = testNow.Add(-time.Second).Format(time.RFC3339)
			},
			registry:     OutcomeRegistryRevisionMoved,
			candidateSet: OutcomeCandidateSetMoved,
		},
		{
			name: "a candidate's heartbeat moves but stays expired (still eligible)",
			change: func(t *testing.T, in *Input) {
				rowNamed(t, in, "target").LastHeartbeatAt = testNow.Add(-3 * time.Hour).Format(time.RFC3339)
			},
			registry:     OutcomeRegistryRevisionMoved,
			candidateSet: OutcomeCandidateSetMoved,
		},
		{
			name:         "a candidate's process is running again",
			change:       func(t *testing.T, in *Input) { in.Probes["keeper"] = Probe{State: fleet.PIDAlive} },
			registry:     OutcomeCandidateSetMoved,
			candidateSet: OutcomeCandidateSetMoved,
		},
		{
			name:         "a candidate took a task claim",
			change:       func(t *testing.T, in *Input) { in.ActiveWorkflowOwners = []string{"target"} },
			registry:     OutcomeCandidateSetMoved,
			candidateSet: OutcomeCandidateSetMoved,
		},
		{
			name: "a new stale orphan appears (the candidate set grows)",
			change: func(t *testing.T, in *Input) {
				in.Rows = append(in.Rows, eligibleRow("newcomer", 400))
				in.Probes["newcomer"] = gone()
			},
			registry:     OutcomeRegistryRevisionMoved,
			candidateSet: OutcomeCandidateSetMoved,
		},
		{
			name: "a candidate changes outside the fingerprint (caught by the guarded write)",
			change: func(t *testing.T, in *Input) {
				r := rowNamed(t, in, "target")
				r.ResourceVersion, r.TokenFingerprint, r.Revisions = "99", "tok-new", map[string]string{"config": "r2"}
			},
		},
		{
			name:         "the approval names a live worker too",
			approval:     func(a *Approval) { a.WorkerIdentities = append(a.WorkerIdentities, "alive") },
			candidateSet: OutcomeCandidateSetMoved, // Registry proceeds and keeps alive as not_in_candidate_set
		},
		{
			name:         "the approval names a registration that does not exist",
			approval:     func(a *Approval) { a.WorkerIdentities = append(a.WorkerIdentities, "ghost") },
			candidateSet: OutcomeCandidateSetMoved,
		},
		{
			name:     "a subset of the candidates (a truncated listing)",
			approval: func(a *Approval) { a.WorkerIdentities = []string{"target"} },
		},
		{
			name: "replay after a successful apply",
			change: func(t *testing.T, in *Input) {
				rowNamed(t, in, "keeper").Phase = fleet.Retired
				rowNamed(t, in, "target").Phase = fleet.Retired
			},
			registry:     OutcomeAlreadyRetired,
			candidateSet: OutcomeAlreadyRetired,
		},
		{
			name:         "an empty list",
			approval:     func(a *Approval) { a.WorkerIdentities = nil },
			registry:     OutcomeNothingRequested,
			candidateSet: OutcomeNothingRequested,
		},
	}
	for _, tt := range tests {
		for _, binding := range []string{BindingRegistry, BindingCandidateSet} {
			t.Run(tt.name+"/"+binding, func(t *testing.T) {
				in, p := applyFixture()
				a := approvalBound(p, binding)
				if tt.approval != nil {
					tt.approval(&a)
				}
				if tt.change != nil {
					tt.change(t, &in)
				}
				fresh := BuildPlan(in)
				want := tt.registry
				if binding == BindingCandidateSet {
					want = tt.candidateSet
				}
				d := DecideApply(a, fresh, in.Rows)
				if want != "" {
					if d.Proceed || d.Outcome != want || len(d.Retire) != 0 || d.Detail == "" {
						t.Fatalf("decision = %+v, want a stop with %s", d, want)
					}
					return
				}
				if !d.Proceed || d.Outcome != "" {
					t.Fatalf("decision = %+v, want proceed", d)
				}
				var retire []string
				for _, r := range d.Retire {
					retire = append(retire, r.Name)
					if r.ResourceVersion != rowNamed(t, &in, r.Name).ResourceVersion {
						t.Fatalf("row %s carries resourceVersion %s, not the fresh one", r.Name, r.ResourceVersion)
					}
				}
				wantRetire := NormalizeIdentities(a.WorkerIdentities)
				for _, kept := range d.Preserved {
					wantRetire = slicesDelete(wantRetire, kept.WorkerIdentity)
				}
				if !reflect.DeepEqual(retire, wantRetire) {
					t.Fatalf("retire = %v, want %v", retire, wantRetire)
				}
			})
		}
	}
}

func slicesDelete(ss []string, s string) []string {
	var out []string
	for _, x := range ss {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// TestDecideApplyCandidateSetEveryFingerprintField changes each fingerprint field of one
// approved candidate in turn: a CandidateSet approval must stop with candidate_set_moved
// every time, while the same change to a live (non-candidate) row does not stop it. A new
// fingerprint field without an entry here fails the test.
func TestDecideApplyCandidateSetEveryFingerprintField(t *testing.T) {
	mutators := map[string]func(r *Row){
		"name":                func(r *Row) { r.Name += "-renamed" },
		"namespace":           func(r *Row) { r.Namespace = "other" },
		"clientInstanceID":    func(r *Row) { r.ClientInstanceID += "x" },
		"workerNamespace":     func(r *Row) { r.WorkerNamespace += "x" },
		"identity":            func(r *Row) { r.Identity += "x" },
		"remote":              func(r *Row) { r.Remote += "x" },
		"repository":          func(r *Row) { r.Binding = "gitea:b/42" },
		"heartbeatTTLSeconds": func(r *Row) { r.HeartbeatTTLSeconds = "901" },
		"lastHeartbeatAt":     func(r *Row) { r.LastHeartbeatAt = testNow.Add(-3 * time.Hour).Format(time.RFC3339) },
		"ownershipState":      func(r *Row) { r.OwnershipState = fleet.Live },
		"phase":               func(r *Row) { r.Phase = fleet.Retired },
		"pid":                 func(r *Row) { r.PID++ },
		"hostID":              func(r *Row) { r.HostID += "x" },
		"bootID":              func(r *Row) { r.BootID += "x" },
		"startTime":           func(r *Row) { r.StartTime = i64(*r.StartTime + 1) },
		"generationID":        func(r *Row) { r.GenerationID += "x" },
		"sessionID":           func(r *Row) { r.SessionID += "x" },
		"fencingEpoch":        func(r *Row) { r.FencingEpoch = i64(*r.FencingEpoch + 1) },
	}
	for _, field := range FingerprintFields() {
		mutate, ok := mutators[field]
		if !ok {
			t.Errorf("fingerprint field %q has no mutator in this test", field)
			continue
		}
		t.Run(field, func(t *testing.T) {
			in, p := applyFixture()
			a := approvalBound(p, BindingCandidateSet)
			mutate(rowNamed(t, &in, "target"))
			d := DecideApply(a, BuildPlan(in), in.Rows)
			if d.Proceed || d.Outcome != OutcomeCandidateSetMoved {
				t.Fatalf("changing %s of an approved candidate: decision = %+v, want candidate_set_moved", field, d)
			}

			in, p = applyFixture()
			a = approvalBound(p, BindingCandidateSet)
			if field == "name" || field == "phase" || field == "ownershipState" || field == "lastHeartbeatAt" ||
				field == "clientInstanceID" || field == "workerNamespace" || field == "sessionID" || field == "generationID" {
				// Changes a live row may make and still stay out of every candidate's way.
				mutate(rowNamed(t, &in, "alive"))
				if d := DecideApply(a, BuildPlan(in), in.Rows); !d.Proceed {
					t.Fatalf("changing %s of a live row stopped a CandidateSet approval: %+v", field, d)
				}
			}
		})
	}
}

func TestDecideApplyRefusesMalformedBindings(t *testing.T) {
	in, p := applyFixture()
	for name, a := range map[string]Approval{
		"CandidateSet with a registry fingerprint": {Binding: BindingCandidateSet, RegistryFingerprint: p.RegistryFingerprint,
			CandidateFingerprint: p.CandidateFingerprint, WorkerIdentities: p.CandidateWorkerIdentities},
		"Registry without a registry fingerprint": {Binding: BindingRegistry,
			CandidateFingerprint: p.CandidateFingerprint, WorkerIdentities: p.CandidateWorkerIdentities},
		"unknown binding": {Binding: "Nothing", CandidateFingerprint: p.CandidateFingerprint, WorkerIdentities: p.CandidateWorkerIdentities},
	} {
		d := DecideApply(a, BuildPlan(in), in.Rows)
		if d.Proceed || d.Outcome != OutcomeTransactionFailed || !strings.Contains(d.Detail, "binding") {
			t.Errorf("%s: decision = %+v, want a transaction_failed stop naming the binding", name, d)
		}
	}
}

func TestApprovalMismatchBindings(t *testing.T) {
	const reg, cand = "sha256:aa", "sha256:bb"
	plan := []string{"w-1", "w-2"}
	ids := []string{"w-2", "w-1"}
	tests := []struct {
		name string
		a    Approval
		want string // "" = matches; otherwise a word the explanation must contain
	}{
		{"Registry, explicit", Approval{Binding: BindingRegistry, RegistryFingerprint: reg, CandidateFingerprint: cand, WorkerIdentities: ids}, ""},
		{"Registry by default", Approval{RegistryFingerprint: reg, CandidateFingerprint: cand, WorkerIdentities: ids}, ""},
		{"Registry, stale registry token", Approval{RegistryFingerprint: "sha256:cc", CandidateFingerprint: cand, WorkerIdentities: ids}, "registryFingerprint"},
		{"Registry without a registry token", Approval{Binding: BindingRegistry, CandidateFingerprint: cand, WorkerIdentities: ids}, "registryFingerprint"},
		{"CandidateSet by default", Approval{CandidateFingerprint: cand, WorkerIdentities: ids}, ""},
		{"CandidateSet by default, wrong candidate token", Approval{CandidateFingerprint: "sha256:cc", WorkerIdentities: ids}, "candidateFingerprint"},
		{"CandidateSet without a registry token", Approval{Binding: BindingCandidateSet, CandidateFingerprint: cand, WorkerIdentities: ids}, ""},
		{"CandidateSet carrying the plan's registry token", Approval{Binding: BindingCandidateSet, RegistryFingerprint: reg, CandidateFingerprint: cand, WorkerIdentities: ids}, "registryFingerprint"},
		{"CandidateSet, wrong candidate token", Approval{Binding: BindingCandidateSet, CandidateFingerprint: "sha256:cc", WorkerIdentities: ids}, "candidateFingerprint"},
		{"CandidateSet, a subset", Approval{Binding: BindingCandidateSet, CandidateFingerprint: cand, WorkerIdentities: []string{"w-1"}}, "workerIdentities"},
		{"CandidateSet, a superset", Approval{Binding: BindingCandidateSet, CandidateFingerprint: cand, WorkerIdentities: []string{"w-1", "w-2", "w-3"}}, "workerIdentities"},
		{"unknown binding", Approval{Binding: "Everything", RegistryFingerprint: reg, CandidateFingerprint: cand, WorkerIdentities: ids}, "binding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ApprovalMismatch(tt.a, reg, cand, plan)
			if tt.want == "" && got != "" {
				t.Fatalf("ApprovalMismatch = %q, want a match", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("ApprovalMismatch = %q, want it to name %s", got, tt.want)
			}
		})
	}
}

func TestEffectiveBinding(t *testing.T) {
	for _, tt := range []struct {
		a    Approval
		want string
	}{
		{Approval{}, BindingCandidateSet},
		{Approval{CandidateFingerprint: "sha256:bb"}, BindingCandidateSet},
		{Approval{RegistryFingerprint: "sha256:aa", CandidateFingerprint: "sha256:bb"}, BindingRegistry},
		{Approval{Binding: BindingRegistry}, BindingRegistry},
		{Approval{Binding: BindingCandidateSet, RegistryFingerprint: "sha256:aa"}, BindingCandidateSet},
	} {
		if got := tt.a.EffectiveBinding(); got != tt.want {
			t.Errorf("EffectiveBinding(%+v) = %q, want %s", tt.a, got, tt.want)
		}
	}
	if got := Bindings(); !reflect.DeepEqual(got, []string{BindingCandidateSet, BindingRegistry}) {
		t.Fatalf("Bindings() = %v", got)
	}
}
