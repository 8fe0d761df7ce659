package retirement

import "fmt"

// Size limits of what a plan lists. Counts are always complete.
const (
	// MaxListedAssessments bounds the candidates and preserved entries a plan's status
	// lists with their evidence: a preview a person can read, and a status every write
	// and every watch event carries cheaply. The plan's pages hold every row.
	MaxListedAssessments = 100
	// MaxListedBlockers bounds the blockers a fleet snapshot lists (blockerCount is
	// complete).
	MaxListedBlockers = 500
	// MaxApprovableCandidates is the most identities one approval can name (the API's
	// limit on spec.approval.workerIdentities).
	MaxApprovableCandidates = 2000
)

// Condition reasons of a RetirementPlan. The API re-exports them.
const (
	// ConditionPlanned: a dry-run plan is in status.
	ConditionPlanned = "Planned"
	// ConditionAwaitingApproval: spec.approval is unset.
	ConditionAwaitingApproval = "AwaitingApproval"
	// ConditionApprovalMatches: the approval repeats the plan exactly and the approver
	// holds the approve verb.
	ConditionApprovalMatches = "ApprovalMatchesPlan"
	// ConditionApprovalMismatch: a token or the identity list differs from the plan.
	ConditionApprovalMismatch = "ApprovalMismatch"
	// ConditionApproverNotAuthorized: the approver (approvedBy with approvedGroups) lacks
	// the approve verb; it is looked at again with a growing interval. The reasons about
	// the guarding policy and a worker as approver are in approver.go.
	ConditionApproverNotAuthorized = "ApproverNotAuthorized"
	// ConditionApplying: the approval matches and the plan is being applied (Ready=False,
	// Reconciling=True until the apply's report is written).
	ConditionApplying = "Applying"
	// ConditionApplySucceeded: every requested row was retired or preserved, with no
	// interruption.
	ConditionApplySucceeded = "ApplySucceeded"
	// ConditionApplyResumed: the applier stopped, and a takeover on the rows' host resumed
	// the apply and went through every remaining row, each revalidated.
	ConditionApplyResumed = "ApplyResumed"
	// ConditionNothingToApply: every requested row was already retired, or nothing was
	// requested; nothing needed writing.
	ConditionNothingToApply = "NothingToApply"
	// ConditionApplyPartial: the apply stopped part-way; see status.applyPreserved.
	ConditionApplyPartial = "ApplyPartial"
	// ConditionApplyRefused: the apply wrote nothing because the registry or the
	// candidate set moved since the plan.
	ConditionApplyRefused = "ApplyRefused"
	// ConditionApplyFailed: transaction_failed; nothing was retired.
	ConditionApplyFailed = "ApplyFailed"
)

// PlanListing is what a plan's status lists: the bounded assessments, the identities an
// approval can name, and the message for people.
type PlanListing struct {
	// Candidates and Preserved are the first MaxListedAssessments assessments of each.
	Candidates, Preserved []Assessment
	// ApprovableIdentities are the candidate identities an approval can name (the first
	// MaxApprovableCandidates, sorted).
	ApprovableIdentities []string
	// Message explains the plan.
	Message string
}

// ListPlan bounds a plan for its status.
func ListPlan(p Plan) PlanListing {
	l := PlanListing{
		Candidates:           p.Candidates[:min(len(p.Candidates), MaxListedAssessments)],
		Preserved:            p.Preserved[:min(len(p.Preserved), MaxListedAssessments)],
		ApprovableIdentities: p.CandidateWorkerIdentities,
		Message: fmt.Sprintf("Dry run: %d of %d registrations are eligible; approve by copying the tokens and identities into spec.approval",
			p.CandidateCount, p.AssessedCount),
	}
	if len(p.Candidates) > MaxListedAssessments || len(p.Preserved) > MaxListedAssessments {
		l.Message += fmt.Sprintf(" (evidence listed for the first %d candidates and preserved rows; counts are complete)", MaxListedAssessments)
	}
	if len(p.CandidateWorkerIdentities) > MaxApprovableCandidates {
		l.ApprovableIdentities = p.CandidateWorkerIdentities[:MaxApprovableCandidates]
		l.Message = fmt.Sprintf("Dry run: %d registrations are eligible, more than the %d one approval can name; "+
			"candidateWorkerIdentities lists the first %d, which is what an approval of this plan retires",
			p.CandidateCount, MaxApprovableCandidates, MaxApprovableCandidates)
	}
	return l
}

