package retirement

import (
	"fmt"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// How a fleet plan splits a namespace's rows by host at fan-out, and what it keeps of the
// rows no host plan covers.

// HostRows is how many Active rows a host has.
type HostRows struct {
	HostID   string
	RowCount int
}

// Fanout is how a fleet plan splits a namespace's rows: which hosts get a host plan, and
// the assessments of the rows no host plan covers.
type Fanout struct {
	// Hosts are the hosts with Active rows and an agent, sorted: one host plan each.
	Hosts []string
	// WithoutAgent are the hosts with Active rows and no agent, sorted (complete).
	WithoutAgent []HostRows
	// Uncovered are the assessments of the rows no host plan covers, sorted by identity:
	// Active rows of hosts without an agent (host_binding_unproven) and Retired rows of
	// hosts without a host plan (already_terminal_registration).
	Uncovered []Assessment
}

// PlanFanout splits rows by host. hasAgent says whether a host's Lease is held. A row
// with an empty host id belongs to host "" which no agent can hold. At most
// MaxFleetHosts hosts get a host plan; the rows of any further host are kept like those
// of a host without an agent.
func PlanFanout(rows []Row, hasAgent func(hostID string) bool) Fanout {
	active := map[string]int{}
	for i := range rows {
		if fleet.EffectivePhase(rows[i].Phase) == fleet.Active {
			active[rows[i].HostID]++
		}
	}
	var f Fanout
	covered := map[string]bool{}
	for _, h := range sortedKeys(active) {
		if h != "" && hasAgent(h) && len(f.Hosts) < MaxFleetHosts {
			f.Hosts = append(f.Hosts, h)
			covered[h] = true
			continue
		}
		f.WithoutAgent = append(f.WithoutAgent, HostRows{HostID: h, RowCount: active[h]})
	}
	for i := range rows {
		r := &rows[i]
		if covered[r.HostID] {
			continue
		}
		ev := map[string]string{EvidencePhase: r.Phase, EvidenceOwnershipState: r.OwnershipState, EvidenceRowHostID: r.HostID,
			EvidenceLastHeartbeatAt: r.LastHeartbeatAt}
		if fleet.EffectivePhase(r.Phase) != fleet.Active {
			f.Uncovered = append(f.Uncovered, Assessment{WorkerIdentity: r.Name, ReasonCode: ReasonAlreadyTerminal,
				Detail: fmt.Sprintf("the registration is %s, not Active", r.Phase), Evidence: ev})
			continue
		}
		f.Uncovered = append(f.Uncovered, Assessment{WorkerIdentity: r.Name, ReasonCode: ReasonHostBindingUnproven,
			Detail:   fmt.Sprintf("registered on host %q, where no agent holds the host's coordination Lease: liveness can only be proven on the worker's own host", r.HostID),
			Evidence: ev})
	}
	f.Uncovered = sortAssessments(f.Uncovered)
	return f
}

// Uncovered is what a fleet plan recorded at fan-out about the rows no host plan covers:
// their listed assessments (bounded) and complete counts.
type Uncovered struct {
	Listed       []Assessment
	Count        int
	ReasonCounts map[string]int
	// HostsWithoutAgent is the number of hosts with Active rows and no agent.
	HostsWithoutAgent int
}

// UncoveredOf bounds a fan-out's uncovered rows for the fleet plan's status.
func UncoveredOf(f Fanout) Uncovered {
	u := Uncovered{Listed: f.Uncovered[:min(len(f.Uncovered), MaxListedAssessments)], Count: len(f.Uncovered),
		ReasonCounts: map[string]int{}, HostsWithoutAgent: len(f.WithoutAgent)}
	for _, a := range f.Uncovered {
		u.ReasonCounts[a.ReasonCode]++
	}
	return u
}
