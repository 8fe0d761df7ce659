// Package gateway is where a task capability is enforced. Workers hold no Gitea write
// credential; they send every Gitea request to the gateway instead, which speaks Gitea's
// REST API and git smart HTTP. The gateway authenticates the worker by its ServiceAccount
// token (TokenReview, Audience), routes it to the Gitea server of the repository its
// registration is bound to (a GiteaRepository of its namespace, or the flags'
// repository: upstream.go), passes reads of that repository for any registered worker,
// and forwards a mutation only when the caller's Active TaskClaim decided there,
// read straight from the API server at that moment, permits that operation on that target
// and head (claim.AuthorizeWrite). It forwards as the worker's own Gitea identity, with a
// per-identity token only the manager can read, so Gitea records the worker as the author.
// Everything else is refused with 403 and a typed reason that names no other task.
package gateway

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"golang.org/x/time/rate"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/internal/httpserve"
	"github.com/giteatools/fleet-controller/internal/nudge"
)

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims;workerregistrations,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Limits applied when the Gateway's fields are zero.
const (
	// DefaultMaxBody bounds a REST request body.
	DefaultMaxBody = 1 << 20
	// DefaultMaxPush bounds a git push.
	DefaultMaxPush = 256 << 20
	// DefaultRate and DefaultBurst limit each worker's requests.
	DefaultRate  = rate.Limit(20)
	DefaultBurst = 40
	// DefaultCommentBudgetCount and DefaultCommentBudgetBytes bound the comments one
	// capability writes.
	DefaultCommentBudgetCount = 100
	DefaultCommentBudgetBytes = 1 << 20
)

// Gateway serves the gateway. Fill the fields, then use Handler or add it to a manager
// (it is a Runnable).
type Gateway struct {
	// Addr is the listen address (Start).
	Addr string
	// Limits bound each connection and request (httpserve defaults when zero); a push
	// gets its own read deadline (mutate.go).
	Limits httpserve.Limits
	// CertDir, when set, makes Start serve HTTPS with the tls.crt and tls.key found there
	// (reloaded when they change, as cert-manager rotates them). Workers send their
	// ServiceAccount tokens to the gateway, so anything but a loopback listener needs it.
	CertDir string
	// GiteaURL and Repository are the flags' server and repository (--gitea-url,
	// --repository): a worker bound to Repository whose namespace has no GiteaRepository
	// naming it is served there. Both empty: only GiteaRepositories are served.
	GiteaURL   string
	Repository string
	// Repositories finds a worker's bound repository among the GiteaRepositories of its
	// namespace and the server it is on (nil: the flags' repository only).
	Repositories Repositories
	// Reader reads TaskClaims and WorkerRegistrations straight from the API server; every
	// mutation is decided on what it returns.
	Reader client.Reader
	// Cache, when set, serves the registration look-up of reads (neutral, so a cached
	// answer is enough) and names the worker's claims a mutation reads back through
	// Reader (readClaims); a mutation is decided on Reader's answers only.
	Cache client.Reader
	// Authn verifies ServiceAccount tokens.
	Authn *Authenticator
	// Credentials finds the identity's gateway token on the server a request goes to.
	Credentials *Credentials
	// Gitea is the controller's client on the flags' server, for the reads a decision
	// needs there (pull request head, independence facts, default branch); each
	// GiteaServer's comes from Repositories.
	Gitea *giteaclaim.Client
	// Recorder records an Event per refused mutation.
	Recorder events.EventRecorder
	// Client writes what the gateway keeps in the API server: the comment budgets
	// (budget.go) and one audit Event per forwarded mutation (audit.go).
	Client client.Client
	// Instance names this replica in its audit Events (default: the host name).
	Instance string
	// Clock is the time source.
	Clock clock.PassiveClock
	// Transport reaches the flags' server (default: a clone of http.DefaultTransport);
	// each GiteaServer's comes from Repositories.
	Transport http.RoundTripper
	// Rate and Burst limit each worker's requests (DefaultRate, DefaultBurst).
	Rate  rate.Limit
	Burst int
	// MaxBody and MaxPush bound request bodies (DefaultMaxBody, DefaultMaxPush); MaxPush
	// bounds the decompressed pack too.
	MaxBody, MaxPush int64
	// Nudges, when set, reaches the TaskClaim controller of this process (package nudge):
	// after forwarding the write that completes a claim's role (claim.CompletingOperation)
	// and seeing Gitea accept it, the gateway has the claim looked at again and holds
	// Gitea's answer until that look is over, at most CompletionWait
	// (DefaultCompletionWait when zero). The worker then reads the answer with the claim
	// already ended, and the next role can claim the item at once.
	Nudges         *nudge.Hub
	CompletionWait time.Duration
	// CommentBudget bounds the comments of one capability (DefaultCommentBudgetCount,
	// DefaultCommentBudgetBytes), counted in a Lease per claim (budget.go) that starts from
	// the caller's comments on its target in Gitea since its TaskClaim was created.
	CommentBudget claim.CommentBudget

	once     sync.Once
	initErr  error
	flags    *upstream // nil without GiteaURL
	proxy    *httputil.ReverseProxy
	limiters *Limiters
	guard    *AuthGuard
	budgets  *budgetLedger
	audit    *auditor
	// cached is true when Cache is an informer cache of its own, not Reader.
	cached bool
}

