package bench

// Many repositories on several Gitea servers (issue 30): what serving claims in
// GiteaRepositories on two servers costs against serving them in one repository, and
// what 100 GiteaRepository objects cost the manager's memory against one.
//
// BenchmarkMultiRepositoryClaims runs rounds of 64 concurrent claims, each worker on an
// issue of its own, in two shapes, against one manager, in the same run:
//
//   - single: the 64 workers claim in one GiteaRepository on server A;
//   - multi: 64 other workers claim spread over three GiteaRepositories, two on server A
//     whose issues carry the same numbers in every round (22 and 21 workers) and one on
//     server B (21 workers).
//
// Both shapes take the same code path: no --gitea-url or --repository, every claim
// resolved among the GiteaRepositories of its namespace (the same four objects in both),
// and its lock keyed by (server, repository ID, kind, number). Single and multi rounds
// alternate, which one goes first switching every pair, so load on the shared machine
// weighs on both. Every claim must win, in the repository its target names: a claim that
// is refused, or decided in another repository than its own, fails the benchmark. It
// reports claims per second and p50/p99 latency for each shape, and multi over single
// (the goal: multi/single-claims/s at least 0.9).
//
// BenchmarkRepositoryManagerMemory measures the heap of a manager serving 10,000
// WorkerRegistrations and 100 GiteaRepositories (half on each server, 100 registrations
// bound to each) against the same manager serving 10,000 WorkerRegistrations and one
// GiteaRepository (all bound to it), in the same run, each in a namespace of its own
// that the manager's cache is limited to (as --namespaces limits it). The manager is
// what the GiteaRepository suite wires (testfleet.Wire: this host's agent and the fleet
// coordinator, the WorkerRegistration and TaskClaim reconcilers; plus the GiteaServer and
// GiteaRepository reconcilers), with the shipped cache options (internal/managercache).
// Not wired: the RetirementPlan reconcilers, the sweep, the gateway and the capability
// endpoint (no plan or claim exists, so their informers would hold nothing in either
// case). Its figure is the live heap after two collections with the manager started, its
// caches synced, every GiteaRepository Ready and its work queues drained, minus the heap
// before it was made (BenchmarkRegistrationCacheMemory's approach); the goal is the
// 100-repository figure at most 1.1x the one-repository figure. A warm-up pass of each
// shape runs first, unmeasured, so the rows' statuses are written before the measured
// passes; then each shape is measured twice per iteration, in the order one, many, many,
// one (a stopped manager's idle connections linger until they time out, and would
// otherwise weigh on the second shape only), and the means are compared. Run it on its
// own (-bench RepositoryManagerMemory): another benchmark's manager running in the
// process adds noise to the heap. FLEET_BENCH_HEAP_PROFILE=<folder> writes a heap profile
// of each measured manager, for `go tool pprof -base`.
//
// What is real and what is not. Both Gitea servers are real, started with hack/gitea.sh,
// and so is every repository named: the claim benchmark's four and the memory
// benchmark's 101 are created in Gitea with main protected, and their GiteaRepositories
// are Ready (resolved to their ID, the rule set published) before anything is measured.
// The claim benchmark's GiteaServers name a counting reverse proxy in front of each
// server, so the controller's Gitea requests can be counted; the proxy is a local hop of
// well under a millisecond. The memory benchmark's name the servers themselves: the
// proxies run in this process, and their connections' buffers would count as the
// manager's heap. Each GiteaServer allows 1000 requests a second (the schema's maximum)
// rather than the default 20: the figure compares the claim path over one repository and
// over three, not a request budget, which at the default would bind single rounds (one
// server) harder than multi ones (two). Gitea's answers are not faked; permissions are:
// the capability verdict always answers allowed (no admission policies or RBAC), as in
// BenchmarkClaimLatency. No gateway credential Secrets exist, so the repositories'
// hardening check has no worker identity to look for. The claim workers are live
// registrations whose process is this test binary, each with a Gitea account that may
// write to its repository; the memory benchmark's registrations are rows of exited
// processes with their status written (createRows), as BenchmarkRegistrationCacheMemory's.
//
// Both need envtest and start their two Gitea servers the first time one of them runs;
// TestMain stops them and the managers. A plain `go test` starts none of it. Run each on
// its own, for example:
//
//	KUBEBUILDER_ASSETS=$PWD/.cache/envtest/v1.37.2 go test ./test/bench/ -run '^$' \
//	    -bench MultiRepositoryClaims -benchtime=1x -count 2 -timeout 30m
//	KUBEBUILDER_ASSETS=$PWD/.cache/envtest/v1.37.2 go test ./test/bench/ -run '^$' \
//	    -bench RepositoryManagerMemory -benchtime=1x -count 2 -timeout 60m
//
// The single shape is not BenchmarkClaimLatency's figure at 64 distinct targets: that
// manager serves the flags' repository, and this one GiteaRepositories only, so the two
// shapes here share every step but the repositories' spread.

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/gitearepository"
	"github.com/giteatools/fleet-controller/controllers/giteaserver"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/managercache"
	"github.com/giteatools/fleet-controller/internal/nudge"
	"github.com/giteatools/fleet-controller/test/support/testfleet"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

