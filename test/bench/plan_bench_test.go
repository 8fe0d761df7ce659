package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/retirementplan"
	"github.com/giteatools/fleet-controller/controllers/workerregistration"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/managercache"
	"github.com/giteatools/fleet-controller/internal/reglist"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

const (
	// planRatioGoal is the goal for a plan against a bare List of the same rows.
	planRatioGoal = 1.5
	// statusLimitBytes is the goal for any status object (etcd takes 1.5 MiB).
	statusLimitBytes = 1 << 20
	// registrationGoalBytes is the goal for the manager's memory per registration.
	registrationGoalBytes = 2048
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

// planManager is a manager wired as cmd/ wires the shipped one, for one namespace: the
// shipped cache options (internal/managercache), this host's agent (it holds the host's
// Lease), the RetirementPlan controller with the manager's client and API reader, and the
// WorkerRegistration controller's informer and index. The WorkerRegistration controller
// runs without an agent here, so it writes no row: the rows keep the status the bench
// gave them, and the plan is all the manager does.
type planManager struct {
	mgr   ctrl.Manager
	agent *hostagent.Agent
	stop  context.CancelFunc
	done  chan error
}

func startPlanManager(ctx context.Context, b *testing.B, ns, agentNS string, prober *liveness.ProcProber) *planManager {
	b.Helper()
	cfg := rest.CopyConfig(env.Config)
	if os.Getenv("FLEET_BENCH_PLAN_TRACE") != "" {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return traceTransport{rt} })
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  managercache.Options([]string{ns, agentNS}),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	agent := hostagent.NewHost(cs, agentNS, facts.HostID, hostagent.NewInstanceID(), hostagent.Timings{})
	if err := mgr.Add(agent); err != nil {
		b.Fatal(err)
	}
	if err := (&workerregistration.Reconciler{
		Client: mgr.GetClient(), Prober: prober, Clock: clock.RealClock{}, Recorder: testenv.Discard,
		AgentNamespace: agentNS,
	}).SetupWithManagerNamed(mgr, "workerregistration-"+ns); err != nil {
		b.Fatal(err)
	}
	registrations, err := reglist.New(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetScheme())
	if err != nil {
		b.Fatal(err)
	}
	deps := &retirementplan.Deps{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Registrations: registrations,
		Host:       retirement.Host{HostID: facts.HostID, BootID: facts.BootID, BootTime: facts.BootTime},
		Repository: benchRepo, Approvers: allowAll{},
		Fence: workflowfence.Fence{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Clock: clock.RealClock{}},
		Clock: clock.RealClock{}, Recorder: testenv.Discard,
	}
	hostPlans := &retirementplan.HostPlanReconciler{Deps: deps, Prober: prober, Reprober: prober, Agent: agent}
	if err := hostPlans.SetupWithManagerNamed(mgr, "retirementplan-host-"+ns); err != nil {
		b.Fatal(err)
	}
	if err := (&retirementplan.FleetPlanReconciler{Deps: deps, AgentNamespace: agentNS}).
		SetupWithManagerNamed(mgr, "retirementplan-fleet-"+ns); err != nil {
		b.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	pm := &planManager{mgr: mgr, agent: agent, stop: stop, done: make(chan error, 1)}
	go func() { pm.done <- mgr.Start(mctx) }()
	deadline := time.Now().Add(time.Minute)
	for !agent.Held() || !mgr.GetCache().WaitForCacheSync(mctx) {
		if time.Now().After(deadline) {
			b.Fatal("the bench manager's agent does not hold its host's Lease")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return pm
}

// warmUp plans the namespace once while it is still empty, outside the timer: the first
// request to a resource nobody has read since the API server started waits for its
// watch cache (a 429 and a one-second retry), which a manager running for a while never
// meets again.
func (pm *planManager) warmUp(ctx context.Context, b *testing.B, c client.WithWatch, ns string) {
	b.Helper()
	p, w := watchedPlan(ctx, b, c, ns, "warm-up")
	defer w.Stop()
	if err := c.Create(ctx, p); err != nil {
		b.Fatal(err)
	}
	if got := waitPaged(b, w, p.Name, nil); got.Status.Outcome != retirement.OutcomePlanned {
		b.Fatalf("the warm-up plan ended %q", got.Status.Outcome)
	}
	// An empty namespace has no host plan, whose read of the task claims is the other
	// first read.
	if err := c.List(ctx, &fleetv1alpha1.TaskClaimList{}, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
}

func (pm *planManager) shutdown(b *testing.B) {
	pm.stop()
	if err := <-pm.done; err != nil {
		b.Errorf("the bench manager: %v", err)
	}
}

// cachedRows waits until the manager's cache holds n registrations of ns.
func (pm *planManager) cachedRows(ctx context.Context, b *testing.B, ns string, n int) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var regs fleetv1alpha1.WorkerRegistrationList
		if err := pm.mgr.GetCache().List(ctx, &regs, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			b.Fatal(err)
		}
		if len(regs.Items) == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the manager's cache holds %d registrations, want %d", len(regs.Items), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkPlan measures a plan end to end through the API server, as the shipped manager
// makes it: a RetirementPlan is created, and the manager's own controller (its watch,
// fan-out to this host's plan, the reads straight from the API server, the probes and the
// status writes) runs until the fleet plan's status says planned, with its fingerprints,
// counts and identities: what a reviewer approves. It then goes on until the plan's
// PagesReady condition says every row's verdict is in its pages, reported apart (paged-ns,
// paged/bare). The same-run baseline is one bare List of the same registrations. It also
// prints the size of every
// status object (the fleet plan's and the host plan's) and of the largest page, the
// manager's steady heap per cached registration (after GC, rows in the cache) and its peak
// heap growth during the plan per row, from which the manager's memory is sized
// (docs/architecture.md, "Memory").
//
// FLEET_BENCH_PLAN_PROFILE=<dir> writes CPU and allocation profiles of this process
// during the plans to <dir>.
func BenchmarkPlan(b *testing.B) {
	for _, rows := range planSizes(b) {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			b.StopTimer()
			c := startEnv(b)
			ctx := context.Background()
			prober := &liveness.ProcProber{Facts: facts}
			ns := newNamespace(ctx, b, "bench-plan")
			agentNS := testenv.Uniq("bench-agents")
			dead := exitedProcesses(b, prober, deadPIDs)

			pm := startPlanManager(ctx, b, ns, agentNS, prober)
			defer pm.shutdown(b)
			pm.warmUp(ctx, b, c, ns)
			idle := heapAfterGC()
			createEligibleRows(ctx, b, c, ns, rows, dead)
			pm.cachedRows(ctx, b, ns, rows)
			cached := heapAfterGC()
			perRegistration := float64(int64(cached)-int64(idle)) / float64(rows)

			profile := startProfile(b)
			var bare, plan, paging time.Duration
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

				p, w := watchedPlan(ctx, b, c, ns, fmt.Sprintf("bench-%d", i))
				base := heapAfterGC()
				stop := sampleHeap(&peak, base)
				b.StartTimer()
				start = time.Now()
				if err := c.Create(ctx, p); err != nil {
					b.Fatal(err)
				}
				var planned *fleetv1alpha1.RetirementPlan
				paged := waitPaged(b, w, p.Name, func(got *fleetv1alpha1.RetirementPlan) {
					plan += time.Since(start)
					b.StopTimer()
					planned = got
				})
				paging += time.Since(start)
				w.Stop()
				stop()
				if planned.Status.Outcome != retirement.OutcomePlanned || int(planned.Status.CandidateCount) != rows {
					b.Fatalf("plan: outcome %q with %d candidates, want planned with %d (preserved %v)",
						planned.Status.Outcome, planned.Status.CandidateCount, rows, planned.Status.PreservedReasonCounts)
				}
				if !meta.IsStatusConditionTrue(paged.Status.Conditions, fleetv1alpha1.PagesReadyCondition) || paged.Status.Pages == nil {
					b.Fatalf("plan %s: its pages were not written: %+v", p.Name, meta.FindStatusCondition(paged.Status.Conditions, fleetv1alpha1.PagesReadyCondition))
				}
				statusBytes = statusSizes(ctx, b, c, ns)
				pages, pageBytes = pageSizes(ctx, b, c, ns, p.Name, rows)
			}
			profile()
			ratio := float64(plan) / float64(bare)
			pagedRatio := float64(paging) / float64(bare)
			heapPerRow := float64(peak) / float64(rows)
			b.ReportMetric(float64(plan.Nanoseconds())/float64(b.N), "plan-ns")
			b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "bare-list-ns")
			b.ReportMetric(ratio, "plan/bare")
			b.ReportMetric(float64(paging.Nanoseconds())/float64(b.N), "paged-ns")
			b.ReportMetric(pagedRatio, "paged/bare")
			b.ReportMetric(float64(statusBytes), "max-status-B")
			b.ReportMetric(float64(pageBytes), "max-page-B")
			b.ReportMetric(perRegistration, "heap-B/registration")
			b.ReportMetric(heapPerRow, "peak-heap-B/row")
			verdict := func(ok bool) string {
				if ok {
					return "within"
				}
				return "ABOVE"
			}
			fmt.Printf("bench plan: %d rows: plan %v, bare List %v, ratio %.2fx (%s the %.1fx goal); largest status %d B, %d pages, largest page %d B (%s the %d B limit)\n",
				rows, plan/time.Duration(b.N), bare/time.Duration(b.N), ratio, verdict(ratio <= planRatioGoal), planRatioGoal,
				statusBytes, pages, pageBytes, verdict(statusBytes < statusLimitBytes && pageBytes < statusLimitBytes), statusLimitBytes)
			fmt.Printf("bench plan: %d rows: every row paged %v after the plan was created, %.2fx the bare List\n",
				rows, paging/time.Duration(b.N), pagedRatio)
			fmt.Printf("bench plan: %d rows: manager heap %.0f B per cached registration (steady, after GC; %s the %d B goal), peak heap growth during the plan %.0f B/row (%.0f MiB)\n",
				rows, perRegistration, verdict(perRegistration <= registrationGoalBytes), registrationGoalBytes, heapPerRow, float64(peak)/(1<<20))
		})
	}
}

