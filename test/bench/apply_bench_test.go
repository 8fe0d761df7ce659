// Package bench measures the RetirementPlan apply path against a real API server
// (envtest: kube-apiserver and etcd) and compares it with the cheapest possible way of
// writing the same rows, a bare Get + Status().Update loop.
//
// The package holds benchmarks only, so `go test ./...` runs nothing here and never
// starts a control plane. Run it with the envtest binaries, for example:
//
//	KUBEBUILDER_ASSETS=$PWD/.cache/envtest/v1.37.2 go test ./test/bench/ -run '^$' -bench . -benchtime=1x
//
// Nothing but the CRDs is installed: no admission policies, no RBAC, no manager. The
// reconciler is driven by hand and its approver check always allows, because this
// measures throughput, not permissions (the RetirementPlan suite in
// controllers/retirementplan covers those).
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

const (
	// benchRows is the number of registrations each benchmark writes.
	benchRows = 1000
	// benchHostID stands in for /etc/machine-id; the boot id and /proc are real.
	benchHostID = "fleet-bench-host"
	// benchRepo is the canonical repository every row is bound to.
	benchRepo = "acme/widgets"
	// deadPIDs is how many exited processes lend their pid numbers to the rows.
	deadPIDs = 10
	// setupWorkers is the number of goroutines creating objects (outside the timer).
	setupWorkers = 8
	// ratioGoal is the target for apply time per row over bare write time per row.
	ratioGoal = 1.5
)

// The control plane is started by the first benchmark that needs it and stopped in
// TestMain, so a plain `go test` (no -bench) never starts it.
var (
	envOnce sync.Once
	env     *testenv.Env
	k8s     client.WithWatch
	facts   liveness.HostFacts
	envErr  error
)

// Per-row figures of the last run of each benchmark, for the summary line.
var (
	applyNsPerRow float64
	bareNsPerRow  float64
)

// TestMain runs the benchmarks, prints the apply/bare summary when both ran, and stops
// the control plane if a benchmark started it.
func TestMain(m *testing.M) {
	code := m.Run()
	if applyNsPerRow > 0 && bareNsPerRow > 0 {
		ratio := applyNsPerRow / bareNsPerRow
		verdict := "within"
		if ratio > ratioGoal {
			verdict = "ABOVE"
		}
		fmt.Printf("bench summary: apply %.0f ns/row, bare Get+Status().Update %.0f ns/row, ratio %.2fx (%s the %.1fx goal)\n",
			applyNsPerRow, bareNsPerRow, ratio, verdict, ratioGoal)
	}
	stopClaimBench(code != 0) // claim_bench_test.go: its summary, manager and Gitea
	stopRepoBench(code != 0)  // repos_bench_test.go: its managers, proxies and Gitea servers
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}
	os.Exit(code)
}

// startEnv starts envtest once with the project's CRDs and returns a plain client.
func startEnv(b *testing.B) client.WithWatch {
	b.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("KUBEBUILDER_ASSETS is not set: run with KUBEBUILDER_ASSETS=$PWD/.cache/envtest/v1.37.2 (see `make bench`)")
	}
	envOnce.Do(func() {
		testenv.SetLogger(io.Discard)
		if facts, envErr = testenv.HostFacts(benchHostID); envErr != nil {
			return
		}
		if env, envErr = testenv.Start(); envErr == nil {
			k8s = env.Client
		}
	})
	if envErr != nil {
		b.Fatal(envErr)
	}
	return k8s
}

// deadProcess is the pid and start time of a process that has exited.
type deadProcess struct {
	pid       int64
	startTime int64
}

// exitedProcesses starts n short-lived children, records their pid and start time, and
// kills and reaps them, so each pid number is free and the prober reports it gone.
func exitedProcesses(b *testing.B, prober *liveness.ProcProber, n int) []deadProcess {
	b.Helper()
	out := make([]deadProcess, 0, n)
	for range n {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			b.Fatalf("starting a child process: %v", err)
		}
		pid := int64(cmd.Process.Pid)
		st, err := liveness.ProcessStartTime("", pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err != nil {
			b.Fatalf("reading the start time of pid %d: %v", pid, err)
		}
		out = append(out, deadProcess{pid: pid, startTime: st})
	}
	for _, d := range out {
		st := d.startTime
		res := prober.Probe(context.Background(), liveness.Target{HostID: facts.HostID, BootID: facts.BootID, PID: d.pid, StartTime: &st})
		if res.State != liveness.Gone {
			b.Fatalf("pid %d of an exited child probes as %s (%s)", d.pid, res.State, res.Detail)
		}
	}
	return out
}

