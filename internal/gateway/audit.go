package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Event reasons of the gateway.
const (
	// ReasonForwarded: a mutation was forwarded to Gitea.
	ReasonForwarded = "GatewayForwarded"
	// ReasonRefused: a mutation was refused.
	ReasonRefused = "GatewayRefused"
)

// Verdicts of fleet_gateway_requests_total.
const (
	verdictAllowed         = "allowed"
	verdictRefused         = "refused"
	verdictUnauthenticated = "unauthenticated"
	verdictError           = "error"
)

// RequestsMetric is the name of the gateway's request counter.
const RequestsMetric = "fleet_gateway_requests_total"

var requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: RequestsMetric,
	Help: "Requests to the gateway by operation (read, comment, review, approve, merge, open_pull_request, push_branch, ...; none when unrouted) and verdict (allowed, refused, unauthenticated, error).",
}, []string{"operation", "verdict"})

func init() { metrics.Registry.MustRegister(requests) }

func countRequest(op, verdict string) { requests.WithLabelValues(op, verdict).Inc() }

// Refusal is the JSON body of every answer the gateway gives instead of Gitea's.
type Refusal struct {
	// Reason is the typed reason (claim.Reason* or unauthenticated, rate_limited).
	Reason string `json:"reason"`
	// Operation is the operation the request was taken for.
	Operation string `json:"operation,omitempty"`
	// Message explains the reason; it never names another task.
	Message string `json:"message"`
}

func writeRefusal(w http.ResponseWriter, status int, op, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Refusal{Reason: reason, Operation: op, Message: message})
}

// statusWriter remembers the status Gitea answered a forwarded mutation with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush git's streamed answers.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
