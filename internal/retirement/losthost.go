package retirement

import (
	"fmt"
	"time"
)

// A host's agent may vanish after the fan-out gave its host a host plan: the machine
// is switched off, the agent is deleted, its credentials are revoked. Nobody else can
// prove liveness on that host, so the host plan could wait forever. The fleet
// coordinator therefore gives such a host a bounded wait: once no agent has held the
// host's Lease for HostAgentGrace beyond the Lease's expiry, the host is lost, and the
// coordinator closes its host plan the fail-closed way, writing no row (LostHostPlan
// before the host planned, LostHostApply before its apply started). An apply that
// already recorded its intent is never closed so: its crash-safe report is completed by
// its returning agent, or by a takeover once its hold lapsed.

// DefaultHostAgentGrace is how long a host plan waits for its host's agent beyond the
// expiry of the host's Lease.
const DefaultHostAgentGrace = 15 * time.Second

// HostLease is what a fleet plan knows about a host's agent: whether the host's Lease is
// held now, and, when it is not, since when (the end of its last holder's term: renew
// time plus lease duration; zero when the host has no Lease at all).
type HostLease struct {
	Held        bool
	UnheldSince time.Time
}

// HostAgentLost says whether a host's agent counts as lost at now, and, when it does
// not, when to look again (zero when the agent holds the Lease: the next look comes from
// the fleet plan's own periodic recheck).
func HostAgentLost(l HostLease, now time.Time, grace time.Duration) (lost bool, recheckAt time.Time) {
	if l.Held {
		return false, time.Time{}
	}
	deadline := l.UnheldSince.Add(grace)
	if l.UnheldSince.IsZero() || !now.Before(deadline) {
		return true, time.Time{}
	}
	return false, deadline
}

// LostHostAction is what the stand-in for a host's agent does to one host plan.
type LostHostAction int

const (
	// LostHostLeave: the host plan waits for nothing from its agent (planned and not
	// approved, or finished); the stand-in leaves it alone.
	LostHostLeave LostHostAction = iota
	// LostHostWait: the host plan waits for its agent, which is not lost (yet); look
	// again at RecheckAt (zero: only when an event comes).
	LostHostWait
	// LostHostClosePlan: the agent is lost before the host planned; record LostHostPlan.
	LostHostClosePlan
	// LostHostCloseApply: the agent is lost after an approval and before its apply
	// recorded an intent; record LostHostApply.
	LostHostCloseApply
	// LostHostSettleApply: the agent is lost during an apply that recorded its intent;
	// the apply's crash-safe report is completed as a takeover does, once its hold lapsed.
	LostHostSettleApply
)

// LostHostInput is what the stand-in knows of a host plan and of its host's agent.
type LostHostInput struct {
	// Outcome is the host plan's outcome ("" before it planned).
	Outcome string
	// ApplyInProgress: an apply recorded its intent and has not finished.
	ApplyInProgress bool
	// Approved: the fleet plan's approval narrows to this host plan, so its agent would
	// apply it now.
	Approved bool
	// Lease is what the host's Lease says now; LeaseExpires is when the held Lease's
	// current term ends (zero when unheld).
	Lease        HostLease
	LeaseExpires time.Time
	Now          time.Time
	Grace        time.Duration
}

// LostHostVerdict is the stand-in's decision for one host plan.
type LostHostVerdict struct {
	Action LostHostAction
	// RecheckAt is when to look again (LostHostWait only; zero: when an event comes).
	RecheckAt time.Time
}

// WaitsForAgent says whether a host plan waits for its host's agent: it is not planned,
// an apply is in progress, or it is approved without an apply result.
func WaitsForAgent(outcome string, applyInProgress, approved bool) bool {
	return outcome == "" || applyInProgress || (outcome == OutcomePlanned && approved)
}

