package retirement

// A host plan's view of its fleet plan: the plan narrowed to the host's rows (the fleet
// plan's approval narrowed to the host's candidates is HostIdentities, approver.go).

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
	out.CandidateFingerprint = CandidateFingerprint(candRows, p.CanonicalBinding)
	return out
}
