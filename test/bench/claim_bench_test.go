package bench

// Claim latency: how long a worker waits from creating a TaskClaim until the claim is
// decided (phase Active or Rejected), with 1, 4, 16 and 64 workers claiming at the same
// time, all on one issue or each on its own. The figures are set against the bare cost
// of what a claim cannot avoid, measured in the same run with as many operations at
// once in the same mode: one compare-and-swap on a coordination.k8s.io Lease and, for
// the operation that wins it, one guarded publication of the claim record in Gitea
// (giteaclaim.Publish: read, conditional write, Gitea's answer as the read-back).
// Baseline and claim rounds alternate, so load on the shared machine weighs on both.
//
// A second baseline is the protocol floor: what one client, with no controller, must do
// for one correct claim. It reads the target as validation does (giteaclaim.ReadTarget:
// the issue or pull request, its dependencies, timeline and base head, the independent
// reads issued at once), takes the Lease by compare-and-swap, reads the target again as
// the claim-time revalidation must, and publishes the record guarded by what that read
// saw, Gitea's answer being the read-back. The operation that won then records the
// transition in Gitea, the audit the seed requires of every claim (one comment, as a
// claim's "claimed" comment): after its latency is taken, as a claim posts it after
// its activation, so it weighs on the round as a claim's does and not on its own
// latency. The goals (issue 20): claim p99 at most 1.5x
// the floor's p99 at every N in both modes, and claims per second at 64 distinct targets
// at least 0.7x the floor's operations per second. The bare lock-and-publish figures
// are printed beside them for comparison with earlier runs, and so are the requests a
// claim costs: Gitea's, counted on the controller's wire, and the API server's, read
// from its apiserver_request_total before and after each round (every client's: the
// workers', the manager's and its agents').
//
// These benchmarks need a real Gitea besides envtest. They start one with hack/gitea.sh
// (or use GITEA_URL and GITEA_TOKEN) the first time a claim benchmark runs, together with
// a manager running the TaskClaim and WorkerRegistration reconcilers; TestMain stops both.
// A plain `go test` starts none of it. Run, for example:
//
//	KUBEBUILDER_ASSETS=$PWD/.cache/envtest/v1.37.2 go test ./test/bench/ -run '^$' \
//	    -bench 'BareLockAndPublish|ClaimLatency' -benchtime=1x
//
// The manager is configured as cmd/ configures it: the TaskClaim reconciler runs
// taskclaim.DefaultConcurrency reconciles at once (--taskclaim-concurrency's default)
// unless FLEET_BENCH_RECONCILERS asks for another number, and this host's agent and the
// fleet coordinator run in it, as they do in every manager. The summary prints the
// concurrency used. Permissions are not measured: the capability verdict always answers
// allowed, and no admission policies or RBAC are installed.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/controllers/workerregistration"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/nudge"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

const (
	// claimGoal is the target for claim p99 over the protocol floor's p99.
	claimGoal = 1.5
	// throughputGoal is the target for claims/s at 64 distinct targets over the floor's
	// ops/s.
	throughputGoal = 0.7
	// minSamples is the fewest latencies a scenario collects per b.N (rounds of few
	// workers repeat until they have as many).
	minSamples = 16
	// claimPool is the number of live worker registrations shared by every scenario.
	claimPool = 64
	// claimTTL is the capability lifetime, cmd/'s default.
	claimTTL = 2 * time.Hour
	// roundTimeout bounds one round of concurrent claims.
	roundTimeout = 3 * time.Minute
	// giteaSetupWorkers bounds concurrent issue creation (outside the timer).
	giteaSetupWorkers = 4
	// reconcilersEnv overrides the TaskClaim reconciler's concurrency.
	reconcilersEnv = "FLEET_BENCH_RECONCILERS"
)

// claimWorkerCounts are the concurrency levels of BenchmarkClaimLatency.
var claimWorkerCounts = []int{1, 4, 16, 64}

// claimSite is where a round of claims is made and followed: the client that creates and
// watches them, their namespace, and the count of the controller's Gitea requests.
type claimSite struct {
	c     client.WithWatch
	ns    string
	calls *countingTransport // counts the controller's Gitea requests
}

// claimBench is the lazily started claim fixture: Gitea, a repository, a manager and a
// pool of live workers in one namespace.
type claimBench struct {
	claimSite
	srv        *testgitea.Server
	gc         *giteaclaim.Client // the baseline's client (administrator token)
	ownerToken string
	suffix     string // of every Gitea name this run made
	// bareIdentity is the Gitea account the baseline's records name and assign.
	bareIdentity string
	repo         string
	workers      []string
	reconcilers  string // what the manager was configured with, for the report
	// nudges connects the claim reconciler to the benchmarks' gateways, as cmd/ does.
	nudges  *nudge.Hub
	stop    context.CancelFunc
	stopped chan error
	warmed  bool
}

var (
	claimOnce sync.Once
	claimFix  *claimBench
	claimErr  error
	roundSeq  atomic.Int64
)

// scenarioFigures is one BenchmarkClaimLatency scenario, for the summary.
type scenarioFigures struct {
	name                       string
	n                          int
	one                        bool
	rounds                     int
	claim, bare, floor         figures
	validatedP50, validatedP99 time.Duration // creation to the validation showing
	winners                    int           // total over all rounds
	gitea                      giteaCalls
	api                        apiCalls // the API server's requests while the claims were decided
}

var scenarios []scenarioFigures

// allowedVerdict answers allowed for every worker: permissions are not what is measured
// here (the taskclaim suite covers the SubjectAccessReview verdict).
type allowedVerdict struct{}

func (allowedVerdict) Verdict(context.Context, string, string) (string, error) {
	return claim.VerdictAllowed, nil
}

