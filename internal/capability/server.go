// Package capability serves the capability check, POST /v1/authorize: whether the calling
// worker may perform one operation on one target now, answered from its active TaskClaims
// read straight from the API server. The caller authenticates like at the gateway (a
// ServiceAccount token for gateway.Audience) and is only ever asked about: a request that
// names another worker is refused.
package capability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/internal/httpserve"
)

// Request asks whether a worker may perform one operation on one target now.
// Namespace and Worker default to the caller's; any other value is refused.
type Request struct {
	Namespace  string `json:"namespace,omitempty"`
	Worker     string `json:"worker,omitempty"`
	Repository string `json:"repository"`
	Kind       string `json:"kind"`
	Number     int64  `json:"number"`
	HeadSHA    string `json:"headSHA,omitempty"`
	Operation  string `json:"operation"`
}

// Authorize answers a capability question from the worker's active capabilities, read
// straight from the API server. A worker with no active claim is neutral: refused with
// no_capability.
func Authorize(ctx context.Context, reader client.Reader, now time.Time, q Request) (claim.Answer, error) {
	list := &fleetv1alpha1.TaskClaimList{}
	if err := reader.List(ctx, list, client.InNamespace(q.Namespace)); err != nil {
		return claim.Answer{}, fmt.Errorf("listing task claims: %w", err)
	}
	held := make([]claim.Held, 0, len(list.Items))
	for i := range list.Items {
		tc := &list.Items[i]
		held = append(held, claim.Held{Claim: tc.Name, Worker: tc.Spec.Worker, Phase: tc.Status.Phase, Capability: apiconv.Capability(tc)})
	}
	return claim.AuthorizeAmong(held, claim.Query{Worker: q.Worker, Repository: q.Repository, Operation: q.Operation, Now: now,
		Target: claim.Target{Repository: q.Repository, Kind: claim.Kind(q.Kind), Number: q.Number, HeadSHA: q.HeadSHA}}), nil
}

// Server serves POST /v1/authorize for tools outside the Go code. It is a dry run: the
// gateway decides every write on claims read straight from the API server, so this answer
// may come from the manager's cache.
type Server struct {
	Addr string
	// Reader reads TaskClaims from the API server; Cache, when set, is read first (the
	// manager's informer cache) and Reader only when the cache cannot answer.
	Reader, Cache client.Reader
	Clock         clock.PassiveClock
	// Authn verifies the caller's ServiceAccount token.
	Authn *gateway.Authenticator
	// Rate and Burst limit each caller's questions (default 10 a second, bursts of 20);
	// failed authentications are limited per client address before any TokenReview.
	Rate  rate.Limit
	Burst int

	once     sync.Once
	limiters *gateway.Limiters
	guard    *gateway.AuthGuard
}

func (s *Server) init() {
	if s.Rate == 0 {
		s.Rate, s.Burst = 10, 20
	}
	s.limiters = gateway.NewLimiters(s.Rate, s.Burst)
	s.guard = gateway.NewAuthGuard(gateway.DefaultAuthFailureRate, gateway.DefaultAuthFailureBurst)
}

// authorize answers q from the cache when there is one, else (or when the cache cannot
// list the namespace) from the API server.
func (s *Server) authorize(ctx context.Context, q Request) (claim.Answer, error) {
	if s.Cache != nil {
		if ans, err := Authorize(ctx, s.Cache, s.Clock.Now(), q); err == nil {
			return ans, nil
		}
	}
	return Authorize(ctx, s.Reader, s.Clock.Now(), q)
}

// NeedLeaderElection is false: every replica can answer.
func (s *Server) NeedLeaderElection() bool { return false }

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	s.once.Do(s.init)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/authorize", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		caller, err := s.guard.Authenticate(r.Context(), s.Authn, r)
		if errors.Is(err, gateway.ErrBlocked) {
			tooMany(w)
			return
		}
		if err != nil {
			status := http.StatusServiceUnavailable
			if errors.Is(err, gateway.ErrUnauthenticated) {
				status = http.StatusUnauthorized
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"reason":"unauthenticated","message":"present a ServiceAccount token bound to the audience ` + gateway.Audience + `"}` + "\n"))
			return
		}
		if !s.limiters.For(caller.Namespace + "/" + caller.Name).Allow() {
			tooMany(w)
			return
		}
		var q Request
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil || q.Operation == "" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"reason":"malformed_request","message":"body must be a JSON object with repository, kind, number, operation (and headSHA for pull requests)"}` + "\n"))
			return
		}
		if (q.Namespace != "" && q.Namespace != caller.Namespace) || (q.Worker != "" && q.Worker != caller.Name) {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"reason":"wrong_worker","message":"the capability check answers only about the caller"}` + "\n"))
			return
		}
		q.Namespace, q.Worker = caller.Namespace, caller.Name
		ans, err := s.authorize(r.Context(), q)
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"reason":"state_unavailable","message":"capability state unavailable"}` + "\n"))
			return
		}
		_ = json.NewEncoder(w).Encode(ans)
	})
	return mux
}

func tooMany(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte(`{"reason":"rate_limited","message":"too many requests; slow down"}` + "\n"))
}

// Start serves until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	ln, err := httpserve.Listen(s.Addr, httpserve.Limits{})
	if err != nil {
		return fmt.Errorf("capability endpoint: %w", err)
	}
	srv := httpserve.Server(s.Handler(), httpserve.Limits{ReadTimeout: 30 * time.Second})
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