const (
	// repoThroughputGoal is the goal for multi-repository claims/s over single-repository
	// claims/s at 64 workers.
	repoThroughputGoal = 0.9
	// repoMemoryGoal is the goal for the heap with memRepos GiteaRepositories over the heap
	// with one.
	repoMemoryGoal = 1.1
	// repoRoundPairs is how many single and multi rounds each b.N runs (one of each per pair).
	repoRoundPairs = 4
	// multiRepos is how many GiteaRepositories the multi rounds spread over.
	multiRepos = 3
	// memRows and memRepos are the memory benchmark's registrations and repositories.
	memRows  = 10000
	memRepos = 100
	// repoRequestsPerSecond is every bench GiteaServer's request budget (the maximum).
	repoRequestsPerSecond = 1000
	// repoSettle bounds the waits for objects to become Ready and managers to go quiet.
	repoSettle = 5 * time.Minute
)

// forgePair is the two real Gitea servers of the repository benchmarks, started once: the
// GiteaServer objects that name them, through counting proxies (servers, for the claim
// benchmark) and directly (direct, for the memory benchmark: the proxies run in this
// process, and their connections' buffers would count as the manager's heap), and the
// namespaces of the controller's token Secrets and of the gateway's credentials (empty).
type forgePair struct {
	srv     [2]*testgitea.Server
	proxies [2]*httptest.Server
	servers [2]string          // the proxied GiteaServers' names
	direct  [2]string          // the direct GiteaServers' names
	calls   *countingTransport // the controller's requests to either server through the proxies
	suffix  string
	// ctrlNS holds the servers' token Secrets (the controller's namespace); credNS is the
	// gateway's credentials namespace, which holds no Secret here.
	ctrlNS, credNS string
}

var (
	forgeOnce sync.Once
	forges    *forgePair
	forgeErr  error
	// repoClaims and repoMem are the two benchmarks' fixtures, made on first use.
	repoClaims *repoClaimBench
	repoMem    *repoMemBench
	// managers are the bench managers still running, stopped by stopRepoBench.
	managersMu sync.Mutex
	managers   []*benchManager
)

// startForges starts (once) the two Gitea servers and creates their GiteaServers.
func startForges(b *testing.B) *forgePair {
	b.Helper()
	c := startEnv(b)
	forgeOnce.Do(func() { forges, forgeErr = setupForges(c) })
	if forgeErr != nil {
		b.Fatal(forgeErr)
	}
	return forges
}

func setupForges(c client.Client) (*forgePair, error) {
	ctx := context.Background()
	t0 := time.Now()
	fp := &forgePair{calls: &countingTransport{}, suffix: testgitea.RandomHex(3)}
	for i := range fp.srv {
		srv, err := testgitea.Start(ctx)
		fp.srv[i] = srv // stopped by stopRepoBench even when half started
		if err != nil {
			return fp, fmt.Errorf("starting Gitea server %c: %w", 'A'+i, err)
		}
	}
	if fp.srv[0].URL == fp.srv[1].URL {
		return fp, fmt.Errorf("both Gitea servers are %s: unset GITEA_URL so that two are started", fp.srv[0].URL)
	}
	fp.calls.base = fp.srv[0].HTTP.Transport
	var err error
	if fp.ctrlNS, err = env.NewNamespace(ctx, "bench-fleet-system"); err != nil {
		return fp, err
	}
	if fp.credNS, err = env.NewNamespace(ctx, "bench-credentials"); err != nil {
		return fp, err
	}
	for i, srv := range fp.srv {
		target, err := url.Parse(srv.URL)
		if err != nil {
			return fp, err
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.Transport = fp.calls
		fp.proxies[i] = httptest.NewServer(proxy)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gitea-%c-token", 'a'+i), Namespace: fp.ctrlNS},
			Data: map[string][]byte{"token": []byte(srv.Token)}}
		if err := c.Create(ctx, secret); err != nil {
			return fp, err
		}
		fp.servers[i] = fmt.Sprintf("bench-%c-%s", 'a'+i, fp.suffix)
		fp.direct[i] = fmt.Sprintf("bench-%c-direct-%s", 'a'+i, fp.suffix)
		for name, u := range map[string]string{fp.servers[i]: fp.proxies[i].URL, fp.direct[i]: srv.URL} {
			gs := &fleetv1alpha1.GiteaServer{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: fleetv1alpha1.GiteaServerSpec{URL: u, TokenSecretRef: fleetv1alpha1.SecretKeyRef{Name: secret.Name},
					RequestsPerSecond: repoRequestsPerSecond}}
			if err := c.Create(ctx, gs); err != nil {
				return fp, err
			}
		}
	}
	fmt.Fprintf(os.Stderr, "repository bench: two Gitea servers and their GiteaServers ready after %s\n", time.Since(t0).Round(100*time.Millisecond))
	return fp, nil
}

