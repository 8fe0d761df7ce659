package retirement

import (
	"fmt"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// One applier per plan. Kubernetes has no multi-object transaction, so an apply that
// dies between two row writes (a crash, a failover, a lost final status write) cannot be
// rolled back. Instead the plan records, in one compare-and-swap write of its status
// before the first row write, that the apply started, who runs it and which rows it will
// write, each with the resourceVersion it was read at (the intent). Only the holder of
// that record writes rows. It renews its hold as it goes; a hold not renewed within the
// takeover timeout may be taken over.
//
// A takeover on the rows' own host resumes the apply (DecideResume): the approval is
// judged again, the workflow fence and the rows are read afresh, and each remaining row
// is written only if it is still the row the first applier read (its fingerprint, the
// fields the approval covers; a row changed since is kept as row_changed_since_plan),
// still a candidate of a plan computed from that fresh read, and shown gone by a new
// liveness probe right before its write, which carries the resourceVersion of the fresh
// read. A row this apply retired is counted and never written again. That is every
// check the first applier made for that row; the registry and candidate fingerprints
// are not compared again, because the rows already retired moved them, and the per-row
// fingerprint is what they protected between the plan and the write. A takeover that cannot re-probe (the stand-in of a lost host's agent) or whose
// approval is no longer honoured writes no row: it completes the report from what the
// rows show (CompleteInterrupted).

// Interrupted is what a takeover knows when it completes the report of an apply that
// stopped: the recorded progress, the identities the approval requested, the plan's
// reference as rows carry it in retiredBy ("namespace/name"), and the rows as read
// straight from the API server after the takeover.
type Interrupted struct {
	Progress  Progress
	Requested []string
	PlanRef   string
	Rows      []Row
	// NotResumed says why the takeover did not resume the apply, when it could have.
	NotResumed string
}

// CompleteInterrupted builds the report of an apply that stopped before writing it,
// from what the rows show. An intended row counts as retired by this apply only when it
// is Retired, names this plan in retiredBy, and was retired at or after the intent was
// recorded (both in whole seconds: a plan of the same name before this one does not
// count); every other intended row is preserved as apply_interrupted. A requested
// identity the apply never intended to write is preserved as not_in_candidate_set.
//
// The outcome is applied when at least one row was retired, else transaction_failed;
// the report is always Interrupted and Recovered, so it is never a success nor complete.
func CompleteInterrupted(in Interrupted) ApplyReport {
	byName := make(map[string]*Row, len(in.Rows))
	for i := range in.Rows {
		byName[in.Rows[i].Name] = &in.Rows[i]
	}
	started := in.Progress.StartedAt.Truncate(time.Second)
	intended := NormalizeIdentities(in.Progress.Intended)
	isIntended := make(map[string]bool, len(intended))
	var retired []string
	var preserved []Assessment
	for _, id := range intended {
		isIntended[id] = true
		r := byName[id]
		if ok, why := retiredByThisApply(r, in.PlanRef, started); ok {
			retired = append(retired, id)
		} else {
			ev := map[string]string{}
			if r != nil {
				ev[EvidencePhase], ev[EvidenceOwnershipState] = r.Phase, r.OwnershipState
			}
			preserved = append(preserved, Assessment{WorkerIdentity: id, ReasonCode: ReasonApplyInterrupted, Evidence: ev,
				Detail: "the apply was interrupted before this row was retired (" + why + "); a new plan retires it if it is still eligible"})
		}
	}
	for _, id := range NormalizeIdentities(in.Requested) {
		if !isIntended[id] {
			preserved = append(preserved, Assessment{WorkerIdentity: id, ReasonCode: ReasonNotInCandidateSet,
				Detail: "not among the rows the interrupted apply set out to write"})
		}
	}
	holder := in.Progress.Applier
	if holder == "" {
		holder = unnamedApplier
	}
	rep := ApplyReport{
		Retired:     retired,
		Preserved:   sortAssessments(preserved),
		Interrupted: true,
		Recovered:   true,
		Detail: fmt.Sprintf("the apply held by %s stopped before writing its report (last renewed %s); the report was completed from the rows: %d of %d intended row(s) carry this plan's retirement",
			holder, in.Progress.RenewedAt.UTC().Format(time.RFC3339), len(retired), len(intended)),
	}
	if in.NotResumed != "" {
		rep.Detail += "; it was not resumed: " + in.NotResumed
	}
	rep.RetiredCount = len(rep.Retired)
	rep.MutationPerformed = rep.RetiredCount > 0
	rep.Outcome = OutcomeTransactionFailed
	if rep.MutationPerformed {
		rep.Outcome = OutcomeApplied
	}
	return rep
}

// retiredByThisApply says whether row r carries the retirement written by the apply of
// planRef that started at started, and if not, why.
func retiredByThisApply(r *Row, planRef string, started time.Time) (bool, string) {
	switch {
	case r == nil:
		return false, "the registration no longer exists"
	case r.Phase != fleet.Retired:
		return false, "the registration is still " + r.Phase
	case r.RetiredBy != planRef:
		return false, fmt.Sprintf("the registration was retired by %q, not by this plan", r.RetiredBy)
	}
	at, err := time.Parse(time.RFC3339, r.RetiredAt)
	switch {
	case err != nil:
		return false, fmt.Sprintf("the registration names this plan but its retiredAt %q cannot be read", r.RetiredAt)
	case at.Truncate(time.Second).Before(started):
		return false, fmt.Sprintf("the registration was retired at %s, before this apply started at %s (an earlier plan of the same name)",
			at.UTC().Format(time.RFC3339), started.UTC().Format(time.RFC3339))
	}
	return true, ""
}

// Resumption is what a takeover on the rows' own host knows when it resumes an apply: the
// recorded progress (the hold it took over, the intended rows and their
// resourceVersions), the identities the approval requested, the plan's reference as rows
// carry it in retiredBy, the rows read straight from the API server after the workflow
// fence was read, with their resourceVersions by name, and the plan computed afresh from
// that read (BuildPlan with the task claims listed after the fence read and a new
// liveness probe of every row, narrowed to the host).
type Resumption struct {
	Progress  Progress
	Requested []string
	PlanRef   string
	Rows      []Row
	Versions  map[string]string
	Fresh     Plan
	// NotResumed, when set, says why the taker may not resume the apply whatever the rows
	// show (its approval is no longer honoured): the decision then completes the report.
	NotResumed string
}

// ResumeDecision is what a takeover may do with the remaining rows of an apply.
type ResumeDecision struct {
	// Resumable is false when the apply cannot be resumed (Detail says why): the
	// takeover then writes Report, completed from the rows (CompleteInterrupted), instead.
	Resumable bool
	Detail    string
	Report    ApplyReport
	// Retired are the intended rows the apply retired before the takeover.
	Retired []string
	// Retire are the remaining rows to write, in identity order, as freshly read: each
	// still at the resourceVersion recorded in the intent, and a candidate of the fresh
	// plan. The caller still re-probes each right before its guarded write
	// (RecheckBeforeWrite) and checks the fence between writes.
	Retire []Row
	// Preserved holds every other requested row with its reason.
	Preserved []Assessment
}

// DecideResume decides what a takeover writes when it resumes an apply. An intended row
// that carries this apply's retirement counts as retired (it is never written again).
// Any other intended row is written only if it is still the row the first applier read:
// the same resourceVersion, or a newer one with the same RowFingerprint (a write that
// changed nothing the approval covers, such as a condition the coordinator set while
// the host had no agent). A row deleted or changed since is kept as
// row_changed_since_plan. It must also be a candidate of the fresh plan (else
// not_in_candidate_set, with the fresh plan's reason in its evidence). A requested
// identity the apply never intended to write stays not_in_candidate_set.
//
// The apply cannot be resumed when the intent does not record the resourceVersion and
// fingerprint of every intended row: without them nothing shows that a row is still the
// one approved.
func DecideResume(in Resumption) ResumeDecision {
	if why := notResumable(in); why != "" {
		return ResumeDecision{Detail: why, Report: CompleteInterrupted(Interrupted{
			Progress: in.Progress, Requested: in.Requested, PlanRef: in.PlanRef, Rows: in.Rows, NotResumed: why})}
	}
	intended := NormalizeIdentities(in.Progress.Intended)
	byName := make(map[string]*Row, len(in.Rows))
	for i := range in.Rows {
		byName[in.Rows[i].Name] = &in.Rows[i]
	}
	candidates := make(map[string]bool, len(in.Fresh.Candidates))
	for _, a := range in.Fresh.Candidates {
		candidates[a.WorkerIdentity] = true
	}
	freshPreserved := make(map[string]Assessment, len(in.Fresh.Preserved))
	for _, a := range in.Fresh.Preserved {
		if _, dup := freshPreserved[a.WorkerIdentity]; !dup {
			freshPreserved[a.WorkerIdentity] = a
		}
	}
	started := in.Progress.StartedAt.Truncate(time.Second)
	d := ResumeDecision{Resumable: true}
	isIntended := make(map[string]bool, len(intended))
	for _, id := range intended {
		isIntended[id] = true
		r := byName[id]
		if ok, _ := retiredByThisApply(r, in.PlanRef, started); ok {
			d.Retired = append(d.Retired, id)
			continue
		}
		was := in.Progress.IntendedVersions[id]
		switch now := in.Versions[id]; {
		case r == nil:
			d.Preserved = append(d.Preserved, Assessment{WorkerIdentity: id, ReasonCode: ReasonRowChangedSincePlan,
				Detail: "the registration was deleted after the apply read it, so it is not the row that was approved"})
		case now != was && !RowUnchanged(in.Progress.IntendedFingerprints[id], *r):
			d.Preserved = append(d.Preserved, Assessment{WorkerIdentity: id, ReasonCode: ReasonRowChangedSincePlan,
				Evidence: map[string]string{EvidencePhase: r.Phase, EvidenceOwnershipState: r.OwnershipState},
				Detail:   fmt.Sprintf("the registration changed after the apply read it (resourceVersion %s, now %s, and its fingerprint differs), so the resumed apply did not write it", was, now)})
		case !candidates[id]:
			a, planned := freshPreserved[id]
			d.Preserved = append(d.Preserved, notInCandidateSet(id, "when the apply was resumed", a, planned))
		default:
			d.Retire = append(d.Retire, *r)
		}
	}
	for _, id := range NormalizeIdentities(in.Requested) {
		if !isIntended[id] {
			d.Preserved = append(d.Preserved, Assessment{WorkerIdentity: id, ReasonCode: ReasonNotInCandidateSet,
				Detail: "not among the rows the interrupted apply set out to write"})
		}
	}
	sortAssessments(d.Preserved)
	return d
}

// notResumable says why an apply cannot be resumed before its rows are looked at: the
// taker's own reason, or an intent that does not record the resourceVersion and
// fingerprint of every intended row (nothing would show that a row is still the one
// approved).
func notResumable(in Resumption) string {
	if in.NotResumed != "" {
		return in.NotResumed
	}
	for _, id := range NormalizeIdentities(in.Progress.Intended) {
		if in.Progress.IntendedVersions[id] == "" || in.Progress.IntendedFingerprints[id] == "" {
			return fmt.Sprintf("the intent records no resourceVersion or fingerprint for %q, so nothing shows the row is still the one approved", id)
		}
	}
	return ""
}

// SummarizeResume is the report of a resumed apply: the rows retired before the
// takeover and by the resumption, every other requested row with its reason. takenFrom
// is the applier whose hold lapsed and resumer the one that resumed. interruption, when
// the resumption itself stopped early, makes the report a partial one, as for a first
// applier (Summarize).
func SummarizeResume(d ResumeDecision, retired []string, preserved []Assessment, interruption, takenFrom, resumer string) ApplyReport {
	all := append(append([]Assessment(nil), d.Preserved...), preserved...)
	rep := Summarize(ApplyDecision{Proceed: true}, append(append([]string(nil), d.Retired...), retired...), all, interruption)
	rep.Resumed = true
	if takenFrom == "" {
		takenFrom = unnamedApplier
	}
	rep.Detail = fmt.Sprintf("%s resumed the apply held by %s, which stopped renewing it: %d row(s) were retired before the takeover and %d after",
		resumer, takenFrom, len(d.Retired), len(retired)) + suffix(interruption)
	return rep
}

func suffix(interruption string) string {
	if interruption == "" {
		return ""
	}
	return "; " + interruption
}

// unnamedApplier stands for a holder whose record names no applier.
const unnamedApplier = "an unnamed applier"