// stopClaimBench prints the claim summary and stops the manager and the Gitea server a
// claim benchmark started; failed keeps Gitea's run directory for inspection. TestMain
// calls it before stopping envtest.
func stopClaimBench(failed bool) {
	printClaimSummary()
	cb := claimFix
	if cb == nil && claimErr == nil {
		return
	}
	if cb != nil && cb.stop != nil {
		cb.stop()
		select {
		case err := <-cb.stopped:
			if err != nil {
				fmt.Fprintf(os.Stderr, "claim bench: manager: %v\n", err)
			}
		case <-time.After(30 * time.Second):
			fmt.Fprintln(os.Stderr, "claim bench: the manager did not stop within 30s")
		}
	}
	if cb != nil && cb.srv != nil && cb.srv.Started() {
		if failed {
			fmt.Fprintf(os.Stderr, "claim bench: failures; Gitea run directory kept: %s\n", cb.srv.RunDir())
		}
		if err := cb.srv.Stop(failed); err != nil {
			fmt.Fprintf(os.Stderr, "claim bench: %v\n", err)
		}
	}
}

// printClaimSummary prints, per scenario, the claim figures, the baseline measured
// alongside, the ratio and whether it meets the goal, and then the throughput at 64
// workers against the baseline's. Every figure is printed, met or not.
func printClaimSummary() {
	if len(scenarios) == 0 {
		return
	}
	reconcilers := ""
	if claimFix != nil {
		reconcilers = claimFix.reconcilers
	}
	fmt.Printf("claim bench: TaskClaim reconciler concurrency: %s\n", reconcilers)
	verdict := func(ok bool) string {
		if ok {
			return "within"
		}
		return "ABOVE"
	}
	for _, s := range scenarios {
		fmt.Printf("claim bench: %-24s %3d claims in %2d round(s): p50 %9s, p99 %9s, %6.1f claims/s, winners %d/round, validated p50 %s p99 %s\n",
			s.name, s.claim.samples, s.rounds, ms(s.claim.p50), ms(s.claim.p99), s.claim.perSecond, s.winners/max(1, s.rounds),
			ms(s.validatedP50), ms(s.validatedP99))
		line := fmt.Sprintf("claim bench:     floor %3d ops: p50 %9s, p99 %9s, %6.1f ops/s", s.floor.samples, ms(s.floor.p50), ms(s.floor.p99), s.floor.perSecond)
		if s.floor.p99 > 0 {
			ratio := float64(s.claim.p99) / float64(s.floor.p99)
			line += fmt.Sprintf("; claim p99 / floor p99 %.2fx (%s the %.1fx goal)", ratio, verdict(ratio <= claimGoal), claimGoal)
		}
		fmt.Println(line)
		line = fmt.Sprintf("claim bench:     bare  %3d ops: p50 %9s, p99 %9s, %6.1f ops/s", s.bare.samples, ms(s.bare.p50), ms(s.bare.p99), s.bare.perSecond)
		if s.bare.p99 > 0 {
			line += fmt.Sprintf("; claim p99 / bare p99 %.2fx", float64(s.claim.p99)/float64(s.bare.p99))
		}
		fmt.Println(line)
		fmt.Println("claim bench:     " + s.gitea.describe(s.claim.samples))
		fmt.Println("claim bench:     API requests per claim " + s.api.describe(s.claim.samples))
	}
	for _, s := range scenarios {
		if s.n != claimPool || s.floor.perSecond <= 0 {
			continue
		}
		ratio := s.claim.perSecond / s.floor.perSecond
		v := "meets"
		if ratio < throughputGoal {
			v = "BELOW"
		}
		if s.one {
			v = "no goal for one target; " + v
		}
		fmt.Printf("claim bench: throughput %-24s %.2f claims/s / %.2f floor ops/s = %.3fx (%s the %.1fx goal)\n",
			s.name, s.claim.perSecond, s.floor.perSecond, ratio, v, throughputGoal)
	}
}

// claimConcurrency is how many claims the bench managers' TaskClaim reconciler decides at
// once, and how that was chosen, for the report: taskclaim.DefaultConcurrency (the
// default of cmd/'s --taskclaim-concurrency) unless FLEET_BENCH_RECONCILERS says otherwise.
func claimConcurrency() (int, string, error) {
	v := os.Getenv(reconcilersEnv)
	if v == "" {
		return taskclaim.DefaultConcurrency,
			fmt.Sprintf("%d (taskclaim.DefaultConcurrency, --taskclaim-concurrency's default)", taskclaim.DefaultConcurrency), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, "", fmt.Errorf("%s=%q: want a positive integer", reconcilersEnv, v)
	}
	return n, fmt.Sprintf("%d (%s)", n, reconcilersEnv), nil
}

