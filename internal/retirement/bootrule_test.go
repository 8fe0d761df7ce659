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
	"strings"
	"testing"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// TestBootRule is the table of the boot rule in effectivePIDState: a pid
// found free for a row of another boot is gone only when the row's last
// heartbeat predates the start of this host's current boot. testHost's boot
// began at testNow-1h.
func TestBootRule(t *testing.T) {
	bootTime := testHost.BootTime
	at := func(d time.Duration) string { return bootTime.Add(d).Format(time.RFC3339Nano) }
	tests := []struct {
		name       string
		rowBoot    string
		heartbeat  string
		noBootTime bool // the host's boot time is unknown
		probe      Probe
		want       fleet.PIDState
		wantDetail string
	}{
		// Same boot: the rule does not apply, the boot time is not needed.
		{name: "same boot, free", rowBoot: "boot-1", heartbeat: at(time.Minute), probe: gone(), want: fleet.PIDGone},
		{name: "same boot, free, boot time unknown", rowBoot: "boot-1", heartbeat: at(time.Minute), noBootTime: true, probe: gone(), want: fleet.PIDGone},

		// Another boot, free pid.
		{name: "earlier boot, heartbeat before this boot", rowBoot: "boot-0", heartbeat: at(-time.Hour), probe: gone(), want: fleet.PIDGone, wantDetail: "ended before this boot began"},
		{name: "earlier boot, heartbeat a second before this boot", rowBoot: "boot-0", heartbeat: at(-time.Second), probe: gone(), want: fleet.PIDGone},
		{name: "earlier boot, heartbeat with an offset before this boot", rowBoot: "boot-0", heartbeat: bootTime.Add(-time.Minute).In(time.FixedZone("x", 5*3600)).Format(time.RFC3339), probe: gone(), want: fleet.PIDGone},
		{name: "other boot, heartbeat exactly at boot time", rowBoot: "boot-0", heartbeat: at(0), probe: gone(), want: fleet.PIDUnknown, wantDetail: "not before this boot began"},
		{name: "cloned machine id: heartbeat after this boot", rowBoot: "boot-other", heartbeat: at(30 * time.Minute), probe: gone(), want: fleet.PIDUnknown, wantDetail: "another machine with the same machine id"},
		{name: "other boot, heartbeat a nanosecond after boot time", rowBoot: "boot-0", heartbeat: at(time.Nanosecond), probe: gone(), want: fleet.PIDUnknown},
		{name: "other boot, boot time unknown", rowBoot: "boot-0", heartbeat: at(-time.Hour), noBootTime: true, probe: gone(), want: fleet.PIDUnknown, wantDetail: "boot time is unknown"},
		{name: "other boot, heartbeat missing", rowBoot: "boot-0", heartbeat: "", probe: gone(), want: fleet.PIDUnknown, wantDetail: "heartbeat cannot be read"},
		{name: "other boot, heartbeat garbage", rowBoot: "boot-0", heartbeat: "yesterday", probe: gone(), want: fleet.PIDUnknown},

		// An occupied pid is an absolute block, whatever the boots say.
		{name: "other boot, alive", rowBoot: "boot-0", heartbeat: at(-time.Hour), probe: Probe{State: fleet.PIDAlive}, want: fleet.PIDAlive},
		{name: "other boot, reused", rowBoot: "boot-0", heartbeat: at(-time.Hour), probe: Probe{State: fleet.PIDReused}, want: fleet.PIDReused},
		{name: "other boot, gone but the registered start time observed", rowBoot: "boot-0", heartbeat: at(-time.Hour), probe: Probe{State: fleet.PIDGone, ObservedStartTime: i64(1200)}, want: fleet.PIDAlive},
		{name: "other boot, gone but another start time observed", rowBoot: "boot-0", heartbeat: at(-time.Hour), probe: Probe{State: fleet.PIDGone, ObservedStartTime: i64(7)}, want: fleet.PIDReused},

		// Unknown stays unknown.
		{name: "other boot, unknown", rowBoot: "boot-0", heartbeat: at(-time.Hour), probe: Probe{State: fleet.PIDUnknown}, want: fleet.PIDUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := eligibleRow("target", 200) // start time 1200
			r.BootID, r.LastHeartbeatAt = tc.rowBoot, tc.heartbeat
			host := testHost
			if tc.noBootTime {
				host.BootTime = time.Time{}
			}
			probe := tc.probe
			got, why := effectivePIDState(&r, &probe, host)
			if got != tc.want {
				t.Fatalf("effectivePIDState = %s (%s), want %s", got, why, tc.want)
			}
			if !strings.Contains(why, tc.wantDetail) {
				t.Errorf("why = %q, want it to contain %q", why, tc.wantDetail)
			}

			// RecheckBeforeWrite applies the same rule right before a write.
			ok, reason, detail := RecheckBeforeWrite(r, &probe, host)
			if ok != (tc.want == fleet.PIDGone) {
				t.Errorf("RecheckBeforeWrite = %v, %s (%s), want ok=%v", ok, reason, detail, tc.want == fleet.PIDGone)
			}
		})
	}
}

