package apiconv

import (
	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// AssessmentsOf reads listed assessments back into the retirement package's terms.
func AssessmentsOf(in []fleetv1alpha1.WorkerAssessment) []retirement.Assessment {
	if len(in) == 0 {
		return nil
	}
	out := make([]retirement.Assessment, len(in))
	for i, a := range in {
		out[i] = retirement.Assessment{WorkerIdentity: a.WorkerIdentity, ReasonCode: a.ReasonCode, Detail: a.Detail, Evidence: a.Evidence}
	}
	return out
}

// HostShare reads a fleet plan's entry for one host, and that host's plan (nil when it
// does not exist yet), as the fleet aggregate sees them. A host plan without an outcome
// yet gives a share without one; one with an apply outcome carries its apply result.
func HostShare(entry fleetv1alpha1.HostPlanStatus, child *fleetv1alpha1.RetirementPlan) retirement.HostShare {
	sh := retirement.HostShare{HostID: entry.HostID, Plan: entry.Plan, Agent: entry.Agent}
	if child == nil {
		return sh
	}
	s := child.Status
	sh.Outcome = s.Outcome
	sh.CanonicalRepository = s.CanonicalRepository
	sh.Candidates, sh.Preserved = AssessmentsOf(s.Candidates), AssessmentsOf(s.Preserved)
	sh.CandidateIdentities = s.CandidateWorkerIdentities
	sh.AssessedCount, sh.CandidateCount, sh.PreservedCount = int(s.AssessedCount), int(s.CandidateCount), int(s.PreservedCount)
	sh.PreservedReasonCounts = make(map[string]int, len(s.PreservedReasonCounts))
	for k, v := range s.PreservedReasonCounts {
		sh.PreservedReasonCounts[k] = int(v)
	}
	sh.CandidateFingerprint = s.CandidateFingerprint
	sh.ProtectedActiveWorkflowOwners = s.ProtectedActiveWorkflowOwners
	if s.Outcome != "" && s.Outcome != retirement.OutcomePlanned {
		sh.Apply = &retirement.HostApply{
			Outcome: s.Outcome, Retired: s.Retired, RetiredCount: int(s.RetiredCount), Preserved: AssessmentsOf(s.ApplyPreserved),
			MutationPerformed: s.MutationPerformed, Complete: s.ApplyComplete, Message: s.Message,
			Recovered: takenOver(s.ApplyProgress) && s.ApplyProgress.Takeover != retirement.TakeoverResumed,
			Resumed:   takenOver(s.ApplyProgress) && s.ApplyProgress.Takeover == retirement.TakeoverResumed,
		}
	}
	return sh
}

// Page stores one page's verdicts compacted (retirement.CompactPage): the block every row
// shares, and each row's own fields.
func Page(rows []retirement.Assessment) (*fleetv1alpha1.PageShared, []fleetv1alpha1.PageRow) {
	shared, own := retirement.CompactPage(rows)
	out := make([]fleetv1alpha1.PageRow, len(own))
	for i, a := range own {
		out[i] = fleetv1alpha1.PageRow{WorkerIdentity: a.WorkerIdentity, ReasonCode: a.ReasonCode, Detail: a.Detail, Evidence: a.Evidence}
	}
	var s *fleetv1alpha1.PageShared
	if shared.ReasonCode != "" || shared.Detail != "" || len(shared.Evidence) > 0 {
		s = &fleetv1alpha1.PageShared{ReasonCode: shared.ReasonCode, Detail: shared.Detail, Evidence: shared.Evidence}
	}
	return s, out
}

// PageVerdicts is every row's full verdict on a page (retirement.ExpandPage).
func PageVerdicts(page *fleetv1alpha1.RetirementPlanPage) []retirement.Assessment {
	var shared retirement.Assessment
	if s := page.Shared; s != nil {
		shared = retirement.Assessment{ReasonCode: s.ReasonCode, Detail: s.Detail, Evidence: s.Evidence}
	}
	own := make([]retirement.Assessment, len(page.Rows))
	for i, r := range page.Rows {
		own[i] = retirement.Assessment{WorkerIdentity: r.WorkerIdentity, ReasonCode: r.ReasonCode, Detail: r.Detail, Evidence: r.Evidence}
	}
	return retirement.ExpandPage(shared, own)
}

// takenOver says whether a finished apply was taken over from an applier that stopped.
func takenOver(p *fleetv1alpha1.ApplyProgress) bool {
	return p != nil && p.TakenOverFrom != "" && p.State == retirement.ApplyFinished
}