// benchManagerOptions are the options of a bench manager: no metrics or probe listener,
// its cache (base: cache.Options{} for controller-runtime's defaults, or the shipped
// managercache.Options) limited to namespaces, as cmd/'s --namespaces limits the
// shipped one, and controller names that may repeat. Several managers run in one
// benchmark process (the claim fixtures', the memory benchmark's): each decides only the
// claims and rows of its own namespaces, and they share the process's controller names.
func benchManagerOptions(scheme *runtime.Scheme, base cache.Options, namespaces ...string) ctrl.Options {
	base.DefaultNamespaces = map[string]cache.Config{}
	for _, ns := range namespaces {
		base.DefaultNamespaces[ns] = cache.Config{}
	}
	return ctrl.Options{
		Scheme:                 scheme,
		Cache:                  base,
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// startClaimBench starts (once) envtest, Gitea, the manager and the worker pool, and
// makes one warm-up claim so once-per-process work (publishing the rule set, filling the
// manager's caches, opening connections) stays out of the figures.
func startClaimBench(b *testing.B) *claimBench {
	b.Helper()
	c := startEnv(b) // skips without KUBEBUILDER_ASSETS
	claimOnce.Do(func() { claimFix, claimErr = setupClaimBench(c) })
	if claimErr != nil {
		b.Fatal(claimErr)
	}
	cb := claimFix
	if !cb.warmed {
		cb.warmed = true
		issue := createIssues(b, cb, 1)[0]
		res, _, _, _ := runRound(b, &cb.claimSite, []string{cb.workers[0]}, cb.targets([]int64{issue}))
		if res[0].phase != fleetv1alpha1.ClaimPhaseActive {
			b.Fatalf("warm-up claim ended %s (%s), want Active", res[0].phase, res[0].detail)
		}
	}
	return cb
}

// setupClaimBench brings up Gitea, a repository, the manager and the live worker pool.
// It returns errors instead of failing, because it runs inside a sync.Once.
func setupClaimBench(c client.WithWatch) (*claimBench, error) {
	ctx := context.Background()
	t0 := time.Now()
	cb := &claimBench{claimSite: claimSite{c: c}, nudges: &nudge.Hub{}}
	srv, err := testgitea.Start(ctx)
	cb.srv = srv // stopped by stopClaimBench even when half started
	if err != nil {
		return cb, fmt.Errorf("starting Gitea: %w", err)
	}
	if cb.gc, err = giteaclaim.New(srv.URL, srv.Token, giteaclaim.WithHTTPClient(srv.HTTP)); err != nil {
		return cb, err
	}
	suffix := testgitea.RandomHex(3)
	cb.suffix = suffix
	if cb.ownerToken, err = srv.CreateUser(ctx, "bench-owner-"+suffix); err != nil {
		return cb, err
	}
	if cb.repo, err = srv.CreateRepo(ctx, cb.ownerToken, "claims-"+suffix); err != nil {
		return cb, err
	}

	if cb.ns, err = env.NewNamespace(ctx, "bench-claim"); err != nil {
		return cb, err
	}

	concurrency, reconcilers, err := claimConcurrency()
	if err != nil {
		return cb, err
	}
	cb.reconcilers = reconcilers
	// This host's agent and the fleet coordinator, as cmd/setup.go runs them: only the
	// holder of a host's Lease writes its rows' ownership, so without them no worker
	// would ever show live.
	agentNS, err := env.NewNamespace(ctx, "bench-agents")
	if err != nil {
		return cb, err
	}
	mgr, err := ctrl.NewManager(env.Config, benchManagerOptions(c.Scheme(), cache.Options{}, cb.ns, agentNS))
	if err != nil {
		return cb, fmt.Errorf("creating the manager: %w", err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return cb, err
	}
	instance := hostagent.NewInstanceID()
	agent := hostagent.NewHost(cs, agentNS, facts.HostID, instance, hostagent.Timings{})
	coordinator := hostagent.NewCoordinator(cs, agentNS, instance, hostagent.Timings{})
	if err := mgr.Add(agent); err != nil {
		return cb, err
	}
	if err := mgr.Add(coordinator); err != nil {
		return cb, err
	}
	if err := (&workerregistration.Reconciler{
		Client: mgr.GetClient(), Prober: &liveness.ProcProber{Facts: facts}, Clock: clock.RealClock{},
		Recorder: mgr.GetEventRecorder("workerregistration-controller"),
		Agent:    agent, Coordinator: coordinator, AgentNamespace: agentNS,
	}).SetupWithManager(mgr); err != nil {
		return cb, err
	}
	// The controller gets a client of its own whose requests are counted, so each
	// scenario can say how many Gitea round trips a claim costs.
	cb.calls = &countingTransport{base: srv.HTTP.Transport}
	controllerGitea, err := giteaclaim.New(srv.URL, srv.Token,
		giteaclaim.WithHTTPClient(&http.Client{Transport: cb.calls, Timeout: srv.HTTP.Timeout}))
	if err != nil {
		return cb, err
	}
	if err := (&taskclaim.Reconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Gitea:      controllerGitea,
		Verdicts:   allowedVerdict{},
		Fence:      workflowfence.Fence{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Clock: clock.RealClock{}},
		Repository: cb.repo,
		TTL:        claimTTL,
		Clock:      clock.RealClock{},
		Recorder:   mgr.GetEventRecorder("taskclaim-controller"),
		Nudges:     cb.nudges,

		MaxConcurrentReconciles: concurrency,
	}).SetupWithManager(mgr); err != nil {
		return cb, err
	}
	mctx, cancel := context.WithCancel(ctx)
	cb.stop, cb.stopped = cancel, make(chan error, 1)
	go func() { cb.stopped <- mgr.Start(mctx) }()

	if err := createWorkers(ctx, cb); err != nil {
		return cb, err
	}
	fmt.Fprintf(os.Stderr, "claim bench: Gitea, manager and %d live workers ready after %s\n",
		claimPool, time.Since(t0).Round(100*time.Millisecond))
	return cb, nil
}

// createWorkers gives claimPool workers a Gitea account with write access to the
// repository and registers them (registerLiveWorkers).
func createWorkers(ctx context.Context, cb *claimBench) error {
	for i := range claimPool {
		cb.workers = append(cb.workers, fmt.Sprintf("bench-w%02d", i))
	}
	// Each worker acts as a Gitea account with write access: a won claim assigns it, in
	// the record's guarded write, as the shipped manager does.
	cb.bareIdentity = "bench-bare-" + cb.suffix
	logins := append([]string{cb.bareIdentity}, nil...)
	for _, w := range cb.workers {
		logins = append(logins, w+"-"+cb.suffix)
	}
	err := parallel(len(logins), giteaSetupWorkers, func(i int) error {
		if _, err := cb.srv.CreateUser(ctx, logins[i]); err != nil {
			return err
		}
		return cb.srv.AddCollaborator(ctx, cb.repo, logins[i])
	})
	if err != nil {
		return err
	}
	workers := make([]benchWorker, len(cb.workers))
	for i, name := range cb.workers {
		workers[i] = benchWorker{name: name, identity: name + "-" + cb.suffix, repo: cb.repo}
	}
	return registerLiveWorkers(ctx, cb.c, cb.ns, workers)
}

// benchWorker is a worker registerLiveWorkers registers: its name, its Gitea login and
// its repository binding ("owner/name").
type benchWorker struct{ name, identity, repo string }

// registerLiveWorkers registers workers in ns whose process is this test binary, renews
// their heartbeats, and waits until the WorkerRegistration reconciler reports every
// registration of ns live.
func registerLiveWorkers(ctx context.Context, c client.Client, ns string, workers []benchWorker) error {
	pid := int64(os.Getpid())
	start, err := liveness.ProcessStartTime("", pid)
	if err != nil {
		return fmt.Errorf("reading this process's start time: %w", err)
	}
	err = parallel(len(workers), setupWorkers, func(i int) error {
		w := workers[i]
		wr := &fleetv1alpha1.WorkerRegistration{
			ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: ns},
			Spec: fleetv1alpha1.WorkerRegistrationSpec{
				ClientInstanceID:    "inst-" + w.name,
				WorkerNamespace:     "slot-" + w.name,
				Identity:            w.identity,
				Remote:              "origin",
				Repository:          w.repo,
				HeartbeatTTLSeconds: 3600,
				Process: fleetv1alpha1.ProcessIdentity{HostID: facts.HostID, BootID: facts.BootID,
					PID: pid, StartTime: ptr.To(start)},
			},
		}
		if err := c.Create(ctx, wr); err != nil {
			return fmt.Errorf("registering %s: %w", w.name, err)
		}
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &fleetv1alpha1.WorkerRegistration{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(wr), cur); err != nil {
				return err
			}
			cur.Status.LastHeartbeatAt = ptr.To(metav1.NewTime(time.Now().Truncate(time.Second)))
			return c.Status().Update(ctx, cur)
		})
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		list := &fleetv1alpha1.WorkerRegistrationList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		live := 0
		for _, wr := range list.Items {
			if wr.Status.Phase == fleetv1alpha1.PhaseActive && wr.Status.OwnershipState == fleetv1alpha1.OwnershipLive {
				live++
			}
		}
		if live == len(list.Items) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d worker registrations became live", live, len(list.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// parallel runs fn(0..n-1) on up to width goroutines and returns the first error.
func parallel(n, width int, fn func(int) error) error {
	work := make(chan int)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(width, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return first
}

// createIssues opens n fresh issues in the repository (outside any timer).
func createIssues(b *testing.B, cb *claimBench, n int) []int64 {
	b.Helper()
	return openIssues(b, cb.srv, cb.ownerToken, cb.repo, n)
}

// openIssues opens n fresh issues in repo on srv as the user of token (outside any timer).
func openIssues(b *testing.B, srv *testgitea.Server, token, repo string, n int) []int64 {
	b.Helper()
	out := make([]int64, n)
	err := parallel(n, giteaSetupWorkers, func(i int) error {
		title := fmt.Sprintf("bench task %d-%d", roundSeq.Load(), i)
		num, err := srv.CreateIssue(context.Background(), token, repo, title, "Task: "+title+"\n")
		out[i] = num
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// claimOutcome is what one worker saw of its claim.
type claimOutcome struct {
	latency   time.Duration // creation to the final phase
	validated time.Duration // creation to the validation (0 when refused at validation)
	phase     string
	class     string
	detail    string
	// repository is where the claim was decided (its status.repository; nil for a claim
	// of the flags' repository before validation recorded one).
	repository *fleetv1alpha1.ClaimRepository
	err        error
}

// targets are the issues of the fixture's repository, as claims name them.
func (cb *claimBench) targets(issues []int64) []fleetv1alpha1.TaskTarget {
	out := make([]fleetv1alpha1.TaskTarget, len(issues))
	for i, n := range issues {
		out[i] = fleetv1alpha1.TaskTarget{Repository: cb.repo, Kind: fleetv1alpha1.TargetKindIssue, Number: n}
	}
	return out
}

// runRound makes workers[i] claim targets[i] (targets may repeat), all at once, and
// returns each claim's outcome and the round's wall time (from the start signal to the
// last decided claim). Each worker copies its pin into spec.pin as soon as the
// validation shows. Claim states are followed through an informer (followClaims), so
// the API server is not polled. The round's claims are deleted afterwards, which keeps active claims from
// being re-checked against Gitea during later rounds. The Gitea requests returned are
// the controller's from the start until the round's claims were decided and Gitea went
// quiet, before that deletion released them; the API server's requests returned are
// every client's over the same span.
func runRound(b *testing.B, cb *claimSite, workers []string, targets []fleetv1alpha1.TaskTarget) ([]claimOutcome, time.Duration, giteaCalls, apiCalls) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
	defer cancel()
	round := roundSeq.Add(1)
	n := len(workers)
	before := cb.calls.snapshot()
	apiBefore, err := readAPICalls(ctx, env.Config)
	if err != nil {
		b.Fatal(err)
	}

	names := make([]string, n)
	updates := make(map[string]chan *fleetv1alpha1.TaskClaim, n)
	for i := range n {
		names[i] = fmt.Sprintf("r%d-%s", round, workers[i])
		updates[names[i]] = make(chan *fleetv1alpha1.TaskClaim, 256)
	}
	following := make(chan struct{})
	go func() {
		defer close(following)
		followClaims(ctx, cb.c, cb.ns, updates)
	}()

	out := make([]claimOutcome, n)
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			out[i] = claimAndWait(ctx, cb.c, cb.ns, names[i], workers[i], targets[i], updates[names[i]])
		}()
	}
	b.StartTimer()
	t0 := time.Now()
	close(begin)
	wg.Wait()
	wall := time.Since(t0)
	b.StopTimer()
	cancel()
	<-following

	for i, o := range out {
		if o.err != nil {
			b.Fatalf("claim %s of %s on %s#%d: %v", names[i], workers[i], targets[i].Repository, targets[i].Number, o.err)
		}
	}
	// A decided claim may still have Gitea work in flight (the audit comments written
	// after the status). Let it finish so the next round starts on a quiet controller and
	// the request counts belong to this round.
	cb.calls.quiesce(300*time.Millisecond, 10*time.Second)
	calls := cb.calls.snapshot().minus(before)
	apiAfter, err := readAPICalls(context.Background(), env.Config)
	if err != nil {
		b.Fatal(err)
	}
	if err := cb.c.DeleteAllOf(context.Background(), &fleetv1alpha1.TaskClaim{}, client.InNamespace(cb.ns)); err != nil {
		b.Fatalf("deleting the round's claims: %v", err)
	}
	// Deleting a won claim releases it (the record ended, an audit comment): wait until
	// that is done, so neither its time nor its requests land in the next round.
	deadline := time.Now().Add(roundTimeout)
	for {
		list := &fleetv1alpha1.TaskClaimList{}
		if err := cb.c.List(context.Background(), list, client.InNamespace(cb.ns)); err != nil {
			b.Fatalf("listing the round's claims: %v", err)
		}
		if len(list.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d claim(s) of round %d still not gone after %s", len(list.Items), round, roundTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cb.calls.quiesce(300*time.Millisecond, 10*time.Second)
	return out, wall, calls, apiAfter.minus(apiBefore)
}

// followClaims hands every state of the round's claims (updates) to their channels until
// ctx ends, and then closes them. It is an informer of the namespace's claims: the API
// server may end a watch at any time, and the informer watches again from the last
// version it saw, or lists afresh when that version is gone.
func followClaims(ctx context.Context, c client.WithWatch, ns string, updates map[string]chan *fleetv1alpha1.TaskClaim) {
	defer func() {
		for _, ch := range updates {
			close(ch)
		}
	}()
	deliver := func(o any) {
		tc, ok := o.(*fleetv1alpha1.TaskClaim)
		if !ok {
			return
		}
		if ch := updates[tc.Name]; ch != nil {
			select {
			case ch <- tc:
			case <-ctx.Done():
			}
		}
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := &fleetv1alpha1.TaskClaimList{}
			return list, c.List(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &opts})
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &fleetv1alpha1.TaskClaimList{}, client.InNamespace(ns), &client.ListOptions{Raw: &opts})
		},
	}
	_, informer := toolscache.NewInformerWithOptions(toolscache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &fleetv1alpha1.TaskClaim{},
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    deliver,
			UpdateFunc: func(_, o any) { deliver(o) },
		},
	})
	informer.RunWithContext(ctx)
}