// giteaRepo is a Gitea repository a GiteaRepository names: the server it is on (i into
// forgePair), its full name, and, once resolved, its Gitea ID.
type giteaRepo struct {
	server int
	full   string
	id     int64
}

// createGiteaRepos creates a repository named names[i] on server of[i] for each i, owned
// by the server's administrator (the controller's account) with main protected so that
// only that account may push (it publishes the claim rule set there), as the
// GiteaRepository suite makes them.
func (fp *forgePair) createGiteaRepos(ctx context.Context, names []string, of func(int) int) ([]giteaRepo, error) {
	out := make([]giteaRepo, len(names))
	err := parallel(len(names), giteaSetupWorkers, func(i int) error {
		srv := fp.srv[of(i)]
		full, err := srv.CreateRepo(ctx, srv.Token, names[i])
		if err != nil {
			return err
		}
		out[i] = giteaRepo{server: of(i), full: full}
		return srv.ProtectBranch(ctx, full, "main", srv.AdminLogin)
	})
	return out, err
}

// createObjects creates a GiteaRepository in ns for each repository (named prefix-i), on
// the GiteaServer servers[repo.server].
func createObjects(ctx context.Context, c client.Client, servers [2]string, ns, prefix string, repos []giteaRepo) error {
	return parallel(len(repos), setupWorkers, func(i int) error {
		owner, name, _ := splitFull(repos[i].full)
		return c.Create(ctx, &fleetv1alpha1.GiteaRepository{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: ns},
			Spec:       fleetv1alpha1.GiteaRepositorySpec{Server: servers[repos[i].server], Owner: owner, Name: name},
		})
	})
}

func splitFull(full string) (string, string, bool) {
	for i := range full {
		if full[i] == '/' {
			return full[:i], full[i+1:], true
		}
	}
	return full, "", false
}

// waitReady waits until want GiteaRepositories of ns are Ready for their generation with
// the rule set in force, and fills in repos' IDs (repos[i] is the object prefix-i; nil
// repos only waits).
func waitReady(ctx context.Context, c client.Client, ns, prefix string, want int, repos []giteaRepo) error {
	var ready int
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, repoSettle, true, func(ctx context.Context) (bool, error) {
		list := &fleetv1alpha1.GiteaRepositoryList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		ready = 0
		for i := range list.Items {
			r := &list.Items[i]
			cond := meta.FindStatusCondition(r.Status.Conditions, fleetv1alpha1.ReadyCondition)
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != r.Generation ||
				r.Status.RuleSetDigest != claim.RuleSetDigest() {
				if cond != nil {
					last = r.Name + ": " + cond.Reason + ": " + cond.Message
				}
				continue
			}
			ready++
			var k int
			if _, err := fmt.Sscanf(r.Name, prefix+"-%d", &k); err == nil && k >= 0 && k < len(repos) {
				repos[k].id = r.Status.RepositoryID
			}
		}
		return ready == want, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d GiteaRepositories of %s Ready (last not Ready: %s): %w", ready, want, ns, last, err)
	}
	return nil
}

// benchManager is a running bench manager.
type benchManager struct {
	mgr       manager.Manager
	elections hostagent.Elections
	stop      context.CancelFunc
	stopped   chan error
}

// managerConfig is what startRepoManager wires besides the namespaces it serves.
type managerConfig struct {
	concurrency int
	nudges      *nudge.Hub
}

