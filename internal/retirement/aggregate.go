package retirement

import (
	"fmt"
	"sort"
	"strings"
)

// A fleet plan covers a namespace whose workers run on several hosts. Liveness can only
// be proven on a worker's own host, so each host's agent plans and applies that host's
// rows in a host plan, and the fleet plan is the aggregate of its host plans and of the
// rows no host plan covers. Everything here is a pure function of those inputs, so the
// fleet plan reads the same whichever agent computed it.

// MaxFleetHosts bounds the hosts a fleet plan lists (hosts and hostsWithoutAgent).
const MaxFleetHosts = 256

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
	// Resumed is true when a takeover on the host resumed the host plan's apply
	// (Applied reason ApplyResumed, or ApplyPartial if the resumption stopped early).
	Resumed bool
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
// interrupted apply (reason ApplyInterrupted), never a success nor complete; one whose
// apply a takeover resumed makes it Resumed (reason ApplyResumed when clean). message
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
		rep.Resumed = rep.Resumed || a.Resumed
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