// claimAndWait creates one claim, pins it when its validation appears, and returns when
// it reaches Active or a final phase.
func claimAndWait(ctx context.Context, c client.Client, ns, name, worker string, target fleetv1alpha1.TaskTarget,
	updates <-chan *fleetv1alpha1.TaskClaim) claimOutcome {
	var o claimOutcome
	start := time.Now()
	tc := &fleetv1alpha1.TaskClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       fleetv1alpha1.TaskClaimSpec{Worker: worker, Target: target},
	}
	if err := c.Create(ctx, tc); err != nil {
		o.err = fmt.Errorf("creating: %w", err)
		return o
	}
	pinned := false
	for {
		var cur *fleetv1alpha1.TaskClaim
		select {
		case <-ctx.Done():
			o.err = fmt.Errorf("no final phase after %s (last phase %q, pinned %t)", time.Since(start).Round(time.Millisecond), o.phase, pinned)
			return o
		case got, ok := <-updates:
			if !ok {
				o.err = errors.New("the claim watch closed")
				return o
			}
			cur = got
		}
		o.phase = cur.Status.Phase
		o.repository = cur.Status.Repository
		if cur.Status.Phase == fleetv1alpha1.ClaimPhaseActive || claim.FinalPhase(cur.Status.Phase) {
			o.latency = time.Since(start)
			if r := cur.Status.Result; r != nil {
				o.class = r.Class
				o.detail = fmt.Sprintf("outcome=%s class=%s predicate=%s", r.Outcome, r.Class, r.FailedPredicate)
			}
			return o
		}
		if !pinned && cur.Status.Validation != nil && cur.Status.Validation.Pin != "" {
			o.validated = time.Since(start)
			patch := client.MergeFrom(cur.DeepCopy())
			cur.Spec.Pin = cur.Status.Validation.Pin
			if err := c.Patch(ctx, cur, patch); err != nil {
				o.err = fmt.Errorf("setting spec.pin: %w", err)
				return o
			}
			pinned = true
		}
	}
}

