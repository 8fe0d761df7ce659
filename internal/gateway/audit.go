package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
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

// forwardedWrite is what the audit record of one forwarded mutation says.
type forwardedWrite struct {
	operation, method, path, identity string
	// status is Gitea's answer.
	status int
	// digest is the SHA-256 of the body forwarded, hex.
	digest string
}

// auditor writes one Event per forwarded mutation. The Events are created directly, each
// under a name of its own, and not through an EventRecorder: a recorder folds Events with
// the same object, reason and action into one series (and drops some under its spam
// filter), so "every forwarded write is an Event" would not hold. The write happens after
// Gitea answered, off the request's path; a failure is logged and counted.
type auditor struct {
	client   client.Client
	instance string
	clock    clock.PassiveClock
	wg       sync.WaitGroup
}

// AuditFailuresMetric counts audit Events the gateway could not write.
const AuditFailuresMetric = "fleet_gateway_audit_failures_total"

var auditFailures = prometheus.NewCounter(prometheus.CounterOpts{
	Name: AuditFailuresMetric,
	Help: "Audit Events of forwarded mutations the gateway could not write.",
})

func init() { metrics.Registry.MustRegister(auditFailures) }

// forwarded records one forwarded write on its TaskClaim.
func (a *auditor) forwarded(ctx context.Context, tc *fleetv1alpha1.TaskClaim, fw forwardedWrite) {
	if tc == nil {
		return
	}
	now := a.clock.Now()
	claimID := ""
	if tc.Status.Capability != nil {
		claimID = tc.Status.Capability.ClaimID
	}
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: fmt.Sprintf("%s.%s", tc.Name, randomSuffix())},
		EventTime:  metav1.NewMicroTime(now),
		Regarding: corev1.ObjectReference{APIVersion: fleetv1alpha1.GroupVersion.String(), Kind: "TaskClaim",
			Namespace: tc.Namespace, Name: tc.Name, UID: tc.UID, ResourceVersion: tc.ResourceVersion},
		Reason: ReasonForwarded, Action: fw.operation, Type: corev1.EventTypeNormal,
		ReportingController: AuditController, ReportingInstance: a.instance,
		Note: truncate(fmt.Sprintf("Gateway forwarded %s %s as %s under capability %s; Gitea answered %d; request sha256:%s",
			fw.method, fw.path, fw.identity, claimID, fw.status, fw.digest), 1024),
	}
	a.wg.Go(func() {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := a.client.Create(wctx, ev); err != nil {
			auditFailures.Inc()
			logf.FromContext(ctx).Error(err, "Cannot write the audit Event of a forwarded mutation", "event", ev.Note)
		}
	})
}

// AuditController is the reportingController of the gateway's audit Events.
const AuditController = "fleet.giteatools.dev/gateway"

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// digestReader hashes what is read through it.
type digestReader struct {
	r io.Reader
	h hash.Hash
}

func newDigestReader(r io.Reader) *digestReader { return &digestReader{r: r, h: sha256.New()} }

func (d *digestReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.h.Write(p[:n])
	return n, err
}

// Sum is the hex SHA-256 of everything read so far.
func (d *digestReader) Sum() string { return hex.EncodeToString(d.h.Sum(nil)) }
