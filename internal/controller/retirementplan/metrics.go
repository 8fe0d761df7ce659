package retirementplan

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
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
)

func init() {
	metrics.Registry.MustRegister(plansTotal, approvalsTotal, retiredTotal, preservedTotal)
}
