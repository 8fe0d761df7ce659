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
	"net"
	"net/http"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gateway"
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

// Server serves POST /v1/authorize for tools outside the Go code.
type Server struct {
	Addr   string
	Reader client.Reader
	Clock  clock.PassiveClock
	// Authn verifies the caller's ServiceAccount token.
	Authn *gateway.Authenticator
}

// NeedLeaderElection is false: every replica can answer.
func (s *Server) NeedLeaderElection() bool { return false }

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/authorize", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		caller, err := s.Authn.Authenticate(r.Context(), gateway.BearerToken(r))
		if err != nil {
			status := http.StatusServiceUnavailable
			if errors.Is(err, gateway.ErrUnauthenticated) {
				status = http.StatusUnauthorized
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"reason":"unauthenticated","message":"present a ServiceAccount token bound to the audience ` + gateway.Audience + `"}` + "\n"))
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
		ans, err := Authorize(r.Context(), s.Reader, s.Clock.Now(), q)
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"reason":"state_unavailable","message":"capability state unavailable"}` + "\n"))
			return
		}
		_ = json.NewEncoder(w).Encode(ans)
	})
	return mux
}

// Start serves until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("capability endpoint: %w", err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
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
