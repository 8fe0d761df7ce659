package workerregistration

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var ownershipTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "fleet_registration_ownership_transitions_total",
	Help: "WorkerRegistration ownership-state transitions, by previous and new state.",
}, []string{"from", "to"})

var statusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "fleet_registration_status_writes_total",
	Help: "WorkerRegistration status writes by this controller, by writer (host_agent: the row's own host; coordinator: a host without an agent).",
}, []string{"writer"})

func init() {
	metrics.Registry.MustRegister(ownershipTransitions, statusWrites)
}