// newNamespace creates a fresh namespace: a plan covers exactly one namespace.
func newNamespace(ctx context.Context, b *testing.B, prefix string) string {
	b.Helper()
	ns, err := env.NewNamespace(ctx, prefix)
	if err != nil {
		b.Fatal(err)
	}
	return ns
}

// rowName is the name (and worker identity) of row i.
func rowName(i int) string { return fmt.Sprintf("w-%04d", i) }

// createEligibleRows creates n registrations that every check of the planner accepts:
// trusted instance ids, this host and boot, an exited pid (row i borrows pid i mod
// len(dead), with a start time of its own), canonical repository, and a status written
// directly (no WorkerRegistration controller runs here): Active, stale, heartbeat an
// hour ago with a 60 s TTL.
func createEligibleRows(ctx context.Context, b *testing.B, c client.Client, ns string, n int, dead []deadProcess) {
	b.Helper()
	createRows(ctx, b, c, ns, n, dead, func(int) string { return benchRepo })
}

// createRows is createEligibleRows with row i bound to the repository repoOf(i).
func createRows(ctx context.Context, b *testing.B, c client.Client, ns string, n int, dead []deadProcess, repoOf func(int) string) {
	b.Helper()
	hb := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	work := make(chan int)
	errs := make(chan error, setupWorkers)
	var wg sync.WaitGroup
	for range setupWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				d := dead[i%len(dead)]
				st := d.startTime + int64(i/len(dead)) // distinct (pid, startTime) per row
				name := rowName(i)
				wr := &fleetv1alpha1.WorkerRegistration{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: fleetv1alpha1.WorkerRegistrationSpec{
						ClientInstanceID:    "inst-" + name,
						WorkerNamespace:     "slot-" + name,
						Identity:            "bot-" + name,
						Remote:              "origin",
						Repository:          repoOf(i),
						HeartbeatTTLSeconds: 60,
						Process:             fleetv1alpha1.ProcessIdentity{HostID: facts.HostID, BootID: facts.BootID, PID: d.pid, StartTime: &st},
						GenerationID:        "gen-" + name,
						SessionID:           "sess-" + name,
					},
				}
				if err := c.Create(ctx, wr); err != nil {
					errs <- fmt.Errorf("creating %s: %w", name, err)
					return
				}
				// The manager's registration reconciler may write the new row's status
				// first: retry on its resourceVersion.
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					if err := c.Get(ctx, client.ObjectKeyFromObject(wr), wr); err != nil {
						return err
					}
					wr.Status = fleetv1alpha1.WorkerRegistrationStatus{
						Phase:           fleetv1alpha1.PhaseActive,
						OwnershipState:  fleetv1alpha1.OwnershipStale,
						LastHeartbeatAt: &hb,
					}
					return c.Status().Update(ctx, wr)
				})
				if err != nil {
					errs <- fmt.Errorf("writing the status of %s: %w", name, err)
					return
				}
			}
		}()
	}
	var failed error