// NeedLeaderElection is false: every replica serves the gateway.
func (g *Gateway) NeedLeaderElection() bool { return false }

// Start serves the gateway on Addr until ctx is done.
func (g *Gateway) Start(ctx context.Context) error {
	h, err := g.Handler()
	if err != nil {
		return err
	}
	ln, err := httpserve.Listen(g.Addr, g.Limits)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	srv := httpserve.Server(h, g.Limits)
	if g.CertDir != "" {
		cw, err := certwatcher.New(filepath.Join(g.CertDir, "tls.crt"), filepath.Join(g.CertDir, "tls.key"))
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("gateway: serving certificate: %w", err)
		}
		go func() {
			if err := cw.Start(ctx); err != nil {
				logf.FromContext(ctx).Error(err, "Gateway certificate watcher stopped; the last certificate stays in use")
			}
		}()
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	err = srv.Serve(ln)
	g.audit.wg.Wait() // the audit Events of the last writes
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler returns the gateway's HTTP handler.
func (g *Gateway) Handler() (http.Handler, error) {
	g.once.Do(g.init)
	if g.initErr != nil {
		return nil, g.initErr
	}
	return http.HandlerFunc(g.serve), nil
}

func (g *Gateway) init() {
	if g.Reader == nil || g.Authn == nil || g.Credentials == nil || g.Recorder == nil || g.Client == nil {
		g.initErr = errors.New("gateway: Reader, Authn, Credentials, Recorder and Client are required")
		return
	}
	if g.GiteaURL == "" && g.Repositories == nil {
		g.initErr = errors.New("gateway: GiteaURL and Repository, or Repositories, are required")
		return
	}
	if g.Transport == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		g.Transport = tr
	}
	if g.GiteaURL != "" {
		u, err := baseURL(g.GiteaURL)
		if err != nil {
			g.initErr = fmt.Errorf("gateway: %w", err)
			return
		}
		if g.Repository == "" || g.Gitea == nil {
			g.initErr = errors.New("gateway: GiteaURL needs Repository and Gitea")
			return
		}
		g.flags = &upstream{repository: g.Repository, base: u, transport: g.Transport, gitea: g.Gitea}
	}
	if g.Clock == nil {
		g.Clock = clock.RealClock{}
	}
	g.cached = g.Cache != nil
	if g.Cache == nil {
		g.Cache = g.Reader
	}
	if g.Rate == 0 {
		g.Rate, g.Burst = DefaultRate, DefaultBurst
	}
	if g.MaxBody == 0 {
		g.MaxBody = DefaultMaxBody
	}
	if g.MaxPush == 0 {
		g.MaxPush = DefaultMaxPush
	}
	if g.CommentBudget == (claim.CommentBudget{}) {
		g.CommentBudget = claim.CommentBudget{Comments: DefaultCommentBudgetCount, Bytes: DefaultCommentBudgetBytes}
	}
	if g.CompletionWait <= 0 {
		g.CompletionWait = DefaultCompletionWait
	}
	if g.Instance == "" {
		g.Instance, _ = os.Hostname()
	}
	g.budgets = &budgetLedger{client: g.Client, reader: g.Reader, seed: g.seedBudget}
	g.audit = &auditor{client: g.Client, instance: g.Instance, clock: g.Clock}
	g.limiters = NewLimiters(g.Rate, g.Burst)
	g.guard = NewAuthGuard(DefaultAuthFailureRate, DefaultAuthFailureBurst)
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		Transport:      upstreamTransport{},
		FlushInterval:  -1, // stream git packs
		ModifyResponse: g.modifyResponse,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			logf.FromContext(r.Context()).Error(err, "Forwarding to Gitea failed")
			writeRefusal(w, http.StatusBadGateway, "", claim.ReasonStateUnavailable, "Gitea could not be reached")
		},
	}
}

