package bench

// Gateway overhead: the latency of a comment (POST .../issues/N/comments) and of a read
// (GET .../issues/N) through the gateway, set against the same request sent straight to
// Gitea with the same Gitea token, in the same run, interleaved so both see the same
// load. The gateway authenticates the worker (TokenReview, cached), looks up its
// registration, and for the comment re-reads the worker's claims from the API server and
// decides with claim.AuthorizeWrite before forwarding. Goal: p99 ratio ≤ 1.3.
//
//	KUBEBUILDER_ASSETS=$PWD/.cache/envtest/v1.37.2 go test ./test/bench/ -run '^$' \
//	    -bench GatewayOverhead -benchtime=1x
//
// It shares envtest, Gitea and the manager with the claim benchmarks (startClaimBench).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

const (
	// gatewayGoal is the target p99 ratio, gateway over direct Gitea.
	gatewayGoal = 1.3
	// gatewaySamples is how many requests of each kind and path one op measures.
	gatewaySamples = 200
)

// BenchmarkGatewayOverhead measures comment and read latency through the gateway and
// directly, and reports the p99 ratios.
func BenchmarkGatewayOverhead(b *testing.B) {
	cb := startClaimBench(b)
	ctx := context.Background()
	fx := setupGatewayBench(ctx, b, cb)
	hs := httptest.NewServer(fx.handler)
	defer hs.Close()
	hc := testgitea.NewHTTPClient()

	send := func(base, method, auth string, body []byte) time.Duration {
		path := fmt.Sprintf("/api/v1/repos/%s/issues/%d", cb.repo, fx.issue)
		if method == http.MethodPost {
			path += "/comments"
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		_ = resp.Body.Close()
		want := http.StatusOK
		if method == http.MethodPost {
			want = http.StatusCreated
		}
		if resp.StatusCode != want {
			b.Fatalf("%s %s via %s: %s", method, path, base, resp.Status)
		}
		return d
	}
	body, _ := json.Marshal(map[string]string{"body": "benchmark note"})
	// Warm both paths (connections, the TokenReview and credentials caches).
	for range 5 {
		send(hs.URL, http.MethodGet, "Bearer "+fx.saToken, nil)
		send(cb.srv.URL, http.MethodGet, "token "+fx.giteaToken, nil)
	}
	var figs map[string][]time.Duration
	b.ResetTimer()
	for range b.N {
		figs = map[string][]time.Duration{}
		for range gatewaySamples {
			figs["get/gitea"] = append(figs["get/gitea"], send(cb.srv.URL, http.MethodGet, "token "+fx.giteaToken, nil))
			figs["get/gateway"] = append(figs["get/gateway"], send(hs.URL, http.MethodGet, "Bearer "+fx.saToken, nil))
			figs["comment/gitea"] = append(figs["comment/gitea"], send(cb.srv.URL, http.MethodPost, "token "+fx.giteaToken, body))
			figs["comment/gateway"] = append(figs["comment/gateway"], send(hs.URL, http.MethodPost, "Bearer "+fx.saToken, body))
		}
	}
	b.StopTimer()
	for _, k := range []string{"get", "comment"} {
		direct, via := figs[k+"/gitea"], figs[k+"/gateway"]
		slices.Sort(direct)
		slices.Sort(via)
		ratio := float64(percentile(via, 0.99)) / float64(percentile(direct, 0.99))
		verdict := "within"
		if ratio > gatewayGoal {
			verdict = "ABOVE"
		}
		p50 := float64(percentile(via, 0.5)) / float64(percentile(direct, 0.5))
		fmt.Printf("gateway bench: %-7s n=%d  direct p50 %s p99 %s | gateway p50 %s p99 %s | p99 ratio %.2fx (%s the %.1fx goal), p50 ratio %.2fx\n",
			k, len(via), ms(percentile(direct, 0.5)), ms(percentile(direct, 0.99)),
			ms(percentile(via, 0.5)), ms(percentile(via, 0.99)), ratio, verdict, gatewayGoal, p50)
		b.ReportMetric(ratio, k+"-p99-ratio")
	}
}

type gatewayBench struct {
	handler    http.Handler
	issue      int64
	saToken    string // the worker's gateway token
	giteaToken string // the identity's Gitea token (what the gateway acts with)
}

// setupGatewayBench creates a gateway worker, an Active author claim of it on a fresh
// issue, and an in-process gateway.
func setupGatewayBench(ctx context.Context, b *testing.B, cb *claimBench) gatewayBench {
	b.Helper()
	creds, err := env.NewNamespace(ctx, "bench-creds")
	if err != nil {
		b.Fatal(err)
	}
	w := newGatewayWorker(ctx, b, cb, creds)
	issue := createIssues(b, cb, 1)[0]
	activate(ctx, b, cb, w.name, fleetv1alpha1.TaskTarget{Repository: cb.repo, Kind: fleetv1alpha1.TargetKindIssue, Number: issue})
	h := newBenchGateway(ctx, b, cb, creds,
		// Every sample comments on one issue under one capability: a budget that holds
		// them all (the budget's compare-and-swap is still paid on every comment).
		claim.CommentBudget{Comments: 1 << 20, Bytes: 1 << 30})
	return gatewayBench{handler: h, issue: issue, saToken: w.saToken, giteaToken: w.giteaToken}
}

// gatewayWorker is a worker that writes through the gateway: a Gitea account (a write
// collaborator) whose gateway token sits in a credentials Secret, and a ServiceAccount
// and live registration of the same name.
type gatewayWorker struct {
	name         string
	registration *fleetv1alpha1.WorkerRegistration
	saToken      string // the worker's gateway token (TokenRequest, gateway.Audience)
	giteaToken   string // the identity's Gitea token (what the gateway acts with)
}

// newGatewayWorker creates a gateway worker whose credentials Secret is in creds, and
// waits until its registration is live.
func newGatewayWorker(ctx context.Context, b *testing.B, cb *claimBench, creds string) gatewayWorker {
	b.Helper()
	c := cb.c
	name := testenv.Uniq("gwbench") + "-" + testgitea.RandomHex(2)
	if _, err := cb.srv.CreateUser(ctx, name); err != nil {
		b.Fatal(err)
	}
	if err := cb.srv.AddCollaborator(ctx, cb.repo, name); err != nil {
		b.Fatal(err)
	}
	tok, err := cb.srv.CreateToken(ctx, name, "fleet-gateway", testgitea.GatewayScopes)
	if err != nil {
		b.Fatal(err)
	}
	mustCreate := func(o client.Object) {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	mustCreate(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitea-" + name, Namespace: creds,
		Labels: map[string]string{gateway.LoginLabel: name}}, Data: map[string][]byte{gateway.TokenKey: []byte(tok)}})
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cb.ns}}
	mustCreate(sa)
	start, err := liveness.ProcessStartTime("", int64(os.Getpid()))
	if err != nil {
		b.Fatal(err)
	}
	wr := &fleetv1alpha1.WorkerRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cb.ns},
		Spec: fleetv1alpha1.WorkerRegistrationSpec{ClientInstanceID: "inst-" + name, WorkerNamespace: "slot-" + name,
			Identity: name, Remote: "origin", Repository: cb.repo, HeartbeatTTLSeconds: 3600,
			Process: fleetv1alpha1.ProcessIdentity{HostID: facts.HostID, BootID: facts.BootID, PID: int64(os.Getpid()), StartTime: ptr.To(start)}},
	}
	mustCreate(wr)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &fleetv1alpha1.WorkerRegistration{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(wr), cur); err != nil {
			return err
		}
		cur.Status.LastHeartbeatAt = ptr.To(metav1.NewTime(time.Now().Truncate(time.Second)))
		return c.Status().Update(ctx, cur)
	}); err != nil {
		b.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{gateway.Audience}, ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for live := (&fleetv1alpha1.WorkerRegistration{}); live.Status.OwnershipState != fleetv1alpha1.OwnershipLive; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("worker %s never showed live (ownership %q)", name, live.Status.OwnershipState)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(wr), live); err != nil {
			b.Fatal(err)
		}
	}
	return gatewayWorker{name: name, registration: wr, saToken: tr.Status.Token, giteaToken: tok}
}