// startRepoManager starts a manager whose cache is limited to ns and a fresh agent
// namespace, wired as the GiteaRepository suite wires its own (testfleet.Wire, then the
// GiteaServer and GiteaRepository reconcilers) with cmd/'s settings: the shipped cache
// options, the claim TTL, the active re-check interval, and the GiteaServer and
// GiteaRepository check intervals (their defaults), except that an object not Ready is
// checked again after a second rather than 30 (the manager's first checks may come before
// its coordinator election is won). Claims are served in GiteaRepositories only, and the
// capability verdict always answers allowed. It returns once the manager holds its host's
// and the coordinator's Leases.
func startRepoManager(ctx context.Context, fp *forgePair, ns string, cfg managerConfig) (*benchManager, error) {
	agentNS, err := env.NewNamespace(ctx, "bench-repo-agents")
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(env.Config, benchManagerOptions(env.Scheme, managercache.Options(nil), ns, agentNS))
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	dialer := &giteaserver.Dialer{Reader: mgr.GetAPIReader(), Namespace: fp.ctrlNS}
	resolver := &gitearepository.Resolver{Reader: mgr.GetClient(), Dialer: dialer}
	elections, err := testfleet.Wire(mgr, testfleet.Wiring{
		Host: facts, AgentNamespace: agentNS, Repositories: resolver,
		ClaimTTL: claimTTL, ActiveRecheck: claim.DefaultActiveRecheck, Nudges: cfg.nudges,
		Verdicts: allowedVerdict{}, Concurrency: cfg.concurrency,
	})
	if err != nil {
		return nil, err
	}
	if err := (&giteaserver.Reconciler{
		Client: mgr.GetClient(), Dialer: dialer, Recorder: mgr.GetEventRecorder("giteaserver-controller"),
		Coordinator: elections.Coordinator, Retry: time.Second,
	}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&gitearepository.Reconciler{
		Client: mgr.GetClient(), Dialer: dialer, Recorder: mgr.GetEventRecorder("gitearepository-controller"),
		Coordinator: elections.Coordinator, CredentialsNamespace: fp.credNS, Retry: time.Second,
	}).SetupWithManager(ctx, mgr); err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	bm := &benchManager{mgr: mgr, elections: elections, stop: cancel, stopped: make(chan error, 1)}
	go func() { bm.stopped <- mgr.Start(mctx) }()
	managersMu.Lock()
	managers = append(managers, bm)
	managersMu.Unlock()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return elections.Held(), nil
	}); err != nil {
		return bm, fmt.Errorf("the bench manager never held its host's and the coordinator's Leases: %w", err)
	}
	return bm, nil
}

// shutdown stops the manager and waits until it stopped.
func (bm *benchManager) shutdown() error {
	managersMu.Lock()
	managers = slices.DeleteFunc(managers, func(m *benchManager) bool { return m == bm })
	managersMu.Unlock()
	bm.stop()
	select {
	case err := <-bm.stopped:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the bench manager did not stop within 30s")
	}
}

// stopRepoBench stops what the repository benchmarks started: their managers, the
// proxies and the Gitea servers; failed keeps the servers' run directories. TestMain
// calls it before stopping envtest.
func stopRepoBench(failed bool) {
	managersMu.Lock()
	running := slices.Clone(managers)
	managersMu.Unlock()
	for _, bm := range running {
		if err := bm.shutdown(); err != nil {
			fmt.Fprintf(os.Stderr, "repository bench: manager: %v\n", err)
		}
	}
	if forges == nil {
		return
	}
	for _, p := range forges.proxies {
		if p != nil {
			p.Close()
		}
	}
	for i, srv := range forges.srv {
		testfleet.StopGitea(srv, failed, fmt.Sprintf("repository bench (Gitea %c)", 'A'+i))
	}
}

// repoClaimBench is BenchmarkMultiRepositoryClaims's fixture: in one namespace, the
// single-repository run's GiteaRepository on server A and the multi run's three (two on
// A, one on B), a manager serving them, and 64 live workers for each run.
type repoClaimBench struct {
	site   claimSite
	forges *forgePair
	// single is the single run's repository; multi are the multi run's (A, A, B).
	single giteaRepo
	multi  [multiRepos]giteaRepo
	// singleWorkers claim in single; multiWorkers[i] claims in multi[i%multiRepos].
	singleWorkers, multiWorkers []string
	reconcilers                 string
}