// traceTransport prints each request the manager makes, with its duration and size.
type traceTransport struct{ base http.RoundTripper }

func (t traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.base.RoundTrip(req)
	if req.URL.Query().Get("watch") != "true" {
		n, code := int64(-1), 0
		if resp != nil {
			n, code = resp.ContentLength, resp.StatusCode
		}
		fmt.Fprintf(os.Stderr, "trace %s %s %s?%s %v req=%d resp=%d status=%d\n", start.Format("15:04:05.000"), req.Method, req.URL.Path, req.URL.RawQuery,
			time.Since(start), req.ContentLength, n, code)
	}
	return resp, err
}

// watchedPlan is a RetirementPlan named name of ns over the bench repository, not yet
// created, and a watch of it opened before its creation, so no status change is missed.
func watchedPlan(ctx context.Context, b *testing.B, c client.WithWatch, ns, name string) (*fleetv1alpha1.RetirementPlan, watch.Interface) {
	b.Helper()
	p := &fleetv1alpha1.RetirementPlan{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       fleetv1alpha1.RetirementPlanSpec{Remote: "origin", CanonicalRepository: benchRepo},
	}
	w, err := c.Watch(ctx, &fleetv1alpha1.RetirementPlanList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		b.Fatal(err)
	}
	return p, w
}