// JudgeLostHost decides what the stand-in does to a host plan. A host plan waits for its
// agent while it is not planned, while an apply is in progress, and while it is approved
// without an apply result; only then can a lost agent strand it. While the agent is not
// lost, the stand-in looks again at the earlier of the moment the host could count as
// lost (HostAgentLost) and the held Lease's expiry plus the grace, since the holder may
// stop renewing at any time.
func JudgeLostHost(in LostHostInput) LostHostVerdict {
	if !WaitsForAgent(in.Outcome, in.ApplyInProgress, in.Approved) {
		return LostHostVerdict{Action: LostHostLeave}
	}
	lost, at := HostAgentLost(in.Lease, in.Now, in.Grace)
	switch {
	case !lost:
		next := at
		if !in.LeaseExpires.IsZero() && (next.IsZero() || in.LeaseExpires.Add(in.Grace).Before(next)) {
			next = in.LeaseExpires.Add(in.Grace)
		}
		return LostHostVerdict{Action: LostHostWait, RecheckAt: next}
	case in.ApplyInProgress:
		return LostHostVerdict{Action: LostHostSettleApply}
	case in.Outcome == "":
		return LostHostVerdict{Action: LostHostClosePlan}
	}
	return LostHostVerdict{Action: LostHostCloseApply}
}

// LostHostDetail explains why a lost host's rows are kept.
func LostHostDetail(hostID string, l HostLease, grace time.Duration) string {
	if l.UnheldSince.IsZero() {
		return fmt.Sprintf("host %q has no coordination Lease any more: no agent can prove liveness on it", hostID)
	}
	return fmt.Sprintf("no agent has held host %q's coordination Lease since %s (waited %s more): liveness can only be proven on the worker's own host",
		hostID, l.UnheldSince.UTC().Format(time.RFC3339), grace)
}

// LostHostPlan is the host plan of a lost host that never planned: every row of the host
// preserved (Active rows as host_binding_unproven, the others as
// already_terminal_registration), no candidate. The registry fingerprint stays the whole
// namespace's, like any host plan's; canonical and binding are the plan's repository
// binding and its canonical value (Input.CanonicalRepository, Input.CanonicalBinding).
func LostHostPlan(rows []Row, hostID, canonical, binding, detail string) Plan {
	var mine []Row
	for i := range rows {
		if rows[i].HostID == hostID {
			mine = append(mine, rows[i])
		}
	}
	f := PlanFanout(mine, func(string) bool { return false })
	p := Plan{
		Outcome:               OutcomePlanned,
		RegistryFingerprint:   RegistryFingerprint(rows),
		CandidateFingerprint:  CandidateFingerprint(nil, binding),
		CanonicalRepository:   normalizeRepository(canonical),
		CanonicalBinding:      normalizeRepository(binding),
		PreservedReasonCounts: map[string]int{},
		ReadOnly:              true,
	}
	for _, a := range f.Uncovered {
		if a.ReasonCode == ReasonHostBindingUnproven {
			a.Detail = detail
		}
		p.Preserved = append(p.Preserved, a)
		p.PreservedReasonCounts[a.ReasonCode]++
	}
	p.PreservedCount, p.AssessedCount = len(p.Preserved), len(p.Preserved)
	return p
}

// LostHostApply is the report of a lost host's host plan whose apply never started: no
// row written, every approved identity of the host preserved as host_binding_unproven,
// and the outcome transaction_failed, so the host plan (and any fleet report that
// includes it) is never a success. A host plan with no approved identity had nothing to
// write: nothing_requested.
func LostHostApply(approved []string, detail string) ApplyReport {
	if len(approved) == 0 {
		return ApplyReport{Outcome: OutcomeNothingRequested, Detail: "no approved row on this host, whose agent is gone: " + detail}
	}
	rep := ApplyReport{Outcome: OutcomeTransactionFailed, Detail: "the apply could not run on its host: " + detail}
	for _, id := range NormalizeIdentities(approved) {
		rep.Preserved = append(rep.Preserved, Assessment{WorkerIdentity: id, ReasonCode: ReasonHostBindingUnproven, Detail: detail})
	}
	return rep
}
