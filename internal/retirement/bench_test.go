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
	"strconv"
	"testing"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

var benchSizes = []int{1000, 10000, 100000}

// benchInput builds a registry of n rows with a realistic mix: mostly stale
// orphans that are probed gone, some live workers, some legacy identities,
// some rows of other hosts and a few task-claim owners.
func benchInput(n int) Input {
	in := Input{
		Rows:                make([]Row, 0, n),
		CanonicalRepository: testRepo,
		CanonicalBinding:    testRepo,
		Now:                 testNow,
		Host:                testHost,
		Probes:              make(map[string]Probe, n),
	}
	for i := 0; i < n; i++ {
		// Interleave names so the input is not already sorted.
		name := fmt.Sprintf("worker-%07d", (i*7919)%n)
		r := eligibleRow(name, int64(1000+i))
		r.TokenFingerprint = "sha256:" + strconv.Itoa(i)
		switch i % 10 {
		case 0, 1:
			r.LastHeartbeatAt = testNow.Add(-time.Minute).Format(time.RFC3339Nano)
			r.OwnershipState = fleet.Live
			in.Probes[name] = Probe{State: fleet.PIDAlive, ObservedStartTime: r.StartTime}
		case 2:
			r.ClientInstanceID = "pid-" + strconv.Itoa(i)
			in.Probes[name] = Probe{State: fleet.PIDGone}
		case 3:
			r.HostID = "host-b"
		case 4:
			in.Probes[name] = Probe{State: fleet.PIDReused, ObservedStartTime: i64(1)}
		default:
			r.HeartbeatTTLSeconds = "900.0"
			in.Probes[name] = Probe{State: fleet.PIDGone}
		}
		if i%97 == 0 {
			in.ActiveWorkflowOwners = append(in.ActiveWorkflowOwners, name)
		}
		in.Rows = append(in.Rows, r)
	}
	return in
}

func BenchmarkPlan(b *testing.B) {
	for _, n := range benchSizes {
		in := benchInput(n)
		b.Run("rows="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			var p Plan
			for b.Loop() {
				p = BuildPlan(in)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/row")
			if p.AssessedCount != n || p.CandidateCount == 0 {
				b.Fatalf("unexpected plan: %d assessed, %d candidates", p.AssessedCount, p.CandidateCount)
			}
		})
	}
}

// BenchmarkCanonicalHash is the baseline: canonical serialisation, sorting
// and SHA-256 of the same rows, without any assessment.
func BenchmarkCanonicalHash(b *testing.B) {
	for _, n := range benchSizes {
		in := benchInput(n)
		b.Run("rows="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			var fp string
			for b.Loop() {
				fp = RegistryFingerprint(in.Rows)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/row")
			if fp == "" {
				b.Fatal("empty fingerprint")
			}
		})
	}
}