// waitOutcome follows the watch until plan name's status has an outcome that done
// accepts, and returns it.
func waitOutcome(b *testing.B, w watch.Interface, name string, done func(outcome string) bool) *fleetv1alpha1.RetirementPlan {
	b.Helper()
	return waitPlan(b, w, name, "an awaited outcome", func(p *fleetv1alpha1.RetirementPlan) bool {
		return p.Status.Outcome != "" && done(p.Status.Outcome)
	})
}

// waitPaged follows the watch until plan name's pages are settled (PagesReady True, or
// False for good), and returns it. The first time the plan shows an outcome (planned, or
// a failure: often in an earlier event than its pages, possibly the same), planned is
// called with it.
func waitPaged(b *testing.B, w watch.Interface, name string, planned func(*fleetv1alpha1.RetirementPlan)) *fleetv1alpha1.RetirementPlan {
	b.Helper()
	seen := false
	return waitPlan(b, w, name, "settled pages", func(p *fleetv1alpha1.RetirementPlan) bool {
		if p.Status.Outcome == "" {
			return false
		}
		if !seen && planned != nil {
			planned(p)
		}
		seen = true
		c := meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.PagesReadyCondition)
		return c != nil && c.Reason != fleetv1alpha1.ReasonWritingPages
	})
}

