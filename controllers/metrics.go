package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Prometheus metrics of fleet-controller, served on the manager's metrics endpoint.
var (
	ownershipTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_registration_ownership_transitions_total",
		Help: "WorkerRegistration ownership-state transitions, by previous and new state.",
	}, []string{"from", "to"})

	plansTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_retirement_plan_outcomes_total",
		Help: "RetirementPlan results, by outcome.",
	}, []string{"outcome"})

	approvalsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_retirement_approvals_total",
		Help: "RetirementPlan approval decisions, by reason (ApprovalMatchesPlan, ApprovalMismatch, ApproverNotAuthorized).",
	}, []string{"reason"})

	retiredTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fleet_registrations_retired_total",
		Help: "WorkerRegistrations retired by an applied RetirementPlan.",
	})

	preservedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_registrations_preserved_total",
		Help: "Registrations preserved by a plan or an apply, by reason code.",
	}, []string{"stage", "reason"})

	claimResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_task_claim_results_total",
		Help: "TaskClaim decisions, by outcome and failure class (empty for successes).",
	}, []string{"outcome", "class"})

	claimTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_task_claim_transitions_total",
		Help: "TaskClaim lifecycle transitions (claimed, activated, released, completed, expired, revoked), by trigger.",
	}, []string{"event", "trigger"})

	claimLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fleet_task_claim_decision_seconds",
		Help:    "Time from the pin appearing in spec to the claim's final decision.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	})
)

func init() {
	metrics.Registry.MustRegister(ownershipTransitions, plansTotal, approvalsTotal, retiredTotal,
		preservedTotal, claimResults, claimTransitions, claimLatency)
}