// ApprovalVerdict is how a plan reads once an approval is present.
type ApprovalVerdict struct {
	// Approved gates apply.
	Approved bool
	// Final is true when the approval can never match: spec.approval is set once, so a
	// mismatch stays a mismatch.
	Final bool
	// Reason is one of the Condition* approval reasons.
	Reason string
	// Message explains the verdict.
	Message string
}

// ApplyVerdict is how an apply report reads in status.
type ApplyVerdict struct {
	// Succeeded is true when the apply reached its end without interruption or refusal;
	// it is what Ready and Applied report.
	Succeeded bool
	// Applied is the Applied condition: true only for a clean applied run.
	Applied bool
	// Success is status.success: true only for a run that was not interrupted and did
	// not fail (a partial apply is never a success, though its retired rows stay retired).
	Success bool
	// Complete is status.applyComplete: set for the applied outcome (a resumed apply's
	// included) and for an interrupted apply whose report a takeover completed (always
	// false then).
	Complete *bool
	// Reason is one of the Condition* apply reasons.
	Reason string
	// Message explains the report.
	Message string
	// ApprovalOutdated is true when the apply was refused because the approval no longer
	// matches the registry or the candidate set: Approved turns False then.
	ApprovalOutdated bool
}

// JudgeApply reads an apply report. Only a clean applied run, or a replay that had
// nothing to write, succeeds; a partial run, a refusal and a failure are final failures.
func JudgeApply(rep ApplyReport) ApplyVerdict {
	complete := func(b bool) *bool { return &b }
	v := ApplyVerdict{Success: rep.Outcome != OutcomeTransactionFailed && !rep.Interrupted}
	switch {
	case rep.Recovered:
		v.Success = false
		v.Reason, v.Complete = ConditionApplyInterrupted, complete(false)
		v.Message = fmt.Sprintf("Interrupted apply: %d row(s) retired before the applier stopped; %s; see applyPreserved for the rest", rep.RetiredCount, rep.Detail)
	case rep.Outcome == OutcomeTransactionFailed:
		v.Reason, v.Message = ConditionApplyFailed, "Nothing was retired: "+rep.Detail
	case rep.Resumed && rep.Outcome == OutcomeApplied && !rep.Interrupted:
		v.Succeeded, v.Reason, v.Complete = true, ConditionApplyResumed, complete(true)
		v.Message = fmt.Sprintf("Applied after a takeover: %d row(s) retired, %d requested row(s) preserved; %s", rep.RetiredCount, len(rep.Preserved), rep.Detail)
	case rep.Outcome == OutcomeApplied && rep.Interrupted:
		v.Reason, v.Complete = ConditionApplyPartial, complete(false)
		v.Message = fmt.Sprintf("Partial apply: %d row(s) retired before the apply stopped (%s); see applyPreserved for the rest", rep.RetiredCount, rep.Detail)
	case rep.Outcome == OutcomeApplied:
		v.Succeeded, v.Reason, v.Complete = true, ConditionApplySucceeded, complete(true)
		v.Message = fmt.Sprintf("Applied: %d row(s) retired, %d requested row(s) preserved", rep.RetiredCount, len(rep.Preserved))
	case rep.Outcome == OutcomeAlreadyRetired || rep.Outcome == OutcomeNothingRequested:
		v.Succeeded, v.Reason = true, ConditionNothingToApply
		v.Message = fmt.Sprintf("Nothing was written (%s): %s", rep.Outcome, rep.Detail)
	default:
		v.Reason = ConditionApplyRefused
		v.Message = fmt.Sprintf("Nothing was written (%s): %s", rep.Outcome, rep.Detail)
	}
	v.Applied = v.Reason == ConditionApplySucceeded || v.Reason == ConditionApplyResumed
	v.ApprovalOutdated = v.Reason == ConditionApplyRefused
	return v
}