// startRepoClaimBench makes the fixture once and warms it up with one claim in each
// repository, so once-per-process work stays out of the figures.
func startRepoClaimBench(b *testing.B) *repoClaimBench {
	b.Helper()
	fp := startForges(b)
	if repoClaims != nil {
		return repoClaims
	}
	ctx := context.Background()
	t0 := time.Now()
	rb := &repoClaimBench{forges: fp}
	rb.site.c, rb.site.calls = k8s, fp.calls
	var err error
	if rb.site.ns, err = env.NewNamespace(ctx, "bench-repos"); err != nil {
		b.Fatal(err)
	}
	sfx := fp.suffix
	repos, err := fp.createGiteaRepos(ctx,
		[]string{"single-" + sfx, "multi-a1-" + sfx, "multi-a2-" + sfx, "multi-b-" + sfx},
		func(i int) int {
			if i == 3 {
				return 1 // multi-b, on server B
			}
			return 0
		})
	if err != nil {
		b.Fatal(err)
	}
	if err := createObjects(ctx, k8s, fp.servers, rb.site.ns, "repo", repos); err != nil {
		b.Fatal(err)
	}
	concurrency, reconcilers, err := claimConcurrency()
	if err != nil {
		b.Fatal(err)
	}
	rb.reconcilers = reconcilers
	if _, err := startRepoManager(ctx, fp, rb.site.ns, managerConfig{concurrency: concurrency, nudges: &nudge.Hub{}}); err != nil {
		b.Fatal(err)
	}
	if err := waitReady(ctx, k8s, rb.site.ns, "repo", len(repos), repos); err != nil {
		b.Fatal(err)
	}
	rb.single = repos[0]
	copy(rb.multi[:], repos[1:])

	// The workers: a Gitea account each on the server of its repository, with write
	// access to it, and a live registration bound to it.
	var workers []benchWorker
	repoOf := map[string]giteaRepo{}
	for i := range claimPool {
		w := benchWorker{name: fmt.Sprintf("single-w%02d", i), repo: rb.single.full}
		w.identity = w.name + "-" + sfx
		repoOf[w.name] = rb.single
		rb.singleWorkers = append(rb.singleWorkers, w.name)
		workers = append(workers, w)
	}
	for i := range claimPool {
		r := rb.multi[i%multiRepos]
		w := benchWorker{name: fmt.Sprintf("multi-w%02d", i), repo: r.full}
		w.identity = w.name + "-" + sfx
		repoOf[w.name] = r
		rb.multiWorkers = append(rb.multiWorkers, w.name)
		workers = append(workers, w)
	}
	err = parallel(len(workers), giteaSetupWorkers, func(i int) error {
		r := repoOf[workers[i].name]
		srv := fp.srv[r.server]
		if _, err := srv.CreateUser(ctx, workers[i].identity); err != nil {
			return err
		}
		return srv.AddCollaborator(ctx, r.full, workers[i].identity)
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := registerLiveWorkers(ctx, k8s, rb.site.ns, workers); err != nil {
		b.Fatal(err)
	}
	repoClaims = rb

	// Warm-up: one claim in each repository.
	warm := []string{rb.singleWorkers[0]}
	targets := []fleetv1alpha1.TaskTarget{testfleet.IssueTarget(rb.single.full, rb.openIssues(b, rb.single, 1)[0])}
	for i := range multiRepos {
		warm = append(warm, rb.multiWorkers[i])
		targets = append(targets, testfleet.IssueTarget(rb.multi[i].full, rb.openIssues(b, rb.multi[i], 1)[0]))
	}
	out, _, _, _ := runRound(b, &rb.site, warm, targets)
	rb.check(b, "warm-up", out, warm, targets)
	fmt.Fprintf(os.Stderr, "repository bench: 4 GiteaRepositories on 2 servers, a manager and %d live workers ready after %s\n",
		len(workers), time.Since(t0).Round(100*time.Millisecond))
	return rb
}

func (rb *repoClaimBench) openIssues(b *testing.B, r giteaRepo, n int) []int64 {
	b.Helper()
	srv := rb.forges.srv[r.server]
	issues := openIssues(b, srv, srv.Token, r.full, n)
	slices.Sort(issues)
	return issues
}

// repoOf is the repository a target names.
func (rb *repoClaimBench) repoOf(t fleetv1alpha1.TaskTarget) giteaRepo {
	for _, r := range append([]giteaRepo{rb.single}, rb.multi[:]...) {
		if r.full == t.Repository {
			return r
		}
	}
	return giteaRepo{}
}

// check fails the benchmark unless every claim of a round is Active, decided in the
// repository its target names: on that repository's server, under its Gitea ID.
func (rb *repoClaimBench) check(b *testing.B, round string, out []claimOutcome, workers []string, targets []fleetv1alpha1.TaskTarget) {
	b.Helper()
	var bad []string
	for i, o := range out {
		want := rb.repoOf(targets[i])
		switch {
		case o.phase != fleetv1alpha1.ClaimPhaseActive:
			bad = append(bad, fmt.Sprintf("%s on %s#%d: %s %s", workers[i], targets[i].Repository, targets[i].Number, o.phase, o.detail))
		case o.repository == nil || o.repository.Server != rb.forges.servers[want.server] || o.repository.ID != want.id:
			bad = append(bad, fmt.Sprintf("%s on %s#%d: decided in %+v, want server %s ID %d", workers[i], targets[i].Repository,
				targets[i].Number, o.repository, rb.forges.servers[want.server], want.id))
		}
	}
	if len(bad) > 0 {
		b.Fatalf("%s round: %d of %d claims did not win in their own repository: %v", round, len(bad), len(out), bad)
	}
}

// round runs one round of claimPool concurrent claims, each on a fresh issue of its own:
// in the single repository, or spread over the multi repositories, where the two on
// server A get issues of the same numbers. It fails unless every claim won in its own
// repository.
func (rb *repoClaimBench) round(b *testing.B, multi bool) ([]claimOutcome, time.Duration, giteaCalls) {
	b.Helper()
	targets := make([]fleetv1alpha1.TaskTarget, claimPool)
	workers := rb.singleWorkers
	if !multi {
		for i, n := range rb.openIssues(b, rb.single, claimPool) {
			targets[i] = testfleet.IssueTarget(rb.single.full, n)
		}
	} else {
		workers = rb.multiWorkers
		perRepo := (claimPool + multiRepos - 1) / multiRepos
		var issues [multiRepos][]int64
		for k := range multiRepos {
			issues[k] = rb.openIssues(b, rb.multi[k], perRepo) // as many in each, so A's two stay in step
		}
		if !slices.Equal(issues[0], issues[1]) {
			b.Fatalf("the two repositories on server A got issues %v and %v, want the same numbers", issues[0], issues[1])
		}
		for i := range claimPool {
			k := i % multiRepos
			targets[i] = testfleet.IssueTarget(rb.multi[k].full, issues[k][i/multiRepos])
		}
	}
	out, wall, calls, _ := runRound(b, &rb.site, workers, targets)
	rb.check(b, map[bool]string{true: "multi", false: "single"}[multi], out, workers, targets)
	return out, wall, calls
}

// BenchmarkMultiRepositoryClaims measures 64 concurrent claims spread over three
// GiteaRepositories on two Gitea servers against 64 concurrent claims in one
// GiteaRepository, rounds of each alternating (see the file comment). Issues and
// registrations are made with the timer stopped; ns/op is the wall time of the rounds,
// both shapes together.
func BenchmarkMultiRepositoryClaims(b *testing.B) {
	b.StopTimer()
	rb := startRepoClaimBench(b)
	var (
		lat        [2][]time.Duration // [0] single, [1] multi
		wall       [2]time.Duration
		calls      [2]giteaCalls
		rounds     int
		multiFirst bool
		// pairs are each pair's claims/s, single and multi, for the spread.
		pairs [][2]float64
	)
	for range b.N * repoRoundPairs {
		var pair [2]float64
		for _, multi := range []bool{multiFirst, !multiFirst} {
			k := 0
			if multi {
				k = 1
			}
			out, w, c := rb.round(b, multi)
			for _, o := range out {
				lat[k] = append(lat[k], o.latency)
			}
			wall[k] += w
			calls[k] = calls[k].plus(c)
			pair[k] = float64(len(out)) / w.Seconds()
		}
		pairs = append(pairs, pair)
		rounds++
		multiFirst = !multiFirst
	}
	single, multi := figuresOf(lat[0], wall[0]), figuresOf(lat[1], wall[1])
	b.ReportMetric(single.perSecond, "single-claims/s")
	b.ReportMetric(msf(single.p50), "single-p50-ms")
	b.ReportMetric(msf(single.p99), "single-p99-ms")
	b.ReportMetric(multi.perSecond, "multi-claims/s")
	b.ReportMetric(msf(multi.p50), "multi-p50-ms")
	b.ReportMetric(msf(multi.p99), "multi-p99-ms")
	b.ReportMetric(float64(calls[0].total())/float64(len(lat[0])), "single-gitea-req/claim")
	b.ReportMetric(float64(calls[1].total())/float64(len(lat[1])), "multi-gitea-req/claim")
	ratio := multi.perSecond / single.perSecond
	b.ReportMetric(ratio, "multi/single-claims/s")
	b.ReportMetric(float64(multi.p99)/float64(single.p99), "multi/single-p99")
	verdict := "meets"
	if ratio < repoThroughputGoal {
		verdict = "BELOW"
	}
	fmt.Printf("repository bench: TaskClaim reconciler concurrency: %s\n", rb.reconcilers)
	for _, s := range []struct {
		name string
		f    figures
		c    giteaCalls
	}{{"single (1 repository, server A)", single, calls[0]}, {"multi (3 repositories, servers A+A+B)", multi, calls[1]}} {
		fmt.Printf("repository bench: %-38s %3d claims in %d round(s): p50 %9s, p99 %9s, %6.1f claims/s; %s\n",
			s.name, s.f.samples, rounds, ms(s.f.p50), ms(s.f.p99), s.f.perSecond, s.c.describe(s.f.samples))
	}
	fmt.Printf("repository bench: multi/single claims/s %.3fx (%s the %.1fx goal), multi/single p99 %.2fx\n",
		ratio, verdict, repoThroughputGoal, float64(multi.p99)/float64(single.p99))
	var each []string
	for _, p := range pairs {
		each = append(each, fmt.Sprintf("%.1f/%.1f=%.2fx", p[1], p[0], p[1]/p[0]))
	}
	fmt.Printf("repository bench: each pair, multi/single claims/s: %s\n", strings.Join(each, ", "))
}

// repoMemBench is BenchmarkRepositoryManagerMemory's fixture: two namespaces, one with a
// GiteaRepository and memRows registrations bound to it, the other with memRepos
// GiteaRepositories (alternately on servers A and B) and memRows registrations, as many
// bound to each.
type repoMemBench struct {
	forges    *forgePair
	one, many string
}

// startRepoMemBench makes the fixture once, and runs a manager over each namespace once,
// unmeasured, so that what the reconcilers write the first time (the rows' statuses, the
// repositories' resolution and rule set) is written before anything is measured.
func startRepoMemBench(b *testing.B) *repoMemBench {
	b.Helper()
	fp := startForges(b)
	if repoMem != nil {
		return repoMem
	}
	ctx := context.Background()
	t0 := time.Now()
	mb := &repoMemBench{forges: fp, one: newNamespace(ctx, b, "bench-mem-one"), many: newNamespace(ctx, b, "bench-mem-many")}
	names := []string{"mem-one-" + fp.suffix}
	for i := range memRepos {
		names = append(names, fmt.Sprintf("mem-%03d-%s", i, fp.suffix))
	}
	repos, err := fp.createGiteaRepos(ctx, names, func(i int) int { return max(0, i-1) % 2 })
	if err != nil {
		b.Fatal(err)
	}
	one, many := repos[:1], repos[1:]
	if err := createObjects(ctx, k8s, fp.direct, mb.one, "repo", one); err != nil {
		b.Fatal(err)
	}
	if err := createObjects(ctx, k8s, fp.direct, mb.many, "repo", many); err != nil {
		b.Fatal(err)
	}
	dead := []deadProcess{{pid: 4_000_000, startTime: 1}}
	createRows(ctx, b, k8s, mb.one, memRows, dead, func(int) string { return one[0].full })
	createRows(ctx, b, k8s, mb.many, memRows, dead, func(i int) string { return many[i%memRepos].full })
	fmt.Fprintf(os.Stderr, "repository bench: %d Gitea repositories and 2x%d registrations made after %s\n",
		len(repos), memRows, time.Since(t0).Round(100*time.Millisecond))
	for _, s := range []struct {
		ns    string
		repos int
	}{{mb.one, 1}, {mb.many, memRepos}} {
		heap, settled := mb.measure(b, s.ns, s.repos)
		fmt.Fprintf(os.Stderr, "repository bench: warm-up over %d GiteaRepositories: %.1f MiB, settled in %s\n",
			s.repos, float64(heap)/(1<<20), settled.Round(100*time.Millisecond))
	}
	repoMem = mb
	return mb
}

// measure starts a manager over ns, waits until it settled (caches synced, repos
// GiteaRepositories Ready, every registration's repository binding recorded, work queues
// drained), and returns the heap it holds then (after two collections, less the heap
// before it was made) and how long settling took. It stops the manager before returning.
func (mb *repoMemBench) measure(b *testing.B, ns string, repos int) (int64, time.Duration) {
	b.Helper()
	ctx := context.Background()
	before := heapAfterGC()
	t0 := time.Now()
	concurrency, _, err := claimConcurrency()
	if err != nil {
		b.Fatal(err)
	}
	bm, err := startRepoManager(ctx, mb.forges, ns, managerConfig{concurrency: concurrency, nudges: &nudge.Hub{}})
	if err != nil {
		if bm != nil {
			_ = bm.shutdown()
		}
		b.Fatal(err)
	}
	defer func() {
		if err := bm.shutdown(); err != nil {
			b.Error(err)
		}
	}()
	if !bm.mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("the manager's cache never synced")
	}
	if err := waitReady(ctx, k8s, ns, "repo", repos, nil); err != nil {
		b.Fatal(err)
	}
	if err := waitBound(ctx, bm.mgr.GetClient(), ns); err != nil {
		b.Fatal(err)
	}
	if err := waitQuiet(ctx); err != nil {
		b.Fatal(err)
	}
	settled := time.Since(t0)
	heap := int64(heapAfterGC()) - int64(before)
	if dir := os.Getenv(heapProfileEnv); dir != "" {
		profileSeq++
		if err := writeHeapProfile(filepath.Join(dir, fmt.Sprintf("heap-%03d-repos-%d.pb.gz", repos, profileSeq))); err != nil {
			b.Error(err)
		}
	}
	runtime.KeepAlive(bm)
	return heap, settled
}

// heapProfileEnv names a folder where the memory benchmark writes a heap profile of each
// manager it measured, taken right after the heap was read (compare two with
// `go tool pprof -base`).
const heapProfileEnv = "FLEET_BENCH_HEAP_PROFILE"

var profileSeq int

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// waitBound waits until the manager's cache shows every registration of ns with its
// repository binding recorded (RepositoryBound True) for its generation.
func waitBound(ctx context.Context, c client.Client, ns string) error {
	var bound, total int
	err := wait.PollUntilContextTimeout(ctx, time.Second, repoSettle, true, func(ctx context.Context) (bool, error) {
		list := &fleetv1alpha1.WorkerRegistrationList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		bound, total = 0, len(list.Items)
		for i := range list.Items {
			cond := meta.FindStatusCondition(list.Items[i].Status.Conditions, fleetv1alpha1.RepositoryBoundCondition)
			if cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == list.Items[i].Generation {
				bound++
			}
		}
		return total == memRows && bound == total, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d registrations of %s bound: %w", bound, total, ns, err)
	}
	return nil
}

// waitQuiet waits until every controller work queue of the process is empty and none
// was added to for two seconds.
func waitQuiet(ctx context.Context) error {
	read := func() (depth, adds float64, err error) {
		families, err := crmetrics.Registry.Gather()
		if err != nil {
			return 0, 0, err
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				switch f.GetName() {
				case "workqueue_depth":
					depth += m.GetGauge().GetValue()
				case "workqueue_adds_total":
					adds += m.GetCounter().GetValue()
				}
			}
		}
		return depth, adds, nil
	}
	lastAdds, since := -1.0, time.Now()
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, repoSettle, true, func(context.Context) (bool, error) {
		depth, adds, err := read()
		if err != nil {
			return false, err
		}
		if depth > 0 || adds != lastAdds {
			lastAdds, since = adds, time.Now()
			return false, nil
		}
		return time.Since(since) >= 2*time.Second, nil
	})
}

