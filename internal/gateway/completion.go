package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// DefaultCompletionWait bounds how long the gateway holds Gitea's answer to a completing
// write while the controller looks at the claim again (Gateway.CompletionWait).
const DefaultCompletionWait = 5 * time.Second

// CompletionWaitMetric is the name of the histogram of those waits.
const CompletionWaitMetric = "fleet_gateway_completion_wait_seconds"

var completionWaits = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name: CompletionWaitMetric,
	Help: "How long the gateway held Gitea's answer to a write that may complete a claim " +
		"(open_pull_request, review, approve, merge) until the controller had looked at the claim again, " +
		"by outcome (looked; timeout: the recheck ends it later; cancelled: the client went away).",
	Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
}, []string{"outcome"})

func init() { metrics.Registry.MustRegister(completionWaits) }

// completingKey marks a forwarded request whose success may complete the claim it names.
type completingKey struct{}

// completing returns ctx marked so that, once Gitea accepts the write, the gateway has
// tc looked at again before it answers: when the write is the one that completes tc's
// role and a controller runs in this process.
func (g *Gateway) completing(ctx context.Context, tc *fleetv1alpha1.TaskClaim, op string) context.Context {
	if g.Nudges == nil || tc == nil || tc.Status.Capability == nil ||
		op != claim.CompletingOperation(claim.Role(tc.Status.Capability.Role)) {
		return ctx
	}
	return context.WithValue(ctx, completingKey{}, client.ObjectKeyFromObject(tc))
}

// modifyResponse amends what Gitea answers before the worker sees it: the receive-pack
// advertisement (advertisement.go), and the wait for a completed claim to end.
func (g *Gateway) modifyResponse(resp *http.Response) error {
	if err := amendAdvertisement(resp); err != nil {
		return err
	}
	g.awaitCompletion(resp)
	return nil
}

// awaitCompletion holds a successful completing write's answer until the controller has
// looked at the claim since the write, so the claim has ended (or has been found still
// standing) by the time the worker reads the answer. It gives up after CompletionWait;
// the controller's recheck then ends the claim a little later.
func (g *Gateway) awaitCompletion(resp *http.Response) {
	ctx := resp.Request.Context()
	key, ok := ctx.Value(completingKey{}).(types.NamespacedName)
	if !ok || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return
	}
	start := time.Now()
	timer := time.NewTimer(g.CompletionWait)
	defer timer.Stop()
	outcome := "looked"
	select {
	case <-g.Nudges.Nudge(key):
	case <-timer.C:
		outcome = "timeout"
		logf.FromContext(ctx).Info("The controller did not look at the claim in time after its completing write; its recheck will",
			"taskClaim", key.String(), "waited", g.CompletionWait.String())
	case <-ctx.Done():
		outcome = "cancelled"
	}
	completionWaits.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
}
