package retirementplan

import (
	"context"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// An apply of an approved host plan (hostStep, hostplan.go) runs in layers, each in its
// own file, in this order:
//
//   - apply (this file) re-reads everything the decision rests on (the fence, the
//     registrations, the recorded approval) and decides again; everything refused here
//     is a report, and nothing has been written;
//   - recordIntent (intent.go) records, by compare-and-swap, that this applier starts
//     the apply: only the winner writes rows;
//   - retireRows (rows.go) writes the rows, each guarded by its resourceVersion, renewing
//     the hold as it goes;
//   - finish (report.go) writes the report, once and by the holder only, or records that
//     this applier stood back for another. A takeover (settleApply, intent.go), which
//     resumes the apply through retireRows or completes its report, ends there too.

// applyRun is what one apply attempt did.
type applyRun struct {
	report retirement.ApplyReport
	post   *fleetv1alpha1.PostApply
	// hold is set once the intent was recorded: the report is then written only while
	// the plan still shows this hold.
	hold *retirement.Hold
	// stoodBack is set when another applier holds (or finished) the apply: this attempt
	// wrote nothing and writes no report.
	stoodBack *standing
	// settled is set when the apply turned out finished already: nothing to do.
	settled bool
	// halt is set when the attempt stopped without a report: its intent could not be
	// recorded (nothing was written), the AfterWrite seam abandoned it
	// (ErrApplyAbandoned), or its hold was lost or could not be renewed. After the intent,
	// a takeover completes the report once the hold lapses.
	halt error
}

// standing says at which stage an applier stood back for another, and why.
type standing struct {
	stage    string
	decision retirement.ApplierDecision
}

// apply re-reads everything, re-decides, records its intent, and retires each surviving
// row with a resourceVersion-guarded write. Every failure before the intent is a report;
// after it, only a stop that leaves the plan held (see applyRun.halt) is not.
func (r *HostPlanReconciler) apply(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) applyRun {
	failed := func(detail string) retirement.ApplyReport {
		return retirement.ApplyReport{Outcome: retirement.OutcomeTransactionFailed, Detail: detail}
	}
	ref := retiredBy(plan)
	// The fence is read before the authoritative read, so a claim acquired at any point
	// after it is seen before the next write.
	// model: apply.pml step A1 (fence read before the authoritative read)
	fence, err := r.Fence.Read(ctx, plan.Namespace)
	if err != nil {
		return applyRun{report: failed(err.Error())}
	}
	// model: apply.pml step A2 (authoritative read, fresh plan, DecideApply)
	fresh, err := r.assess(ctx, plan)
	if err != nil {
		return applyRun{report: failed(err.Error())}
	}
	rows := apiconv.Rows(fresh.items)
	if plan.Spec.HostID != "" {
		// The fleet's other host plans apply at the same time; their retirements are
		// not a move of the registry this host's approval bound.
		fresh.plan.RegistryFingerprint = retirement.RegistryFingerprintBeforeSiblings(rows, ref, plan.Spec.HostID)
	}
	approval := apiconv.Approval(plan.Status.HostApproval)
	decision := retirement.DecideApply(approval, fresh.plan, rows)
	if !decision.Proceed {
		return applyRun{report: retirement.Summarize(decision, nil, nil, ""), post: r.snapshot(ctx, plan.Namespace)}
	}
	if ok, why := r.stillApproved(ctx, plan); !ok {
		return applyRun{report: failed("the approval is no longer honoured, nothing was retired: " + why), post: r.snapshot(ctx, plan.Namespace)}
	}
	hold, d, err := r.recordIntent(ctx, plan, decision.Retire, fresh.items)
	switch {
	case err != nil: // nothing was written; the next attempt starts afresh
		return applyRun{halt: err}
	case hold == nil:
		return applyRun{stoodBack: &standing{stage: "intent", decision: d}}
	}
	w := r.retireRows(ctx, plan, ref, hold, fresh.items, decision.Retire, fence)
	if w.halt != nil {
		return applyRun{halt: w.halt}
	}
	preserved, interruption := w.preserved, ""
	if w.stop != nil {
		interruption = w.stop.interruption
		preserved = append(preserved, retirement.UntouchedAssessments(decision.Retire[w.stop.at:], w.stop.reason, interruption)...)
	}
	return applyRun{report: retirement.Summarize(decision, w.retired, preserved, interruption), post: r.snapshot(ctx, plan.Namespace), hold: hold}
}
