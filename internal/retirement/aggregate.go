package retirement

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// A fleet plan covers a namespace whose workers run on several hosts. Liveness can only
// be proven on a worker's own host, so each host's agent plans and applies that host's
// rows in a host plan, and the fleet plan is the aggregate of its host plans and of the
// rows no host plan covers. Everything here is a pure function of those inputs, so the
// fleet plan reads the same whichever agent computed it.

const (
	// MaxFleetHosts bounds the hosts a fleet plan lists (hosts and hostsWithoutAgent).
	MaxFleetHosts = 256
	// fleetCandidateDomain separates the fleet candidate fingerprint from the others.
	fleetCandidateDomain = "fleet.giteatools.dev/retirement/fleet-candidate-fingerprint/v1"
)

// HostShare is one host's plan as its fleet plan sees it.
type HostShare struct {
	// HostID is the host the share covers.
	HostID string
	// Plan is the host plan's name; Agent the agent that held the host at fan-out.
	Plan, Agent string
	// Outcome is the host plan's outcome, "" until its agent planned it.
	Outcome string
	// CanonicalRepository is the repository binding the host plan planned with.
	CanonicalRepository string
	// Listing is the host plan as listed in its status (bounded).
	Candidates, Preserved []Assessment
	// CandidateIdentities are the host plan's approvable identities.
	CandidateIdentities []string
	// The host plan's complete counts.
	AssessedCount, CandidateCount, PreservedCount int
	PreservedReasonCounts                         map[string]int
	// CandidateFingerprint is the host plan's candidate fingerprint.
	CandidateFingerprint string
	// ProtectedActiveWorkflowOwners are the host's rows held by an active task claim.
	ProtectedActiveWorkflowOwners []string
	// Apply is the host plan's apply result, nil until it has one.
	Apply *HostApply
}

// HostApply is a host plan's apply result as its status records it.
type HostApply struct {
	Outcome           string
	Retired           []string
	RetiredCount      int
	Preserved         []Assessment
	MutationPerformed bool
	// Complete is status.applyComplete (nil unless the outcome is applied).
	Complete *bool
	// Message is the host plan's status message.
	Message string
	// Recovered is true when the host plan's applier stopped before its report and a
	// takeover completed the report from the rows (Applied reason ApplyInterrupted).
	Recovered bool
}

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

// ForHost narrows a plan built over every row of the namespace (with Host the host's
// own) to the rows of hostID: its candidates, preserved rows, counts and active workflow
// owners. The registry fingerprint stays the whole namespace's, as the specification
// defines it; the candidate fingerprint is recomputed over the host's candidates.
func ForHost(p Plan, rows []Row, hostID string) Plan {
	mine := map[string]*Row{}
	for i := range rows {
		if rows[i].HostID == hostID {
			mine[rows[i].Name] = &rows[i]
		}
	}
	out := p
	out.Candidates, out.Preserved, out.CandidateWorkerIdentities, out.ProtectedActiveWorkflowOwners = nil, nil, nil, nil
	out.PreservedReasonCounts = map[string]int{}
	var candRows []Row
	for _, a := range p.Candidates {
		if r, ok := mine[a.WorkerIdentity]; ok {
			out.Candidates = append(out.Candidates, a)
			out.CandidateWorkerIdentities = append(out.CandidateWorkerIdentities, a.WorkerIdentity)
			candRows = append(candRows, *r)
		}
	}
	for _, a := range p.Preserved {
		if _, ok := mine[a.WorkerIdentity]; ok {
			out.Preserved = append(out.Preserved, a)
			out.PreservedReasonCounts[a.ReasonCode]++
		}
	}
	for _, o := range p.ProtectedActiveWorkflowOwners {
		if _, ok := mine[o]; ok {
			out.ProtectedActiveWorkflowOwners = append(out.ProtectedActiveWorkflowOwners, o)
		}
	}
	out.CandidateWorkerIdentities = NormalizeIdentities(out.CandidateWorkerIdentities)
	out.CandidateCount, out.PreservedCount = len(out.Candidates), len(out.Preserved)
	out.AssessedCount = out.CandidateCount + out.PreservedCount
	out.CandidateFingerprint = CandidateFingerprint(candRows, p.CanonicalRepository)
	return out
}

// FleetCandidateFingerprint is the fleet plan's candidate fingerprint: "sha256:" and the
// hex SHA-256 of a domain line followed by one line "<hostID>=<host plan's candidate
// fingerprint>" per host, sorted by host id, each ending in a newline. It moves when any
// host's candidate set moves, and it does not depend on the order the host plans were
// made or read in, nor on which agent aggregated them.
func FleetCandidateFingerprint(hosts []HostShare) string {
	lines := make([]string, 0, len(hosts))
	for _, h := range hosts {
		lines = append(lines, h.HostID+"="+h.CandidateFingerprint)
	}
	sort.Strings(lines)
	sum := sha256.New()
	sum.Write([]byte(fleetCandidateDomain + "\n"))
	for _, l := range lines {
		sum.Write([]byte(l + "\n"))
	}
	return "sha256:" + hex.EncodeToString(sum.Sum(nil))
}