// BenchmarkRepositoryManagerMemory measures the heap of the manager with memRepos
// GiteaRepositories and memRows registrations against one GiteaRepository and memRows
// registrations (see the file comment), in that order per iteration, and reports both
// and their ratio.
func BenchmarkRepositoryManagerMemory(b *testing.B) {
	if os.Getenv(heapProfileEnv) != "" {
		runtime.MemProfileRate = 4096 // the managers' objects are sampled finely enough to compare
	}
	mb := startRepoMemBench(b)
	// [0] with one repository, [1] with memRepos; each measured twice per iteration, in
	// the order one, many, many, one, so that what a stopped manager leaves behind for a
	// while (idle connections until they time out) weighs on both alike.
	var heap [2][]int64
	var settled [2]time.Duration
	for b.Loop() {
		heap = [2][]int64{}
		for _, k := range []int{0, 1, 1, 0} {
			h, s := mb.measure(b, []string{mb.one, mb.many}[k], []int{1, memRepos}[k])
			heap[k] = append(heap[k], h)
			settled[k] = max(settled[k], s)
		}
	}
	mean := func(hs []int64) float64 {
		sum := 0.0
		for _, h := range hs {
			sum += float64(h)
		}
		return sum / float64(len(hs))
	}
	mib := func(v float64) float64 { return v / (1 << 20) }
	one, many := mean(heap[0]), mean(heap[1])
	ratio := many / one
	b.ReportMetric(mib(one), "one-repo-MiB")
	b.ReportMetric(mib(many), "many-repo-MiB")
	b.ReportMetric(ratio, "many/one-heap")
	b.ReportMetric(settled[0].Seconds(), "one-settle-s")
	b.ReportMetric(settled[1].Seconds(), "many-settle-s")
	verdict := "within"
	if ratio > repoMemoryGoal {
		verdict = "ABOVE"
	}
	fmt.Printf("repository bench: manager heap with %d registrations: %.2f MiB with 1 GiteaRepository (%.2f and %.2f), %.2f MiB with %d (%.2f and %.2f): ratio %.3f, %s the %.1fx goal; settled within %s and %s\n",
		memRows, mib(one), mib(float64(heap[0][0])), mib(float64(heap[0][1])), mib(many), memRepos,
		mib(float64(heap[1][0])), mib(float64(heap[1][1])), ratio, verdict, repoMemoryGoal,
		settled[0].Round(100*time.Millisecond), settled[1].Round(100*time.Millisecond))
}
