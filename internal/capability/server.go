// Package capability serves the capability check, POST /v1/authorize: whether a worker
// may perform one operation on one target now, answered from its active TaskClaims read
// straight from the API server.
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
)

// Request asks whether a worker may perform one operation on one target now.
type Request struct {
	Namespace  string `json:"namespace"`
	Worker     string `json:"worker"`
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
}

// NeedLeaderElection is false: every replica can answer.
func (s *Server) NeedLeaderElection() bool { return false }

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/authorize", func(w http.ResponseWriter, r *http.Request) {
		var q Request
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil || q.Namespace == "" || q.Worker == "" || q.Operation == "" {
			http.Error(w, `{"error":"body must be a JSON object with namespace, worker, repository, kind, number, operation"}`, http.StatusBadRequest)
			return
		}
		ans, err := Authorize(r.Context(), s.Reader, s.Clock.Now(), q)
		if err != nil {
			http.Error(w, `{"error":"capability state unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
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