// FleetPlan is a fleet plan's status, aggregated from its host plans.
type FleetPlan struct {
	// Planned is true once every host plan is planned; the other fields are only
	// meaningful then.
	Planned bool
	// Waiting names the host plans not planned yet.
	Waiting []string
	// CandidateFingerprint is FleetCandidateFingerprint over the host plans.
	CandidateFingerprint string
	// CandidateWorkerIdentities, Candidates and Preserved are merged, sorted and bounded
	// like a single plan's (ListPlan).
	CandidateWorkerIdentities []string
	Candidates, Preserved     []Assessment
	// The counts are complete sums over host plans and uncovered rows.
	AssessedCount, CandidateCount, PreservedCount int
	PreservedReasonCounts                         map[string]int
	ProtectedActiveWorkflowOwners                 []string
	// Message explains the fleet plan.
	Message string
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

// AggregatePlan merges host plans and the rows no host plan covers into the fleet plan.
func AggregatePlan(hosts []HostShare, uncovered Uncovered) FleetPlan {
	var f FleetPlan
	for _, h := range hosts {
		if h.Outcome == "" {
			f.Waiting = append(f.Waiting, h.Plan)
		}
	}
	sort.Strings(f.Waiting)
	if len(f.Waiting) > 0 {
		f.Message = fmt.Sprintf("Waiting for the agents of %d host(s) to plan their rows: %s", len(f.Waiting), strings.Join(f.Waiting, ", "))
		return f
	}
	f.Planned = true
	f.PreservedReasonCounts = map[string]int{}
	var ids []string
	for _, h := range hosts {
		f.Candidates = append(f.Candidates, h.Candidates...)
		f.Preserved = append(f.Preserved, h.Preserved...)
		ids = append(ids, h.CandidateIdentities...)
		f.AssessedCount += h.AssessedCount
		f.CandidateCount += h.CandidateCount
		f.PreservedCount += h.PreservedCount
		for k, v := range h.PreservedReasonCounts {
			f.PreservedReasonCounts[k] += v
		}
		f.ProtectedActiveWorkflowOwners = append(f.ProtectedActiveWorkflowOwners, h.ProtectedActiveWorkflowOwners...)
	}
	f.Preserved = append(f.Preserved, uncovered.Listed...)
	for k, v := range uncovered.ReasonCounts {
		f.PreservedReasonCounts[k] += v
	}
	f.AssessedCount += uncovered.Count
	f.PreservedCount += uncovered.Count
	f.CandidateFingerprint = FleetCandidateFingerprint(hosts)
	f.Candidates = sortAssessments(f.Candidates)[:min(len(f.Candidates), MaxListedAssessments)]
	f.Preserved = sortAssessments(f.Preserved)[:min(len(f.Preserved), MaxListedAssessments)]
	ids = NormalizeIdentities(ids)
	f.CandidateWorkerIdentities = ids[:min(len(ids), MaxApprovableCandidates)]
	f.ProtectedActiveWorkflowOwners = NormalizeIdentities(f.ProtectedActiveWorkflowOwners)
	if len(f.PreservedReasonCounts) == 0 {
		f.PreservedReasonCounts = nil
	}
	f.Message = fmt.Sprintf("Dry run: %d of %d registrations are eligible; approve by copying the tokens and identities into spec.approval",
		f.CandidateCount, f.AssessedCount)
	if f.CandidateCount > MaxApprovableCandidates {
		f.Message = fmt.Sprintf("Dry run: %d registrations are eligible, more than the %d one approval can name; "+
			"candidateWorkerIdentities lists the first %d, which is what an approval of this plan retires",
			f.CandidateCount, MaxApprovableCandidates, MaxApprovableCandidates)
	}
	if n := uncovered.HostsWithoutAgent; n > 0 {
		f.Message += fmt.Sprintf("; %d host(s) without an agent, their rows preserved as %s (see hostsWithoutAgent)", n, ReasonHostBindingUnproven)
	}
	return f
}

// HostIdentities narrows an approval of a fleet plan to one host plan: the approved
// identities that are that host plan's candidates, sorted.
func HostIdentities(approved, hostCandidates []string) []string {
	mine := map[string]bool{}
	for _, id := range hostCandidates {
		mine[id] = true
	}
	var out []string
	for _, id := range NormalizeIdentities(approved) {
		if mine[id] {
			out = append(out, id)
		}
	}
	return out
}

// failureRank orders the outcomes of host plans that wrote nothing: the fleet plan
// reports the most serious one.
var failureRank = map[string]int{
	OutcomeTransactionFailed:     5,
	OutcomeRegistryRevisionMoved: 4,
	OutcomeCandidateSetMoved:     3,
	OutcomeApplied:               2,
	OutcomeAlreadyRetired:        1,
	OutcomeNothingRequested:      0,
}

// AggregateApply merges the apply results of a fleet plan's host plans. done is false
// while any host plan has no result yet. The report is the union: every retired row,
// every preserved one, summed counts. Its outcome is applied when any row was retired,
// and then interrupted (a partial apply, never a success) unless every host plan applied
// cleanly or had nothing to write; when nothing was retired it is the most serious host
// outcome (transaction_failed, registry_revision_moved, candidate_set_moved, applied,
// already_retired, nothing_requested). A host plan whose report a takeover completed
// from the rows makes the fleet report Recovered as well, so the fleet plan reads as an
// interrupted apply (reason ApplyInterrupted), never a success nor complete. message
// explains it: a single host plan's own message, or one line per host.
func AggregateApply(hosts []HostShare) (rep ApplyReport, message string, done bool) {
	if len(hosts) == 0 {
		return ApplyReport{Outcome: OutcomeNothingRequested, Detail: "no host has candidates: the approval names no worker identity"}, "", true
	}
	var details []string
	clean := true
	worst := ""
	for _, h := range hosts {
		a := h.Apply
		if a == nil {
			return ApplyReport{}, "", false
		}
		rep.Retired = append(rep.Retired, a.Retired...)
		rep.Preserved = append(rep.Preserved, a.Preserved...)
		rep.MutationPerformed = rep.MutationPerformed || a.MutationPerformed
		rep.Recovered = rep.Recovered || a.Recovered
		switch {
		case a.Outcome == OutcomeApplied && (a.Complete == nil || *a.Complete):
		case a.Outcome == OutcomeAlreadyRetired || a.Outcome == OutcomeNothingRequested:
		default:
			clean = false
		}
		if worst == "" || failureRank[a.Outcome] > failureRank[worst] {
			worst = a.Outcome
		}
		details = append(details, fmt.Sprintf("host %s (%s): %s", h.HostID, h.Plan, a.Message))
	}
	rep.Retired = NormalizeIdentities(rep.Retired)
	rep.RetiredCount = len(rep.Retired)
	rep.Preserved = sortAssessments(rep.Preserved)
	rep.MutationPerformed = rep.MutationPerformed || rep.RetiredCount > 0
	rep.Detail = strings.Join(details, "; ")
	switch {
	case rep.RetiredCount > 0:
		rep.Outcome, rep.Interrupted = OutcomeApplied, !clean
	default:
		rep.Outcome = worst
		rep.Interrupted = worst == OutcomeApplied && !clean
	}
	if len(hosts) == 1 {
		return rep, hosts[0].Apply.Message, true
	}
	return rep, fmt.Sprintf("Fleet apply over %d hosts, %d row(s) retired: %s", len(hosts), rep.RetiredCount, rep.Detail), true
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

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
// namespace's, like any host plan's.
func LostHostPlan(rows []Row, hostID, canonical, detail string) Plan {
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
		CandidateFingerprint:  CandidateFingerprint(nil, canonical),
		CanonicalRepository:   canonical,
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

// RegistryFingerprintBeforeSiblings is the registry fingerprint a host plan compares a
// registry-bound approval with. The approval names the whole namespace's registry as the
// fleet plan saw it, and the fleet's host plans apply at the same time: a sibling host
// plan's retirement of its own rows moves the registry between this host's plan and its
// fresh read, although nothing the approval bound has changed. So a row of another host
// that is Retired by fleetPlanRef (the namespace/name every host plan of that fleet plan
// writes into retiredBy) is counted in the only form a candidate can have had at plan
// time: Active and stale. Every other row counts as it is now.
//
// This cannot let a change through: the reverted row matches the plan-time fingerprint
// only if, at plan time, it was an Active, stale row with every other fingerprinted
// field as it is now, so the one change is its own retirement. A row retired by
// anything else, a row of this host, or a row that was live at plan time still moves
// the fingerprint.
func RegistryFingerprintBeforeSiblings(rows []Row, fleetPlanRef, hostID string) string {
	if fleetPlanRef == "" {
		return RegistryFingerprint(rows)
	}
	var before []Row
	for i := range rows {
		r := rows[i]
		if r.HostID != hostID && r.RetiredBy == fleetPlanRef && r.Phase == fleet.Retired {
			if before == nil {
				before = slices.Clone(rows)
			}
			r.Phase, r.OwnershipState = fleet.Active, fleet.Stale
			before[i] = r
		}
	}
	if before == nil {
		return RegistryFingerprint(rows)
	}
	return RegistryFingerprint(before)
}
