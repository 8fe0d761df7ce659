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
	"strings"
	"testing"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// applyFixture returns rows and the plan an approval was made from:
// candidates keeper and target, preserved "alive".
func applyFixture() (Input, Plan) {
	in := baseInput()
	in.Rows = append(in.Rows, liveRow("alive", 300))
	return in, BuildPlan(in)
}

func approvalFor(p Plan) Approval {
	return Approval{
		RegistryFingerprint:  p.RegistryFingerprint,
		CandidateFingerprint: p.CandidateFingerprint,
		WorkerIdentities:     append([]string(nil), p.CandidateWorkerIdentities...),
	}
}

func TestDecideApply(t *testing.T) {
	tests := []struct {
		name        string
		build       func() (Approval, Plan, []Row)
		wantOutcome string // "" = proceed
		wantRetire  []string
		wantKept    []string
	}{
		{
			name: "empty list",
			build: func() (Approval, Plan, []Row) {
				in, p := applyFixture()
				a := approvalFor(p)
				a.WorkerIdentities = []string{" ", ""}
				return a, p, in.Rows
			},
			wantOutcome: OutcomeNothingRequested,
		},
		{
			name: "replay after success",
			build: func() (Approval, Plan, []Row) {
				in, p := applyFixture()
				a := approvalFor(p)
				for i := range in.Rows {
					if in.Rows[i].Name != "alive" {
						in.Rows[i].Phase = fleet.Retired
					}
				}
				return a, BuildPlan(in), in.Rows
			},
			wantOutcome: OutcomeAlreadyRetired,
		},
		{
			name: "registry changed",
			build: func() (Approval, Plan, []Row) {
				in, p := applyFixture()
				a := approvalFor(p)
				in.Rows[2].LastHeartbeatAt = "2026-03-01T11:59:59Z" // a heartbeat elsewhere
				return a, BuildPlan(in), in.Rows
			},
			wantOutcome: OutcomeRegistryRevisionMoved,
		},
		{
			name: "one requested row retired, the other changed",
			build: func() (Approval, Plan, []Row) {
				in, p := applyFixture()
				a := approvalFor(p)
				in.Rows[0].Phase = fleet.Retired
				return a, BuildPlan(in), in.Rows
			},
			wantOutcome: OutcomeRegistryRevisionMoved,
		},
		{
			name: "task claim acquired after planning",
			build: func() (Approval, Plan, []Row) {
				in, p := applyFixture()
				a := approvalFor(p)
				in.ActiveWorkflowOwners = []string{"target"}
				return a, BuildPlan(in), in.Rows
			},
			wantOutcome: OutcomeCandidateSetMoved,
		},
		{
			name: "process came back",
			build: func() (Approval, Plan, []Row) {
				in, p := applyFixture()
				a := approvalFor(p)
				in.Probes["keeper"] = Probe{State: fleet.PIDAlive}
				return a, BuildPlan(in), in.Rows
			},
			wantOutcome: OutcomeCandidateSetMoved,
		},
		{
			name: "clean approval",
			build: func() (Approval, Plan, []Row) {
				in, p := applyFixture()
				return approvalFor(p), BuildPlan(in), in.Rows
			},
			wantRetire: []string{"keeper", "target"},
		},
		{
			name: "untrimmed, empty and duplicated identities",
			build: func() (Approval, Plan, []Row) {
				in, p := applyFixture()
				a := approvalFor(p)
				a.WorkerIdentities = []string{" target", "keeper ", "target", ""}
				return a, BuildPlan(in), in.Rows
			},
			wantRetire: []string{"keeper", "target"},
		},
		{
			name: "approval lists extra identities",
			build: func() (Approval, Plan, []Row) {
				in, p := applyFixture()
				a := approvalFor(p)
				a.WorkerIdentities = []string{"target", "alive", "ghost"}
				return a, BuildPlan(in), in.Rows
			},
			wantRetire: []string{"target"},
			wantKept:   []string{"alive", "ghost"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, fresh, rows := tt.build()
			d := DecideApply(a, fresh, rows)
			if tt.wantOutcome != "" {
				if d.Proceed || d.Outcome != tt.wantOutcome || len(d.Retire) != 0 || d.Detail == "" {
					t.Fatalf("decision = %+v, want stop with %s", d, tt.wantOutcome)
				}
				return
			}
			if !d.Proceed || d.Outcome != "" {
				t.Fatalf("decision = %+v, want proceed", d)
			}
			var retire, kept []string
			for _, r := range d.Retire {
				retire = append(retire, r.Name)
			}
			for _, p := range d.Preserved {
				if p.ReasonCode != ReasonNotInCandidateSet || p.Detail == "" {
					t.Fatalf("preserved %+v", p)
				}
				kept = append(kept, p.WorkerIdentity)
			}
			if !reflect.DeepEqual(retire, tt.wantRetire) || !reflect.DeepEqual(kept, tt.wantKept) {
				t.Fatalf("retire=%v kept=%v, want %v %v", retire, kept, tt.wantRetire, tt.wantKept)
			}
			for _, p := range d.Preserved {
				if p.WorkerIdentity == "alive" && p.Evidence[EvidencePlanReasonCode] != ReasonWorkerLive {
					t.Fatalf("plan reason not carried: %v", p.Evidence)
				}
			}
		})
	}
}