// forwardedRequestHeaders are the request headers the gateway passes to Gitea (canonical
// form); it drops every other.
var forwardedRequestHeaders = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Accept-Language": true, "Cache-Control": true, "Pragma": true,
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true, "Git-Protocol": true,
	"User-Agent": true, "If-None-Match": true, "If-Modified-Since": true, "Range": true, "If-Range": true,
}

// acting is who a forwarded request acts as.
type acting struct {
	// up is where the request goes.
	up              *upstream
	identity, token string
	git             bool
	// pushAdvert marks the receive-pack advertisement, which the gateway amends
	// (advertisement.go).
	pushAdvert bool
}

type actingKey struct{}

// rewrite points a request at Gitea and replaces every credential the worker sent with
// the identity's gateway token.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	a, _ := pr.In.Context().Value(actingKey{}).(acting)
	pr.SetURL(a.up.base)
	pr.Out.Host = a.up.base.Host
	// Only the headers a Gitea or git client needs reach Gitea. Everything else could be
	// read by Gitea as a credential (Authorization, Sudo, a cookie, an OTP, a reverse-proxy
	// login such as X-WEBAUTH-USER) or as the client's address, which Gitea believes when
	// it comes from a trusted proxy, and the gateway is one.
	for h := range pr.Out.Header {
		if !forwardedRequestHeaders[h] {
			pr.Out.Header.Del(h)
		}
	}
	// The client address Gitea logs is the one the gateway saw (X-Forwarded-For, -Host
	// and -Proto are set from the inbound request).
	pr.SetXForwarded()
	if q := pr.Out.URL.Query(); q.Has("token") || q.Has("access_token") || q.Has("sudo") {
		q.Del("token")
		q.Del("access_token")
		q.Del("sudo")
		pr.Out.URL.RawQuery = q.Encode()
	}
	if a.pushAdvert {
		pr.Out.Header.Del("Accept-Encoding") // read back plain, to be amended
	}
	if a.git {
		pr.Out.SetBasicAuth(a.identity, a.token)
	} else {
		pr.Out.Header.Set("Authorization", "token "+a.token)
	}
}

// serve handles one request: authenticate, limit, route, look up the registration and the
// identity's token, then forward a read or decide a mutation.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rt, routed := claim.MatchRoute(r.Method, r.URL.Path, r.URL.Query().Get("service"))
	if r.URL.RawPath != "" { // a path that needed escaping is never matched
		routed = false
	}
	op := rt.Operation
	if !routed {
		op = "none"
	}
	caller, err := g.guard.Authenticate(ctx, g.Authn, r)
	if err != nil {
		if errors.Is(err, ErrBlocked) {
			countRequest(op, verdictUnauthenticated)
			w.Header().Set("Retry-After", "1")
			writeRefusal(w, http.StatusTooManyRequests, op, "rate_limited", "too many failed authentications; slow down")
			return
		}
		if errors.Is(err, ErrUnauthenticated) {
			countRequest(op, verdictUnauthenticated)
			w.Header().Set("WWW-Authenticate", `Basic realm="fleet gateway", charset="UTF-8"`)
			writeRefusal(w, http.StatusUnauthorized, op, "unauthenticated",
				"present a ServiceAccount token bound to the audience "+Audience)
			return
		}
		g.fail(w, op, err)
		return
	}
	log := logf.FromContext(ctx).WithValues("worker", caller.Namespace+"/"+caller.Name, "method", r.Method, "path", r.URL.Path)
	ctx = logf.IntoContext(ctx, log)
	if !g.limiters.For(caller.Namespace + "/" + caller.Name).Allow() {
		countRequest(op, verdictRefused)
		w.Header().Set("Retry-After", "1")
		writeRefusal(w, http.StatusTooManyRequests, op, "rate_limited", "too many requests; slow down")
		return
	}
	reader := g.Reader
	if routed && !rt.Mutation() {
		reader = g.Cache
	}
	// A REST mutation is decided on the caller's claims read from the API server: that
	// read starts now, beside the registration's, and so does the reading of its body and,
	// for a comment, the reservation of its budget on the claim the cache names.
	var early *earlyReads
	if routed && rt.Mutation() && rt.Body != claim.BodyReceivePack {
		early = g.startReads(ctx, w, r, rt, caller)
	}
	wr := &fleetv1alpha1.WorkerRegistration{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: caller.Namespace, Name: caller.Name}, wr); err != nil {
		if apierrors.IsNotFound(err) {
			g.refuse(w, r, op, nil, claim.ReasonNotRegistered)
			return
		}
		g.fail(w, op, err)
		return
	}
	if wr.Status.Phase != fleetv1alpha1.PhaseActive {
		g.refuse(w, r, op, wr, claim.ReasonNotRegistered)
		return
	}
	if !routed {
		g.refuse(w, r, op, wr, claim.ReasonRouteNotPermitted)
		return
	}
	up, refused, err := g.upstreamOf(ctx, wr)
	if err != nil {
		g.fail(w, op, err)
		return
	}
	switch {
	case refused != nil:
		g.refuseWith(w, r, op, wr, nil, refused.reason, refused.message)
		return
	case rt.Repository != "" && !sameRepository(rt.Repository, up.repository):
		g.refuse(w, r, op, wr, claim.ReasonWrongRepository)
		return
	}
	token, err := g.Credentials.TokenOn(ctx, up.server, up.gitea, wr.Spec.Identity)
	if err != nil {
		g.fail(w, op, err)
		return
	}
	a := acting{up: up, identity: wr.Spec.Identity, token: token, git: rt.Git,
		pushAdvert: rt.Git && !rt.Mutation() && r.URL.Query().Get("service") == "git-receive-pack"}
	if !rt.Mutation() {
		countRequest(op, verdictAllowed)
		g.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, actingKey{}, a)))
		return
	}
	g.mutate(w, r.WithContext(context.WithValue(ctx, actingKey{}, a)), rt, wr, early)
}

