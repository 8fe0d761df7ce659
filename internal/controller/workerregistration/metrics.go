package workerregistration

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var ownershipTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "fleet_registration_ownership_transitions_total",
	Help: "WorkerRegistration ownership-state transitions, by previous and new state.",
}, []string{"from", "to"})

func init() {
	metrics.Registry.MustRegister(ownershipTransitions)
}