// waitPlan follows the watch until plan name is as done wants it, and returns it.
func waitPlan(b *testing.B, w watch.Interface, name, what string, done func(*fleetv1alpha1.RetirementPlan) bool) *fleetv1alpha1.RetirementPlan {
	b.Helper()
	timeout := time.After(30 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("the watch of the plans ended")
			}
			if p, isPlan := ev.Object.(*fleetv1alpha1.RetirementPlan); isPlan && p.Name == name && done(p) {
				return p
			}
		case <-timeout:
			b.Fatalf("plan %s reached %s within 30 minutes", name, what)
		}
	}
}

// statusSizes returns the JSON size of the largest RetirementPlan status in ns (the fleet
// plan's and its host plans'), and fails when one reaches statusLimitBytes.
func statusSizes(ctx context.Context, b *testing.B, c client.Client, ns string) int {
	b.Helper()
	var plans fleetv1alpha1.RetirementPlanList
	if err := c.List(ctx, &plans, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	largest := 0
	for i := range plans.Items {
		raw, err := json.Marshal(plans.Items[i].Status)
		if err != nil {
			b.Fatal(err)
		}
		largest = max(largest, len(raw))
		if len(raw) >= statusLimitBytes {
			b.Errorf("the status of %s is %d B, at or above %d B", plans.Items[i].Name, len(raw), statusLimitBytes)
		}
	}
	return largest
}

// pageSizes lists every page of fleet plan name (its host plans' and its own), checks
// they hold every row once, and returns how many there are and the largest's JSON size.
func pageSizes(ctx context.Context, b *testing.B, c client.Client, ns, name string, rows int) (pages, largest int) {
	b.Helper()
	var pl fleetv1alpha1.RetirementPlanPageList
	if err := c.List(ctx, &pl, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.FleetPlanLabel: name}); err != nil {
		b.Fatal(err)
	}
	held := 0
	seen := map[string]bool{}
	for j := range pl.Items {
		raw, err := json.Marshal(&pl.Items[j])
		if err != nil {
			b.Fatal(err)
		}
		largest = max(largest, len(raw))
		if len(raw) >= statusLimitBytes {
			b.Errorf("page %s is %d B, at or above %d B", pl.Items[j].Name, len(raw), statusLimitBytes)
		}
		for _, r := range apiconv.PageVerdicts(&pl.Items[j]) {
			if r.ReasonCode == "" {
				b.Fatalf("row %s has no reason code", r.WorkerIdentity)
			}
			if seen[r.WorkerIdentity] {
				b.Fatalf("row %s is on two pages", r.WorkerIdentity)
			}
			seen[r.WorkerIdentity] = true
		}
		held += len(pl.Items[j].Rows)
	}
	if held != rows {
		b.Fatalf("the pages hold %d rows, want %d", held, rows)
	}
	return len(pl.Items), largest
}

// startProfile starts a CPU profile when FLEET_BENCH_PLAN_PROFILE names a folder; the
// returned func stops it and writes an allocation profile next to it.
func startProfile(b *testing.B) func() {
	dir := os.Getenv("FLEET_BENCH_PLAN_PROFILE")
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	cpu, err := os.Create(filepath.Join(dir, "plan-cpu.pprof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		b.Fatal(err)
	}
	// The API server's own CPU profile over the same time (its /debug/pprof).
	seconds := os.Getenv("FLEET_BENCH_PLAN_PROFILE_SECONDS")
	if seconds == "" {
		seconds = "20"
	}
	server := make(chan struct{})
	go func() {
		defer close(server)
		cs, err := kubernetes.NewForConfig(env.Config)
		if err != nil {
			return
		}
		raw, err := cs.RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", seconds).Timeout(10 * time.Minute).DoRaw(context.Background())
		if err != nil {
			fmt.Fprintf(os.Stderr, "the API server's profile: %v\n", err)
			return
		}
		_ = os.WriteFile(filepath.Join(dir, "apiserver-cpu.pprof"), raw, 0o644)
	}()
	return func() {
		<-server
		pprof.StopCPUProfile()
		_ = cpu.Close()
		f, err := os.Create(filepath.Join(dir, "plan-allocs.pprof"))
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
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