// TestBootRuleInPlan checks the rule through BuildPlan: the reason code, the
// hostBootTime evidence and that a cloned machine id retires nothing.
func TestBootRuleInPlan(t *testing.T) {
	bootTime := testHost.BootTime
	tests := []struct {
		name      string
		mutate    func(in *Input, r *Row)
		want      string
		wantBoots bool // hostBootTime evidence expected
		wantBT    string
	}{
		{name: "same boot", mutate: func(*Input, *Row) {}, want: ReasonEligibleStaleOrphan},
		{name: "earlier boot, heartbeat before it", mutate: func(_ *Input, r *Row) { r.BootID = "boot-0" },
			want: ReasonEligibleStaleOrphan, wantBoots: true, wantBT: bootTime.Format(time.RFC3339)},
		{name: "cloned machine id, heartbeat after our boot but expired", mutate: func(_ *Input, r *Row) {
			r.BootID = "boot-other"
			r.LastHeartbeatAt = bootTime.Add(20 * time.Minute).Format(time.RFC3339) // expired at now-25m
		}, want: ReasonPIDLivenessUnknown, wantBoots: true, wantBT: bootTime.Format(time.RFC3339)},
		{name: "cloned machine id, heartbeat fresh", mutate: func(_ *Input, r *Row) {
			r.BootID = "boot-other"
			r.LastHeartbeatAt = testNow.Add(-time.Minute).Format(time.RFC3339)
		}, want: ReasonWorkerLive, wantBoots: true, wantBT: bootTime.Format(time.RFC3339)},
		{name: "earlier boot, boot time unknown", mutate: func(in *Input, r *Row) {
			r.BootID = "boot-0"
			in.Host.BootTime = time.Time{}
		}, want: ReasonPIDLivenessUnknown, wantBoots: true, wantBT: ""},
		{name: "earlier boot, alive", mutate: func(in *Input, r *Row) {
			r.BootID = "boot-0"
			in.Probes["target"] = Probe{State: fleet.PIDAlive}
		}, want: ReasonPIDAlive, wantBoots: true, wantBT: bootTime.Format(time.RFC3339)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput()
			tc.mutate(&in, &in.Rows[1])
			p := BuildPlan(in)
			got, _ := findAssessment(p, "target")
			if got.ReasonCode != tc.want {
				t.Fatalf("reason = %s (%s), want %s", got.ReasonCode, got.Detail, tc.want)
			}
			bt, has := got.Evidence[EvidenceHostBootTime]
			if has != tc.wantBoots || bt != tc.wantBT {
				t.Errorf("hostBootTime evidence = %q (present %v), want %q (present %v)", bt, has, tc.wantBT, tc.wantBoots)
			}
			if keeper, _ := findAssessment(p, "keeper"); keeper.Evidence[EvidenceHostBootTime] != "" {
				t.Errorf("same-boot row carries hostBootTime: %v", keeper.Evidence)
			}
			if tc.want != ReasonEligibleStaleOrphan {
				for _, id := range p.CandidateWorkerIdentities {
					if id == "target" {
						t.Fatalf("target is a candidate")
					}
				}
			}
			checkPlanShape(t, in, p)
		})
	}
}