// countingTransport counts the controller's Gitea requests by HTTP method and the time
// they took (from sending until the response headers arrived).
type countingTransport struct {
	base                            http.RoundTripper
	gets, patches, posts, others    atomic.Int64
	getNs, patchNs, postNs, otherNs atomic.Int64
}

// giteaCalls is a snapshot of a countingTransport.
type giteaCalls struct {
	gets, patches, posts, others    int64
	getNs, patchNs, postNs, otherNs int64
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	n, ns := &t.others, &t.otherNs
	switch req.Method {
	case http.MethodGet:
		n, ns = &t.gets, &t.getNs
	case http.MethodPatch:
		n, ns = &t.patches, &t.patchNs
	case http.MethodPost:
		n, ns = &t.posts, &t.postNs
	}
	start := time.Now()
	resp, err := t.base.RoundTrip(req)
	ns.Add(int64(time.Since(start)))
	n.Add(1)
	return resp, err
}

func (t *countingTransport) snapshot() giteaCalls {
	return giteaCalls{gets: t.gets.Load(), patches: t.patches.Load(), posts: t.posts.Load(), others: t.others.Load(),
		getNs: t.getNs.Load(), patchNs: t.patchNs.Load(), postNs: t.postNs.Load(), otherNs: t.otherNs.Load()}
}