// activate creates worker's claim on target, pins it, and returns it Active; anything
// else fails the benchmark.
func activate(ctx context.Context, b *testing.B, cb *claimBench, worker string, target fleetv1alpha1.TaskTarget) *fleetv1alpha1.TaskClaim {
	b.Helper()
	tc := &fleetv1alpha1.TaskClaim{ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("gwbench"), Namespace: cb.ns},
		Spec: fleetv1alpha1.TaskClaimSpec{Worker: worker, Target: target}}
	if err := cb.c.Create(ctx, tc); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for cur := (&fleetv1alpha1.TaskClaim{}); ; time.Sleep(20 * time.Millisecond) {
		if err := cb.c.Get(ctx, client.ObjectKeyFromObject(tc), cur); err != nil {
			b.Fatal(err)
		}
		switch {
		case cur.Status.Phase == fleetv1alpha1.ClaimPhaseActive:
			return cur
		case claim.FinalPhase(cur.Status.Phase) || time.Now().After(deadline):
			b.Fatalf("claim %s on %s#%d is %q, want Active (%+v)", tc.Name, target.Kind, target.Number, cur.Status.Phase, cur.Status.Result)
		case cur.Spec.Pin == "" && cur.Status.Validation != nil && cur.Status.Validation.Pin != "":
			patch := client.MergeFrom(cur.DeepCopy())
			cur.Spec.Pin = cur.Status.Validation.Pin
			if err := cb.c.Patch(ctx, cur, patch); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// newBenchGateway builds an in-process gateway as cmd/ does: the manager's informers as
// its cache (reads and the comment budget's speculative reservation consult it), the
// identities' tokens from creds, and the claim reconciler's nudges.
func newBenchGateway(ctx context.Context, b *testing.B, cb *claimBench, creds string, budget claim.CommentBudget) http.Handler {
	b.Helper()
	c := cb.c
	informers, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	for _, obj := range []client.Object{&fleetv1alpha1.TaskClaim{}, &fleetv1alpha1.WorkerRegistration{}} {
		if _, err := informers.GetInformer(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	if !informers.WaitForCacheSync(ctx) {
		b.Fatal("the gateway's cache never synced")
	}
	g := &gateway.Gateway{GiteaURL: cb.srv.URL, Repository: cb.repo, Reader: c, Cache: informers, Authn: gateway.NewAuthenticator(c),
		Credentials: gateway.NewCredentials(c, creds, cb.gc), Gitea: cb.gc, Recorder: testenv.Discard, Client: c, Clock: clock.RealClock{},
		Rate: 1e6, Burst: 1e6, CommentBudget: budget, Nudges: cb.nudges}
	h, err := g.Handler()
	if err != nil {
		b.Fatal(err)
	}
	return h
}
