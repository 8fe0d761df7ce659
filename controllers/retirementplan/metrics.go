package retirementplan

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/giteatools/fleet-controller/internal/fleet"
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

	takeoversTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fleet_retirement_apply_takeovers_total",
		Help: "Applies whose applier stopped renewing its hold and whose report another reconcile completed from the rows.",
	})

	refusedAppliersTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_retirement_apply_refused_appliers_total",
		Help: "Times an applier found a plan's apply held by another (or finished) and wrote nothing, by stage " +
			"(wait: found it held; intent: lost the race to record the intent; renew: lost the hold mid-apply; report: lost it before the report).",
	}, []string{"stage"})

	pagesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_retirement_plan_pages_total",
		Help: "Plans whose pages were written after planning, by result (written; failed: the writes kept failing; lost: the agent that planned stopped first).",
	}, []string{"result"})

	preservedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_registrations_preserved_total",
		Help: "Registrations preserved by a plan or an apply, by reason code.",
	}, []string{"stage", "reason"})
)

// Fleet plans across hosts.
var (
	fleetPlanHosts = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleet_retirement_plan_hosts",
		Help: "Hosts with Active registrations in the namespace's last fleet plan fan-out, by whether an agent held them (with_agent, without_agent).",
	}, []string{labelNamespace, "agent"})

	fleetConflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fleet_retirement_fleet_plan_conflicts_total",
		Help: "Fleet plan writes that conflicted with another agent's, answered by re-reading the plan and deciding again.",
	})

	hostPlansCreated = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fleet_retirement_host_plans_created_total",
		Help: "Host plans created by fleet plans (one per host with an agent and Active registrations).",
	})

	hostsLostTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fleet_retirement_host_plans_lost_total",
		Help: "Host plans the fleet coordinator closed without writing any row because the host's agent was gone.",
	})

	fleetStandbyTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fleet_retirement_fleet_plan_standby_total",
		Help: "Fleet plan reconciles that wrote nothing to the fleet plan because another agent is the fleet coordinator.",
	})
)

// labelNamespace is the namespace label of the fleet gauges.
const labelNamespace = "namespace"

// The fleet snapshot of a namespace, as last read by a plan or an apply.
var (
	fleetWorkers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleet_workers",
		Help: "Worker registrations in the namespace's last fleet snapshot, by ownership state (live, stale, historical).",
	}, []string{labelNamespace, "state"})

	fleetSafe = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleet_live_fleet_safe",
		Help: "1 when the namespace's last fleet snapshot had no blocker (live_fleet_safe), else 0.",
	}, []string{labelNamespace})

	fleetBlockers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleet_blockers",
		Help: "Blockers in the namespace's last fleet snapshot, by code.",
	}, []string{labelNamespace, "code"})
)

func init() {
	metrics.Registry.MustRegister(plansTotal, approvalsTotal, retiredTotal, takeoversTotal, refusedAppliersTotal, pagesTotal, preservedTotal, fleetWorkers, fleetSafe, fleetBlockers,
		fleetPlanHosts, hostPlansCreated, fleetConflicts, hostsLostTotal, fleetStandbyTotal)
}

// recordSnapshot publishes a namespace's fleet snapshot as gauges. Blocker codes that no
// longer occur are dropped.
func recordSnapshot(namespace string, s fleet.Summary) {
	fleetWorkers.WithLabelValues(namespace, fleet.Live).Set(float64(s.LiveCount))
	fleetWorkers.WithLabelValues(namespace, fleet.Stale).Set(float64(s.StaleCount))
	fleetWorkers.WithLabelValues(namespace, fleet.Historical).Set(float64(s.HistoricalCount))
	safe := 0.0
	if s.LiveFleetSafe {
		safe = 1
	}
	fleetSafe.WithLabelValues(namespace).Set(safe)
	fleetBlockers.DeletePartialMatch(prometheus.Labels{labelNamespace: namespace})
	counts := map[string]int{}
	for _, b := range s.Blockers {
		counts[b.Code]++
	}
	for code, n := range counts {
		fleetBlockers.WithLabelValues(namespace, code).Set(float64(n))
	}
}