func (c giteaCalls) total() int64 { return c.gets + c.patches + c.posts + c.others }

func (c giteaCalls) minus(o giteaCalls) giteaCalls {
	return giteaCalls{gets: c.gets - o.gets, patches: c.patches - o.patches, posts: c.posts - o.posts, others: c.others - o.others,
		getNs: c.getNs - o.getNs, patchNs: c.patchNs - o.patchNs, postNs: c.postNs - o.postNs, otherNs: c.otherNs - o.otherNs}
}

func (c giteaCalls) plus(o giteaCalls) giteaCalls {
	return giteaCalls{gets: c.gets + o.gets, patches: c.patches + o.patches, posts: c.posts + o.posts, others: c.others + o.others,
		getNs: c.getNs + o.getNs, patchNs: c.patchNs + o.patchNs, postNs: c.postNs + o.postNs, otherNs: c.otherNs + o.otherNs}
}

// describe renders the calls per claim and their mean duration per method.
func (c giteaCalls) describe(claims int) string {
	per := func(n, ns int64, method string) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf(" %s %.1f×%.1fms", method, float64(n)/float64(claims), float64(ns)/float64(n)/1e6)
	}
	return "Gitea requests per claim:" + per(c.gets, c.getNs, "GET") + per(c.patches, c.patchNs, "PATCH") +
		per(c.posts, c.postNs, "POST") + per(c.others, c.otherNs, "other")
}

// quiesce waits until no request has started or finished for quiet (at most limit).
func (t *countingTransport) quiesce(quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	last, since := t.snapshot().total(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if cur := t.snapshot().total(); cur != last {
			last, since = cur, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
}

// percentile returns the nearest-rank p-quantile (0 < p ≤ 1) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// bareRound runs n bare lock-and-publish operations at once and returns each one's
// latency and the round's wall time (from the start signal to the last finished op).
// One operation is what a claim cannot avoid: a Lease create (the compare-and-swap a
// claim on a target without a lock makes; it fails if the Lease exists) and, for the
// operation that won it, giteaclaim.Publish of a claim record carrying the Lease's
// resourceVersion (read, guarded write, Gitea's answer as the read-back). With one
// true all n race for one target: one create wins and publishes, the others get
// AlreadyExists and stop there. Otherwise each has its own target and all win. Issues
// are created before the timer starts.
func bareRound(b *testing.B, cb *claimBench, n int, one bool) ([]time.Duration, time.Duration) {
	b.Helper()
	return baselineRound(b, cb, n, one, false)
}

// floorRound runs n protocol-floor operations at once (see the file comment): bareRound's
// operation with the validation read before the compare-and-swap, the claim-time re-read
// after it, and the publication guarded by that re-read. A loser of one target stops at
// the compare-and-swap, after its validation read.
func floorRound(b *testing.B, cb *claimBench, n int, one bool) ([]time.Duration, time.Duration) {
	b.Helper()
	return baselineRound(b, cb, n, one, true)
}

func baselineRound(b *testing.B, cb *claimBench, n int, one, floor bool) ([]time.Duration, time.Duration) {
	ctx := context.Background()
	var issues []int64
	if one {
		num := createIssues(b, cb, 1)[0]
		for range n {
			issues = append(issues, num)
		}
	} else {
		issues = createIssues(b, cb, n)
	}
	salt := testgitea.RandomHex(4)
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	wins := make([]bool, n)
	begin := make(chan struct{})
	// decided is done when every operation has its latency: like a claim round's, the
	// round's wall time ends there, and audit writes still under way finish outside it.
	var decided, wg sync.WaitGroup
	decided.Add(n)
	for i := range n {
		wg.Go(func() {
			undecided := true
			defer func() {
				if undecided {
					decided.Done()
				}
			}()
			claimID := fmt.Sprintf("bare-%s-%d", salt, i)
			lockName := fmt.Sprintf("bare-%s-%d", salt, i)
			if one {
				lockName = "bare-" + salt
			}
			target := claim.Target{Repository: cb.repo, Kind: claim.KindIssue, Number: issues[i]}
			<-begin
			t0 := time.Now()
			if floor { // validation
				if _, err := cb.gc.ReadTarget(ctx, target); err != nil {
					errs[i] = fmt.Errorf("validation read of #%d: %w", issues[i], err)
					return
				}
			}
			now := metav1.NewMicroTime(t0)
			lease := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: cb.ns, Name: lockName},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(claimID), LeaseDurationSeconds: ptr.To(int32(claimTTL / time.Second)),
					AcquireTime: &now, RenewTime: &now},
			}
			err := cb.c.Create(ctx, lease)
			switch {
			case apierrors.IsAlreadyExists(err):
				lat[i] = time.Since(t0) // lost the lock: nothing to publish
				return
			case err != nil:
				errs[i] = fmt.Errorf("creating lease %s: %w", lease.Name, err)
				return
			}
			t1 := time.Now()
			rec := claim.Record{
				ClaimID: claimID, Worker: "bench-bare", Identity: cb.bareIdentity, Role: string(claim.RoleAuthor),
				Repository: cb.repo, Kind: claim.KindIssue, Number: issues[i], Generation: lease.ResourceVersion,
				Pin: "sha256:" + strings.Repeat("0", 64), State: claim.RecordStateActive,
				ClaimedAt: t1.Truncate(time.Second), ExpiresAt: t1.Add(claimTTL).Truncate(time.Second),
			}
			// Assigning, as a claim's publication does: the assignment rides in the write.
			opts := []giteaclaim.PublishOption{giteaclaim.Assigning()}
			if floor { // the claim-time re-read, which the publication is guarded by
				st, err := cb.gc.ReadTarget(ctx, target)
				if err != nil {
					errs[i] = fmt.Errorf("claim-time read of #%d: %w", issues[i], err)
					return
				}
				opts = append(opts, giteaclaim.Over(st))
			}
			if _, err := cb.gc.Publish(ctx, target, rec, opts...); err != nil {
				errs[i] = fmt.Errorf("publishing on #%d: %w", issues[i], err)
				return
			}
			lat[i] = time.Since(t0)
			wins[i] = true
			if !floor {
				return
			}
			// The audit write of the won claim, after its latency is taken, as a claim
			// posts its "claimed" comment after the activating status write.
			undecided = false
			decided.Done()
			tr := giteaclaim.Transition{Event: claim.EventClaimed, ClaimID: claimID, Worker: rec.Worker,
				Identity: rec.Identity, Role: rec.Role, At: time.Now()}
			if _, err := cb.gc.RecordTransition(ctx, target, tr); err != nil {
				errs[i] = fmt.Errorf("auditing the claim on #%d: %w", issues[i], err)
			}
		})
	}
	b.StartTimer()
	t0 := time.Now()
	close(begin)
	decided.Wait()
	wall := time.Since(t0)
	b.StopTimer()
	wg.Wait()
	won := 0
	for i := range n {
		if errs[i] != nil {
			b.Fatalf("bare operation %d of %d: %v", i, n, errs[i])
		}
		if wins[i] {
			won++
		}
	}
	if want := map[bool]int{true: 1, false: n}[one]; won != want {
		b.Fatalf("baseline round of %d (one target %t, floor %t): %d winner(s), want %d", n, one, floor, won, want)
	}
	return lat, wall
}

