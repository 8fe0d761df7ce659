package taskclaim

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	claimResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_task_claim_results_total",
		Help: "TaskClaim decisions, by outcome and failure class (empty for successes).",
	}, []string{"outcome", "class"})

	claimTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_task_claim_transitions_total",
		Help: "TaskClaim lifecycle transitions (claimed, activated, released, completed, expired, revoked), by trigger.",
	}, []string{"event", "trigger"})

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

func init() {
	metrics.Registry.MustRegister(claimResults, claimTransitions, clearFailures, sweepEnded, claimLatency)
}