func sameRepository(a, b string) bool {
	return a != "" && strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}

// recordRefusal records the refusal of a mutation as an Event on the claim it concerns, or
// on the registration; refused reads are only counted.
func (g *Gateway) recordRefusal(r *http.Request, op string, wr *fleetv1alpha1.WorkerRegistration, tc *fleetv1alpha1.TaskClaim, reason string) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return
	}
	var regarding runtime.Object
	switch {
	case tc != nil:
		regarding = tc
	case wr != nil:
		regarding = wr
	}
	if regarding != nil {
		g.Recorder.Eventf(regarding, nil, "Warning", ReasonRefused, op, "Gateway refused %s %s: %s", r.Method, r.URL.Path, reason)
	}
}

// fail answers 503 for state the gateway could not read: it fails closed.
func (g *Gateway) fail(w http.ResponseWriter, op string, err error) {
	countRequest(op, verdictError)
	msg := claim.RefusalMessage(claim.ReasonStateUnavailable)
	if errors.Is(err, ErrNoCredentials) {
		msg = "the gateway holds no usable Gitea credentials for your identity; ask an operator"
	}
	writeRefusal(w, http.StatusServiceUnavailable, op, claim.ReasonStateUnavailable, msg)
}

// refuse answers 403 (400 for malformed requests) for a request refused before any claim
// was looked at, and records the refusal of a mutation as an Event on the registration;
// reads refused are only counted.
func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, op string, wr *fleetv1alpha1.WorkerRegistration, reason string) {
	g.refuseWith(w, r, op, wr, nil, reason, claim.RefusalMessage(reason))
}

// refuseWrite is refuse for a decided mutation: the answer carries the verdict's own
// message, which may say more than its reason's fixed one (the caller's work branch, why a
// branch is refused).
func (g *Gateway) refuseWrite(w http.ResponseWriter, r *http.Request, v claim.WriteVerdict, wr *fleetv1alpha1.WorkerRegistration,
	tc *fleetv1alpha1.TaskClaim) {
	g.refuseWith(w, r, v.Operation, wr, tc, v.Reason, cmp.Or(v.Message, claim.RefusalMessage(v.Reason)))
}

// refuseWith answers a refusal with message and records it as an Event on the claim it
// concerns (tc), or else on the registration.
func (g *Gateway) refuseWith(w http.ResponseWriter, r *http.Request, op string, wr *fleetv1alpha1.WorkerRegistration,
	tc *fleetv1alpha1.TaskClaim, reason, message string) {
	countRequest(op, verdictRefused)
	g.recordRefusal(r, op, wr, tc, reason)
	status := http.StatusForbidden
	if reason == claim.ReasonMalformedRequest {
		status = http.StatusBadRequest
	}
	writeRefusal(w, status, op, reason, message)
}