// figures are the latency percentiles and rate of a set of rounds.
type figures struct {
	samples   int
	p50, p99  time.Duration
	perSecond float64 // operations (or claims) per second of round wall time
}

func figuresOf(lat []time.Duration, wall time.Duration) figures {
	s := slices.Clone(lat)
	slices.Sort(s)
	f := figures{samples: len(s), p50: percentile(s, 0.5), p99: percentile(s, 0.99)}
	if wall > 0 {
		f.perSecond = float64(len(s)) / wall.Seconds()
	}
	return f
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkBareLockAndPublish is the baseline alone: rounds of N concurrent bare
// lock-and-publish operations (see bareRound) for N = 1, 4, 16 and 64, all on one target
// and each on its own. BenchmarkClaimLatency measures the same baseline itself,
// interleaved with its claim rounds, for its ratios; this one is for looking at the
// baseline on its own.
func BenchmarkBareLockAndPublish(b *testing.B) {
	b.StopTimer() // starting the control plane and Gitea is not part of the figure
	cb := startClaimBench(b)
	for _, n := range claimWorkerCounts {
		for _, one := range []bool{true, false} {
			b.Run(scenarioName(n, one), func(b *testing.B) {
				b.StopTimer()
				var lat []time.Duration
				var wall time.Duration
				for range b.N * roundsFor(n) {
					l, w := bareRound(b, cb, n, one)
					lat, wall = append(lat, l...), wall+w
				}
				f := figuresOf(lat, wall)
				b.ReportMetric(msf(f.p50), "p50-ms")
				b.ReportMetric(msf(f.p99), "p99-ms")
				b.ReportMetric(f.perSecond, "ops/s")
			})
		}
	}
}

// BenchmarkProtocolFloor is the protocol floor alone (see floorRound), for N = 1, 4, 16
// and 64, on one target and on distinct ones. BenchmarkClaimLatency measures it itself,
// interleaved with its claim rounds, for its ratios.
func BenchmarkProtocolFloor(b *testing.B) {
	b.StopTimer()
	cb := startClaimBench(b)
	for _, n := range claimWorkerCounts {
		for _, one := range []bool{true, false} {
			b.Run(scenarioName(n, one), func(b *testing.B) {
				b.StopTimer()
				var lat []time.Duration
				var wall time.Duration
				for range b.N * roundsFor(n) {
					l, w := floorRound(b, cb, n, one)
					lat, wall = append(lat, l...), wall+w
				}
				f := figuresOf(lat, wall)
				b.ReportMetric(msf(f.p50), "p50-ms")
				b.ReportMetric(msf(f.p99), "p99-ms")
				b.ReportMetric(f.perSecond, "ops/s")
			})
		}
	}
}

// BenchmarkClaimLatency times claims from TaskClaim creation to the decided phase
// (Active or Rejected) for 1, 4, 16 and 64 concurrent workers, all on one fresh issue
// (target=one: exactly one may win) or each on its own fresh issue (target=distinct:
// all must win), against two baselines of as many concurrent operations in the same
// mode: the protocol floor (floorRound), which the goals compare with, and the bare
// lock-and-publish (bareRound). Each claim round has one of each beside it, the floor
// before and the bare operation after, or the other way round, switching every round,
// so load on the machine weighs on all alike. Issues and registrations are made with the timer stopped; ns/op is the wall
// time of the rounds. It reports p50 and p99 latency, claims per second, winners per
// round, Gitea requests per claim, each baseline's p99 and operations per second, and
// claim p99 over each baseline's p99.
func BenchmarkClaimLatency(b *testing.B) {
	b.StopTimer()
	cb := startClaimBench(b)
	for _, n := range claimWorkerCounts {
		for _, one := range []bool{true, false} {
			name := scenarioName(n, one)
			b.Run(name, func(b *testing.B) {
				b.StopTimer()
				benchClaimScenario(b, cb, name, n, one)
			})
		}
	}
}

func scenarioName(n int, one bool) string {
	mode := "distinct"
	if one {
		mode = "one"
	}
	return fmt.Sprintf("workers=%d/target=%s", n, mode)
}

// roundsFor is how many rounds a scenario of n workers runs per b.N, so every
// scenario has at least minSamples latencies for its percentiles.
func roundsFor(n int) int { return max(1, (minSamples+n-1)/n) }

// benchClaimScenario runs rounds of n concurrent claims, each paired with a round of n
// concurrent bare operations, and reports the figures.
func benchClaimScenario(b *testing.B, cb *claimBench, name string, n int, one bool) {
	var (
		latencies, validations, bareLat, floorLat []time.Duration
		wall, bareWall, floorWall                 time.Duration
		winners, rounds                           int
		calls                                     giteaCalls
		api                                       apiCalls
	)
	for r := range b.N * roundsFor(n) {
		rounds++
		if r%2 == 0 {
			l, w := bareRound(b, cb, n, one)
			bareLat, bareWall = append(bareLat, l...), bareWall+w
		} else {
			l, w := floorRound(b, cb, n, one)
			floorLat, floorWall = append(floorLat, l...), floorWall+w
		}
		var issues []int64
		if one {
			num := createIssues(b, cb, 1)[0]
			for range n {
				issues = append(issues, num)
			}
		} else {
			issues = createIssues(b, cb, n)
		}
		out, roundWall, roundCalls, roundAPI := runRound(b, &cb.claimSite, cb.workers[:n], cb.targets(issues))
		calls, api = calls.plus(roundCalls), api.plus(roundAPI)
		won := 0
		var refusals []string
		for _, o := range out {
			latencies = append(latencies, o.latency)
			if o.validated > 0 {
				validations = append(validations, o.validated)
			}
			switch {
			case o.phase == fleetv1alpha1.ClaimPhaseActive:
				won++
			case o.phase != fleetv1alpha1.ClaimPhaseRejected || o.class != string(claim.ClassContention) || !one:
				refusals = append(refusals, o.phase+" "+o.detail)
			}
		}
		wall += roundWall
		winners += won
		want := n
		if one {
			want = 1
		}
		if won != want {
			b.Errorf("%s: %d winner(s), want %d; other results: %v", name, won, want, refusals)
		} else if len(refusals) > 0 {
			b.Errorf("%s: unexpected results besides contention losses: %v", name, refusals)
		}
		if r%2 == 1 {
			l, w := bareRound(b, cb, n, one)
			bareLat, bareWall = append(bareLat, l...), bareWall+w
		} else {
			l, w := floorRound(b, cb, n, one)
			floorLat, floorWall = append(floorLat, l...), floorWall+w
		}
	}
	f := figuresOf(latencies, wall)
	bf := figuresOf(bareLat, bareWall)
	ff := figuresOf(floorLat, floorWall)
	slices.Sort(validations)
	b.ReportMetric(msf(f.p50), "p50-ms")
	b.ReportMetric(msf(f.p99), "p99-ms")
	b.ReportMetric(f.perSecond, "claims/s")
	b.ReportMetric(float64(winners)/float64(rounds), "winners")
	if len(validations) > 0 {
		b.ReportMetric(msf(percentile(validations, 0.5)), "validated-p50-ms")
	}
	b.ReportMetric(float64(calls.total())/float64(len(latencies)), "gitea-req/claim")
	b.ReportMetric(api.total()/float64(len(latencies)), "api-req/claim")
	b.ReportMetric(msf(bf.p99), "bare-p99-ms")
	b.ReportMetric(bf.perSecond, "bare-ops/s")
	if bf.p99 > 0 {
		b.ReportMetric(float64(f.p99)/float64(bf.p99), "p99/bare")
	}
	b.ReportMetric(msf(ff.p99), "floor-p99-ms")
	b.ReportMetric(ff.perSecond, "floor-ops/s")
	if ff.p99 > 0 {
		b.ReportMetric(float64(f.p99)/float64(ff.p99), "p99/floor")
	}
	recordScenario(scenarioFigures{name: name, n: n, one: one, rounds: rounds, claim: f, bare: bf, floor: ff,
		validatedP50: percentile(validations, 0.5), validatedP99: percentile(validations, 0.99),
		winners: winners, gitea: calls, api: api})
}

// recordScenario keeps the figures of a scenario for the summary. The benchmark framework
// may call a scenario several times with growing b.N; the last (largest) run replaces
// the earlier ones.
func recordScenario(f scenarioFigures) {
	for i := range scenarios {
		if scenarios[i].name == f.name {
			scenarios[i] = f
			return
		}
	}
	scenarios = append(scenarios, f)
}
