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
// write (the intent). Only the writer of that intent writes rows. It renews its hold as
// it goes; a hold not renewed within the takeover timeout may be taken over, and the
// taker completes the report from what the rows show. It writes no row itself.
//
// Why complete rather than resume: resuming the writes would need every safety check of
// the apply to be run again against a fresh plan (registry, candidate set, fence,
// liveness, approver). The rows already retired moved the registry and the candidate
// set, so that fresh plan no longer is the plan the approval names, and nothing
// approved the rest of the writes under it. Completing is always truthful; the rows left
// Active stay eligible for a new plan.

// Apply states (status.applyProgress.state).
const (
	// ApplyInProgress: an applier recorded its intent and may be writing rows.
	ApplyInProgress = "InProgress"
	// ApplyFinished: the report is written; nothing more happens to the plan.
	ApplyFinished = "Finished"
)

// ReasonApplyInterrupted keeps the rows an interrupted apply did not retire: the report
// was completed from what the rows show after the applier stopped renewing its hold.
const ReasonApplyInterrupted = "apply_interrupted"

// ConditionApplyInterrupted: the applier stopped before writing its report; a takeover
// completed the report from the rows (Ready=False, Stalled=True).
const ConditionApplyInterrupted = "ApplyInterrupted"

// DefaultTakeoverTimeout is how long an apply's hold lasts without renewal before
// another applier may take it over.
const DefaultTakeoverTimeout = 60 * time.Second

// Progress is an apply's recorded intent and hold (status.applyProgress).
type Progress struct {
	// State is ApplyInProgress or ApplyFinished; "" means no apply started.
	State string
	// Applier is the instance id of the applier that holds the apply.
	Applier string
	// StartedAt is when the intent was recorded (whole seconds, as the API stores it).
	StartedAt time.Time
	// RenewedAt is the holder's last renewal.
	RenewedAt time.Time
	// Intended names the rows the applier set out to write, sorted.
	Intended []string
}

// Applier actions: what a reconcile may do with a plan, given its recorded progress.
const (
	// ApplierStart: no apply started; the reconciler may record its intent and apply.
	ApplierStart = "Start"
	// ApplierWait: an apply holds the plan and renewed recently; change nothing.
	ApplierWait = "Wait"
	// ApplierTakeOver: the apply's hold lapsed; take it over and complete the report.
	ApplierTakeOver = "TakeOver"
	// ApplierDone: the report is written.
	ApplierDone = "Done"
)

// ApplierDecision says what a reconcile may do with a plan.
type ApplierDecision struct {
	// Action is one of the Applier* actions.
	Action string
	// After is, for ApplierWait, when to look again (the hold's remaining time).
	After time.Duration
	// Detail explains the decision.
	Detail string
}

// DecideApplier says whether the reconciler me may start an apply, must wait, or may
// take over, at now, with takeover timeout timeout (zero or less:
// DefaultTakeoverTimeout).
//
// An apply in progress is held while its renewal is younger than the timeout, whoever
// holds it, me included: within one process a plan's reconciles never overlap, so a
// hold of mine found at the start of a reconcile is an attempt that stopped (its final
// write was lost), and it is completed through the same takeover as anyone's. A state
// that is neither known value fails closed as a hold.
func DecideApplier(p Progress, me string, now time.Time, timeout time.Duration) ApplierDecision {
	if timeout <= 0 {
		timeout = DefaultTakeoverTimeout
	}
	switch p.State {
	case "":
		return ApplierDecision{Action: ApplierStart, Detail: "no apply has started"}
	case ApplyFinished:
		return ApplierDecision{Action: ApplierDone, Detail: "the apply finished and its report is written"}
	}
	holder := p.Applier
	if holder == "" {
		holder = "an unnamed applier"
	}
	expires := p.RenewedAt.Add(timeout)
	if now.Before(expires) {
		after := min(expires.Sub(now), timeout) // a renewal stamped ahead of this clock waits at most one timeout per look
		who := holder
		if p.Applier == me {
			who = "this applier (an earlier attempt)"
		}
		return ApplierDecision{Action: ApplierWait, After: after,
			Detail: fmt.Sprintf("the apply is held by %s, renewed at %s; it may be taken over after %s", who,
				p.RenewedAt.UTC().Format(time.RFC3339), expires.UTC().Format(time.RFC3339))}
	}
	return ApplierDecision{Action: ApplierTakeOver,
		Detail: fmt.Sprintf("the apply held by %s was last renewed at %s, more than %s ago", holder,
			p.RenewedAt.UTC().Format(time.RFC3339), timeout)}
}

// RenewCadence is how often a running apply renews its hold: as often as the approver
// is re-checked (base), and at least three times per takeover timeout, so a hold never
// lapses while its applier is writing.
func RenewCadence(base Recheck, timeout time.Duration) Recheck {
	if timeout <= 0 {
		timeout = DefaultTakeoverTimeout
	}
	c := base
	if c.Interval <= 0 || c.Interval > timeout/3 {
		c.Interval = timeout / 3
	}
	return c
}

// Interrupted is what a takeover knows when it completes the report of an apply that
// stopped: the recorded progress, the identities the approval requested, the plan's
// reference as rows carry it in retiredBy ("namespace/name"), and the rows as read
// straight from the API server after the takeover.
type Interrupted struct {
	Progress  Progress
	Requested []string
	PlanRef   string
	Rows      []Row
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
		holder = "an unnamed applier"
	}
	rep := ApplyReport{
		Retired:     retired,
		Preserved:   sortAssessments(preserved),
		Interrupted: true,
		Recovered:   true,
		Detail: fmt.Sprintf("the apply held by %s stopped before writing its report (last renewed %s); the report was completed from the rows: %d of %d intended row(s) carry this plan's retirement",
			holder, in.Progress.RenewedAt.UTC().Format(time.RFC3339), len(retired), len(intended)),
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
