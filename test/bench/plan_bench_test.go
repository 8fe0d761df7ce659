package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/controller/retirementplan"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

const (
	// planRatioGoal is the goal for a plan against a bare List of the same rows.
	planRatioGoal = 1.5
	// statusLimitBytes is the goal for any status object (etcd takes 1.5 MiB).
	statusLimitBytes = 1 << 20
)

// planSizes are the registry sizes BenchmarkPlan measures: FLEET_BENCH_PLAN_ROWS (a
// comma-separated list), or 10,000 and 100,000.
func planSizes(b *testing.B) []int {
	spec := os.Getenv("FLEET_BENCH_PLAN_ROWS")
	if spec == "" {
		return []int{10_000, 100_000}
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("FLEET_BENCH_PLAN_ROWS: %q is not a row count", f)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkPlan measures a dry-run plan end to end through the API server, the way the
// controller makes it (read every registration and claim, probe each process, decide,
// write the pages and the status), as a ratio against the same-run baseline: one bare
// List of the same registrations. It also prints the size of the plan's status, of its
// largest page, and the manager's peak heap growth per registration during the plan,
// from which the node agent's memory limit is sized.
func BenchmarkPlan(b *testing.B) {
	for _, rows := range planSizes(b) {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			b.StopTimer()
			c := startEnv(b)
			ctx := context.Background()
			prober := &liveness.ProcProber{Facts: facts}
			ns := newNamespace(ctx, b, "bench-plan")
			createEligibleRows(ctx, b, c, ns, rows, exitedProcesses(b, prober, deadPIDs))
			r := &retirementplan.Reconciler{
				Client: c, APIReader: c, Prober: prober, Reprober: prober,
				Host:       retirement.Host{HostID: facts.HostID, BootID: facts.BootID, BootTime: facts.BootTime},
				Repository: benchRepo, Approvers: allowAll{},
				Fence: workflowfence.Fence{Client: c, Reader: c, Clock: clock.RealClock{}},
				Clock: clock.RealClock{}, Recorder: testenv.Discard,
			}

			var bare, plan time.Duration
			var statusBytes, pageBytes, pages int
			var peak uint64
			for i := range b.N {
				start := time.Now()
				var list fleetv1alpha1.WorkerRegistrationList
				if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
					b.Fatal(err)
				}
				bare += time.Since(start)
				if len(list.Items) != rows {
					b.Fatalf("listed %d registrations, want %d", len(list.Items), rows)
				}
				list = fleetv1alpha1.WorkerRegistrationList{}

				p := &fleetv1alpha1.RetirementPlan{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i), Namespace: ns},
					Spec:       fleetv1alpha1.RetirementPlanSpec{Remote: "origin", CanonicalRepository: benchRepo},
				}
				if err := c.Create(ctx, p); err != nil {
					b.Fatal(err)
				}
				base := heapAfterGC()
				stop := sampleHeap(&peak, base)
				start = time.Now()
				b.StartTimer()
				_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
				b.StopTimer()
				plan += time.Since(start)
				stop()
				if err != nil {
					b.Fatalf("planning: %v", err)
				}
				if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
					b.Fatal(err)
				}
				if p.Status.Outcome != retirement.OutcomePlanned || int(p.Status.CandidateCount) != rows {
					b.Fatalf("plan: outcome %q with %d candidates, want planned with %d (preserved %v)",
						p.Status.Outcome, p.Status.CandidateCount, rows, p.Status.PreservedReasonCounts)
				}
				raw, _ := json.Marshal(p.Status)
				statusBytes = len(raw)
				var pl fleetv1alpha1.RetirementPlanPageList
				if err := c.List(ctx, &pl, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.PlanLabel: p.Name}); err != nil {
					b.Fatal(err)
				}
				pages, pageBytes = len(pl.Items), 0
				held := 0
				for j := range pl.Items {
					raw, _ := json.Marshal(&pl.Items[j])
					pageBytes = max(pageBytes, len(raw))
					held += len(pl.Items[j].Rows)
				}
				if held != rows {
					b.Fatalf("the pages hold %d rows, want %d", held, rows)
				}
			}
			ratio := float64(plan) / float64(bare)
			heapPerRow := float64(peak) / float64(rows)
			b.ReportMetric(float64(plan.Nanoseconds())/float64(b.N), "plan-ns")
			b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "bare-list-ns")
			b.ReportMetric(ratio, "plan/bare")
			b.ReportMetric(float64(statusBytes), "status-B")
			b.ReportMetric(float64(pageBytes), "max-page-B")
			b.ReportMetric(heapPerRow, "peak-heap-B/row")
			verdict := func(ok bool) string {
				if ok {
					return "within"
				}
				return "ABOVE"
			}
			fmt.Printf("bench plan: %d rows: plan %v, bare List %v, ratio %.2fx (%s the %.1fx goal); status %d B, %d pages, largest %d B (%s the %d B goal); peak heap growth %.0f B/row\n",
				rows, plan/time.Duration(b.N), bare/time.Duration(b.N), ratio, verdict(ratio <= planRatioGoal), planRatioGoal,
				statusBytes, pages, pageBytes, verdict(statusBytes <= statusLimitBytes && pageBytes <= statusLimitBytes), statusLimitBytes, heapPerRow)
		})
	}
}

// sampleHeap records, until stopped, the largest heap growth over base it sees.
func sampleHeap(peak *uint64, base uint64) (stop func()) {
	var done atomic.Bool
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var m runtime.MemStats
		for !done.Load() {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base && m.HeapAlloc-base > *peak {
				*peak = m.HeapAlloc - base
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() { done.Store(true); <-finished }
}