func TestRecheckBeforeWrite(t *testing.T) {
	row := eligibleRow("w", 77)
	start := *row.StartTime
	other := start + 5
	tests := []struct {
		name   string
		row    func(r *Row)
		probe  *Probe
		host   Host
		ok     bool
		reason string
	}{
		{"no prober", nil, nil, testHost, false, ReasonLivenessReprobeUnavailable},
		{"gone", nil, &Probe{State: fleet.PIDGone}, testHost, true, ReasonEligibleStaleOrphan},
		{"alive", nil, &Probe{State: fleet.PIDAlive, ObservedStartTime: &start}, testHost, false, ReasonPIDAlive},
		{"alive without start time", nil, &Probe{State: fleet.PIDAlive}, testHost, false, ReasonPIDAlive},
		{"alive, different start", nil, &Probe{State: fleet.PIDAlive, ObservedStartTime: &other}, testHost, false, ReasonPIDReuseDetected},
		{"reused", nil, &Probe{State: fleet.PIDReused, ObservedStartTime: &other}, testHost, false, ReasonPIDReuseDetected},
		{"gone but occupied by another", nil, &Probe{State: fleet.PIDGone, ObservedStartTime: &other}, testHost, false, ReasonPIDReuseDetected},
		{"gone but same start observed", nil, &Probe{State: fleet.PIDGone, ObservedStartTime: &start}, testHost, false, ReasonPIDAlive},
		{"unknown", nil, &Probe{State: fleet.PIDUnknown}, testHost, false, ReasonPIDLivenessUnknown},
		{"empty state", nil, &Probe{}, testHost, false, ReasonPIDLivenessUnknown},
		{"other host", func(r *Row) { r.HostID = "host-b" }, &Probe{State: fleet.PIDGone}, testHost, false, ReasonHostBindingUnproven},
		{"controller host unknown", nil, &Probe{State: fleet.PIDGone}, Host{BootID: "boot-1"}, false, ReasonHostBindingUnproven},
		{"boot unknown", func(r *Row) { r.BootID = "" }, &Probe{State: fleet.PIDGone}, testHost, false, ReasonBootIdentityUnknown},
		{"no start time on row", func(r *Row) { r.StartTime = nil }, &Probe{State: fleet.PIDGone}, testHost, false, ReasonIncompleteIdentity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := row
			if tt.row != nil {
				tt.row(&r)
			}
			ok, reason, detail := RecheckBeforeWrite(r, tt.probe, tt.host)
			if ok != tt.ok || reason != tt.reason || detail == "" {
				t.Fatalf("RecheckBeforeWrite = %v, %q, %q; want %v, %q", ok, reason, detail, tt.ok, tt.reason)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	stop := ApplyDecision{Outcome: OutcomeCandidateSetMoved, Detail: "moved"}
	proceed := ApplyDecision{
		Proceed:   true,
		Retire:    []Row{eligibleRow("a", 1), eligibleRow("b", 2), eligibleRow("c", 3)},
		Preserved: []Assessment{{WorkerIdentity: "z", ReasonCode: ReasonNotInCandidateSet}},
	}
	tests := []struct {
		name         string
		d            ApplyDecision
		retired      []string
		preserved    []Assessment
		interruption string
		outcome      string
		mutation     bool
		interrupted  bool
		nPreserved   int
	}{
		{"stop", stop, nil, nil, "", OutcomeCandidateSetMoved, false, false, 0},
		{"all retired", proceed, []string{"c", "a", "b"}, nil, "", OutcomeApplied, true, false, 1},
		{"row changed", proceed, []string{"a", "b"}, []Assessment{{WorkerIdentity: "c", ReasonCode: ReasonRowChangedSincePlan}}, "", OutcomeApplied, true, false, 2},
		{"nothing survived rechecks", proceed, nil, UntouchedAssessments(proceed.Retire, ReasonPIDAlive, "alive"), "", OutcomeApplied, false, false, 4},
		{"fence moved midway", proceed, []string{"a"}, UntouchedAssessments(proceed.Retire[1:], ReasonExternalFenceMoved, "claims changed"), "external fence moved", OutcomeApplied, true, true, 3},
		{"fence moved before first write", proceed, nil, UntouchedAssessments(proceed.Retire, ReasonExternalFenceMoved, "claims changed"), "external fence moved", OutcomeTransactionFailed, false, true, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := Summarize(tt.d, tt.retired, tt.preserved, tt.interruption)
			if rep.Outcome != tt.outcome || rep.MutationPerformed != tt.mutation || rep.Interrupted != tt.interrupted ||
				len(rep.Preserved) != tt.nPreserved || rep.RetiredCount != len(tt.retired) {
				t.Fatalf("report = %+v", rep)
			}
			for i := 1; i < len(rep.Preserved); i++ {
				if rep.Preserved[i-1].WorkerIdentity > rep.Preserved[i].WorkerIdentity {
					t.Fatalf("preserved unsorted")
				}
			}
		})
	}
}

func TestApprovalMismatch(t *testing.T) {
	const reg, cand = "sha256:aa", "sha256:bb"
	plan := []string{"w-1", "w-2"}
	ok := Approval{RegistryFingerprint: reg, CandidateFingerprint: cand, WorkerIdentities: []string{"w-2", "w-1", "w-1"}}
	if got := ApprovalMismatch(ok, reg, cand, plan); got != "" {
		t.Fatalf("an approval repeating the plan (in another order) mismatched: %s", got)
	}
	for name, tc := range map[string]struct {
		mutate func(*Approval)
		want   string
	}{
		"registry token":  {func(a *Approval) { a.RegistryFingerprint = "sha256:cc" }, "registryFingerprint"},
		"candidate token": {func(a *Approval) { a.CandidateFingerprint = "sha256:cc" }, "candidateFingerprint"},
		"a subset":        {func(a *Approval) { a.WorkerIdentities = []string{"w-1"} }, "workerIdentities"},
		"a superset":      {func(a *Approval) { a.WorkerIdentities = []string{"w-1", "w-2", "w-3"} }, "workerIdentities"},
		"nothing":         {func(a *Approval) { a.WorkerIdentities = nil }, "workerIdentities"},
	} {
		a := ok
		tc.mutate(&a)
		if got := ApprovalMismatch(a, reg, cand, plan); !strings.Contains(got, tc.want) {
			t.Errorf("%s: ApprovalMismatch = %q, want it to name %s", name, got, tc.want)
		}
	}
}
