package controllers

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
	"github.com/giteatools/fleet-controller/internal/claim"
)

// CapabilityRequest asks whether a worker may perform one operation on one target now.
type CapabilityRequest struct {
	Namespace  string `json:"namespace"`
	Worker     string `json:"worker"`
	Repository string `json:"repository"`
	Kind       string `json:"kind"`
	Number     int64  `json:"number"`
	HeadSHA    string `json:"headSHA,omitempty"`
	Operation  string `json:"operation"`
}

// CapabilityAnswer is the verdict; Reason is empty when allowed.
type CapabilityAnswer struct {
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	Claim   string `json:"claim,omitempty"`
}

// Authorize answers a capability question from the worker's active capability alone,
// read straight from the API server. A worker with no active claim is neutral: refused
// with no_capability.
func Authorize(ctx context.Context, reader client.Reader, now time.Time, q CapabilityRequest) (CapabilityAnswer, error) {
	list := &fleetv1alpha1.TaskClaimList{}
	if err := reader.List(ctx, list, client.InNamespace(q.Namespace)); err != nil {
		return CapabilityAnswer{}, fmt.Errorf("listing task claims: %w", err)
	}
	query := claim.Query{Worker: q.Worker, Repository: q.Repository, Operation: q.Operation, Now: now,
		Target: claim.Target{Repository: q.Repository, Kind: claim.Kind(q.Kind), Number: q.Number, HeadSHA: q.HeadSHA}}
	best := CapabilityAnswer{Reason: claim.ReasonNoCapability}
	for i := range list.Items {
		tc := &list.Items[i]
		if tc.Spec.Worker != q.Worker || tc.Status.Phase != fleetv1alpha1.ClaimPhaseActive || tc.Status.Capability == nil {
			continue
		}
		ok, reason := claim.Authorize(capabilityFrom(tc), false, query)
		if ok {
			return CapabilityAnswer{Allowed: true, Claim: tc.Name}, nil
		}
		best = CapabilityAnswer{Reason: reason, Claim: tc.Name}
	}
	return best, nil
}

// CapabilityServer serves POST /v1/authorize for tools outside the Go code.
type CapabilityServer struct {
	Addr   string
	Reader client.Reader
	Clock  clock.PassiveClock
}

// NeedLeaderElection is false: every replica can answer.
func (s *CapabilityServer) NeedLeaderElection() bool { return false }

// Handler returns the HTTP handler.
func (s *CapabilityServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/authorize", func(w http.ResponseWriter, r *http.Request) {
		var q CapabilityRequest
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
func (s *CapabilityServer) Start(ctx context.Context) error {
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
