package taskclaim

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
)

var (
	claimResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_task_claim_results_total",
		Help: "TaskClaim decisions, by outcome and failure class (empty for successes), and by repository: its GiteaServer (empty for the --gitea-url server) and owner/name.",
	}, []string{"outcome", "class", "server", "repository"})

	claimTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_task_claim_transitions_total",
		Help: "TaskClaim lifecycle transitions (claimed, activated, released, completed, expired, revoked), by trigger, and by repository: its GiteaServer (empty for the --gitea-url server) and owner/name.",
	}, []string{"event", "trigger", "server", "repository"})

	clearFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fleet_task_claim_clear_failures_total",
		Help: "Attempts to end a final claim's Gitea record (or its assignment) that failed and are retried with backoff.",
	})

	sweepEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_task_claim_sweep_total",
		Help: "What the periodic sweep ended: records in force without a claim (record), locks without a holder (lock), failed passes (error).",
	}, []string{"kind"})

	claimLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fleet_task_claim_decision_seconds",
		Help:    "Time from the pin appearing in spec to the claim's final decision.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})
)

// repositoryLabels are the repository labels of tc's metrics: the GiteaServer its
// validation resolved the repository on ("" for the --gitea-url server) and the
// repository as the claim names it, lower-cased. Two repositories of the same name on two
// servers count apart.
func repositoryLabels(tc *fleetv1alpha1.TaskClaim) (server, repository string) {
	return apiconv.ClaimRepositoryKey(tc).Server, strings.ToLower(tc.Spec.Target.Repository)
}

func init() {
	metrics.Registry.MustRegister(claimResults, claimTransitions, clearFailures, sweepEnded, claimLatency)
}
