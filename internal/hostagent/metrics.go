package hostagent

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	heldGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleet_agent_lease_held",
		Help: "1 while this process holds the coordination Lease (a host's, or the fleet coordinator's), else 0.",
	}, []string{"lease"})

	transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_agent_lease_transitions_total",
		Help: "Times this process acquired or lost a coordination Lease, by Lease and transition.",
	}, []string{"lease", "transition"})
)

func init() {
	metrics.Registry.MustRegister(heldGauge, transitions)
}
