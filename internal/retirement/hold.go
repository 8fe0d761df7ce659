package retirement

import (
	"fmt"
	"time"
)

// Hold is an applier's hold on an apply: its instance id and the renewedAt it last
// wrote. Nobody else writes renewedAt, so a plan whose progress still shows both is still
// held by it: a takeover, even by an applier of the same id, writes a new renewedAt.
type Hold struct {
	Applier   string
	RenewedAt time.Time
}

// HeldBy says whether the recorded progress still shows hold h, with the apply under way.
func (p Progress) HeldBy(h Hold) bool {
	return p.State == ApplyInProgress && p.Applier == h.Applier && p.RenewedAt.Equal(h.RenewedAt)
}

// Hold is the hold the recorded progress shows: its applier and last renewal.
func (p Progress) Hold() Hold { return Hold{Applier: p.Applier, RenewedAt: p.RenewedAt} }

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

// MinTakeoverTimeout is the shortest takeover timeout a manager accepts. The applier
// renews its hold three times per timeout, each renewal a write of the host plan's
// status, which can carry thousands of intended rows; a shorter timeout would let a
// loaded API server's slow answer pass for a dead applier.
const MinTakeoverTimeout = 5 * time.Second

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
	// IntendedVersions and IntendedFingerprints are the resourceVersion and the
	// RowFingerprint of each intended row when it was read before the intent was
	// recorded, by name.
	IntendedVersions, IntendedFingerprints map[string]string
}

// What a takeover did with the apply it took over (status.applyProgress.takeover).
const (
	// TakeoverResumed: the taker wrote the remaining intended rows, each revalidated.
	TakeoverResumed = "Resumed"
	// TakeoverCompleted: the taker wrote no row and completed the report from the rows.
	TakeoverCompleted = "Completed"
)

// Applier actions: what a reconcile may do with a plan, given its recorded progress.
const (
	// ApplierStart: no apply started; the reconciler may record its intent and apply.
	ApplierStart = "Start"
	// ApplierWait: an apply holds the plan and renewed recently; change nothing.
	ApplierWait = "Wait"
	// ApplierTakeOver: the apply's hold lapsed; take it over, and resume it or complete
	// its report.
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
		holder = unnamedApplier
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
	c := base
	if most := MaxRenewInterval(timeout); c.Interval <= 0 || c.Interval > most {
		c.Interval = most
	}
	return c
}

// MaxRenewInterval is the longest a running apply may go between two renewals of its
// hold: a third of the takeover timeout (zero: DefaultTakeoverTimeout). The hold is
// renewed between two rows, so a pace of row writes slower than this could let it lapse.
func MaxRenewInterval(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		timeout = DefaultTakeoverTimeout
	}
	return timeout / 3
}

// StandInTakeoverTimeout is how long the stand-in for a lost host's agent waits for an
// apply's hold to lapse before it takes the apply over: twice the takeover timeout. The
// stand-in cannot probe the host's processes, so it can only complete the report; the
// host's own agent, when it comes back within that time (a restarted process, a
// rescheduled pod), takes the apply over first and resumes it.
func StandInTakeoverTimeout(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		timeout = DefaultTakeoverTimeout
	}
	return 2 * timeout
}