feed:
	for i := range n {
		select {
		case work <- i:
		case failed = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if failed == nil {
		select {
		case failed = <-errs:
		default:
		}
	}
	if failed != nil {
		b.Fatal(failed)
	}
}

// allowAll is an approver check that always allows: permissions are not measured here.
type allowAll struct{}

func (allowAll) CanApprove(context.Context, authz.Subject, string) (bool, string, error) {
	return true, "", nil
}

func (allowAll) WorkerFacts(_ context.Context, s authz.Subject, _ string) (retirement.SubjectFacts, error) {
	return retirement.SubjectFacts{User: s.User}, nil
}

func (allowAll) ApprovalGuard(context.Context) (retirement.ApprovalGuard, error) {
	return retirement.ApprovalGuard{PolicyFound: true, BindingFound: true}, nil
}

// BenchmarkApply times the apply of an approved fleet plan over 1,000 eligible rows by
// the manager as cmd/ wires it (startPlanManager: this host's agent, the RetirementPlan
// controller): from the approval's write to the fleet plan's applied status, as a watch
// sees it. That covers the approval judgement, the fresh re-read and candidate re-check,
// the recorded intent, and per row the fence check, liveness re-probe and guarded status
// update, then the host plan's report and the fleet plan's aggregate. Creating the rows,
// planning and approving happen with the timer stopped.
func BenchmarkApply(b *testing.B) {
	b.Run(fmt.Sprintf("rows=%d", benchRows), func(b *testing.B) {
		b.StopTimer() // starting the control plane is not part of the figure
		c := startEnv(b)
		ctx := context.Background()
		prober := &liveness.ProcProber{Facts: facts}
		dead := exitedProcesses(b, prober, deadPIDs)
		approver := &authenticationv1.SelfSubjectReview{}
		if err := c.Create(ctx, approver); err != nil {
			b.Fatalf("who am I: %v", err)
		}

		var timed time.Duration
		for range b.N {
			ns := newNamespace(ctx, b, "bench-apply")
			pm := startPlanManager(ctx, b, ns, testenv.Uniq("bench-agents"), prober)
			createEligibleRows(ctx, b, c, ns, benchRows, dead)
			pm.cachedRows(ctx, b, ns, benchRows)

			plan, w := watchedPlan(ctx, b, c, ns, "bench")
			if err := c.Create(ctx, plan); err != nil {
				b.Fatalf("creating the plan: %v", err)
			}
			// The approval is written once the pages are settled: until then the
			// controller still writes the plan's status, and an Update of the planned
			// copy would conflict with it.
			planned := waitPaged(b, w, plan.Name, nil)
			if planned.Status.Outcome != retirement.OutcomePlanned || planned.Status.CandidateCount != benchRows {
				b.Fatalf("plan: outcome %q with %d candidates, want planned with %d (preserved: %v)",
					planned.Status.Outcome, planned.Status.CandidateCount, benchRows, planned.Status.PreservedReasonCounts)
			}
			planned.Spec.Approval = &fleetv1alpha1.RetirementApproval{
				RegistryFingerprint:  planned.Status.RegistryFingerprint,
				CandidateFingerprint: planned.Status.CandidateFingerprint,
				WorkerIdentities:     planned.Status.CandidateWorkerIdentities,
				ApprovedBy:           approver.Status.UserInfo.Username,
				ApprovedGroups:       approver.Status.UserInfo.Groups,
			}

			start := time.Now()
			b.StartTimer()
			if err := c.Update(ctx, planned); err != nil {
				b.Fatalf("approving the plan: %v", err)
			}
			applied := waitOutcome(b, w, plan.Name, func(o string) bool { return o != retirement.OutcomePlanned })
			b.StopTimer()
			timed += time.Since(start)
			w.Stop()
			pm.shutdown(b)

			st := applied.Status
			if st.Outcome != retirement.OutcomeApplied || st.RetiredCount != benchRows || st.ApplyComplete == nil || !*st.ApplyComplete {
				b.Fatalf("apply: outcome %q, retired %d of %d, %d preserved, message %q",
					st.Outcome, st.RetiredCount, benchRows, len(st.ApplyPreserved), st.Message)
			}
		}
		rows := float64(b.N * benchRows)
		applyNsPerRow = float64(timed.Nanoseconds()) / rows
		b.ReportMetric(applyNsPerRow, "ns/row")
	})
}

// BenchmarkBareUpdateLoop is the baseline: the same 1,000 rows in a fresh namespace,
// each read with Get and retired with one Status().Update, nothing else. It writes the
// same status fields the controller writes, so the two figures differ only by the
// controller's checks. When BenchmarkApply ran first it also reports apply/bare.
func BenchmarkBareUpdateLoop(b *testing.B) {
	b.Run(fmt.Sprintf("rows=%d", benchRows), func(b *testing.B) {
		b.StopTimer() // starting the control plane is not part of the figure
		c := startEnv(b)
		ctx := context.Background()
		prober := &liveness.ProcProber{Facts: facts}

		var timed time.Duration
		for range b.N {
			ns := newNamespace(ctx, b, "bench-bare")
			createEligibleRows(ctx, b, c, ns, benchRows, exitedProcesses(b, prober, deadPIDs))

			start := time.Now()
			b.StartTimer()
			for i := range benchRows {
				wr := &fleetv1alpha1.WorkerRegistration{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: rowName(i)}, wr); err != nil {
					b.Fatalf("reading %s: %v", rowName(i), err)
				}
				now := metav1.NewTime(time.Now())
				wr.Status.Phase = fleetv1alpha1.PhaseRetired
				wr.Status.OwnershipState = fleetv1alpha1.OwnershipHistorical
				wr.Status.RetiredAt = &now
				wr.Status.RetiredBy = ns + "/bare"
				wr.Status.RetirementReason = retirement.ReasonEligibleStaleOrphan
				if err := c.Status().Update(ctx, wr); err != nil {
					b.Fatalf("retiring %s: %v", wr.Name, err)
				}
			}
			b.StopTimer()
			timed += time.Since(start)
		}
		bareNsPerRow = float64(timed.Nanoseconds()) / float64(b.N*benchRows)
		b.ReportMetric(bareNsPerRow, "ns/row")
		if applyNsPerRow > 0 {
			b.ReportMetric(applyNsPerRow/bareNsPerRow, "apply/bare")
		}
	})
}
