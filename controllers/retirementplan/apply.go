package retirementplan

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// The apply of an approved host plan, the last stage of its step (hostStep,
// hostplan.go). A fresh apply and the takeover of one another applier left go the same
// way, in this order:
//
//   - the hold: a lapsed one is taken over (takeOver, intent.go);
//   - the approval, judged again (hostapproval.go). A plan that has not recorded the
//     fleet plan's approval records it first, and the step comes back here;
//   - the workflow fence, then the authoritative read of the rows (gather.go);
//   - the decision. A fresh apply decides with DecideApply and then records its intent
//     (recordIntent, intent.go): only the winner of that write writes rows. A takeover
//     decides with DecideResume: resume, or complete the report from the rows, writing
//     no row;
//   - the row writes (rows.go), each guarded by its resourceVersion, renewing the hold;
//   - the report, which record (record.go) writes, once and by the holder only.
//
// Everything refused before the intent is a report, and nothing has been written.

// apply takes an approved host plan's apply one way from the hold to its report, and
// returns what to record.
func (r *HostPlanReconciler) apply(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, ph hostPhase) hostResult {
	ref := retiredBy(plan)
	var taken *takeover
	if ph.applying {
		var wait hostResult
		if taken, wait = r.takeOver(ctx, plan, r.takeoverTimeout()); taken == nil {
			return wait
		}
	}
	narrowed, honoured, why := r.stillApproved(ctx, plan)
	if !ph.applying && !ph.approved {
		// The host plan records, once, that it is approved and the fleet plan's approval
		// narrowed to this host, before its apply records its intent: the intent is
		// written only on a plan whose stored status says Approved, and the apply decides
		// on the recorded approval.
		if narrowed == nil {
			return hostResult{} // the fleet plan's change enqueues this host plan again
		}
		return hostResult{approval: narrowed}
	}
	failed := func(detail string) hostResult {
		return hostResult{report: &retirement.ApplyReport{Outcome: retirement.OutcomeTransactionFailed, Detail: detail}}
	}
	// The fence is read before the authoritative read, so a claim acquired at any point
	// after it is seen before the next write. A takeover that cannot read halts: its hold
	// lapses, and the next takeover tries again.
	// model: apply.pml steps A1 and R1 (fence read before the authoritative read)
	fence, err := r.Fence.Read(ctx, plan.Namespace)
	if err != nil && taken != nil {
		return hostResult{halt: err}
	} else if err != nil {
		return failed(err.Error())
	}
	// model: apply.pml steps A2 and R2 (the authoritative read and a fresh plan)
	fresh, err := r.assess(ctx, plan)
	if err != nil && taken != nil {
		return hostResult{halt: err}
	} else if err != nil {
		return failed(err.Error())
	}
	rows := fresh.rows
	var requested []string
	if a := plan.Status.HostApproval; a != nil {
		requested = a.WorkerIdentities
	}
	var decision retirement.ApplyDecision
	var resumed retirement.ResumeDecision
	var hold *retirement.Hold
	var toWrite []retirement.Row
	if taken == nil {
		approval := apiconv.Approval(plan.Status.HostApproval)
		// The fleet's other host plans apply at the same time; their retirements are not
		// a move of the registry this host's approval bound.
		fresh.plan.RegistryFingerprint = retirement.RegistryFingerprintBeforeSiblings(rows, ref, plan.Spec.HostID)
		decision = retirement.DecideApply(approval, fresh.plan, rows)
		if !decision.Proceed {
			rep := retirement.Summarize(decision, nil, nil, "")
			return hostResult{report: &rep}
		}
		if !honoured {
			return failed("the approval is no longer honoured, nothing was retired: " + why)
		}
		// model: apply.pml step A3 (the intent)
		h, d, err := r.recordIntent(ctx, plan, decision.Retire, fresh.items)
		switch {
		case err != nil: // nothing was written; the next attempt starts afresh
			return hostResult{halt: err}
		case h == nil:
			return hostResult{stoodBack: &standing{stage: "intent", decision: d}}
		}
		hold, toWrite = h, decision.Retire
	} else {
		notResumed := ""
		if !honoured {
			notResumed = "the approval is no longer honoured (" + why + ")"
		}
		resumed = retirement.DecideResume(retirement.Resumption{
			Progress: taken.progress, Requested: requested, PlanRef: ref,
			Rows: rows, Versions: apiconv.Versions(fresh.items), Fresh: fresh.plan, NotResumed: notResumed,
		})
		if !resumed.Resumable {
			r.tookOver(ctx, plan, taken, resumed.Detail)
			return hostResult{report: &resumed.Report, hold: &taken.hold}
		}
		me := r.applierID()
		log.FromContext(ctx).Info("Took over an interrupted apply; resuming it", "applier", me, "from", taken.from,
			"retiredBefore", len(resumed.Retired), "toWrite", len(resumed.Retire), "preserved", len(resumed.Preserved))
		r.Recorder.Eventf(plan, nil, "Warning", eventApplyTakenOver, "Apply",
			"Applier %s took over the apply held by %s, which stopped renewing it, and resumes it: %d row(s) were retired before; %d remaining row(s) unchanged since they were read are probed again and written, %d kept",
			me, taken.from, len(resumed.Retired), len(resumed.Retire), len(resumed.Preserved))
		hold, toWrite = &taken.hold, resumed.Retire
	}
	w := r.retireRows(ctx, plan, ref, hold, fresh.items, toWrite, fence)
	if w.halt != nil {
		return hostResult{halt: w.halt}
	}
	preserved, interruption := w.preserved, ""
	if w.stop != nil {
		interruption = w.stop.interruption
		preserved = append(preserved, retirement.UntouchedAssessments(toWrite[w.stop.at:], w.stop.reason, interruption)...)
	}
	var rep retirement.ApplyReport
	if taken == nil {
		rep = retirement.Summarize(decision, w.retired, preserved, interruption)
	} else {
		rep = retirement.SummarizeResume(resumed, w.retired, preserved, interruption, taken.from, r.applierID())
	}
	return hostResult{report: &rep, hold: hold}
}

// tookOver tells that this applier took an apply over and completes its report from the
// rows instead of resuming it, and why.
func (r *HostPlanReconciler) tookOver(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, taken *takeover, notResumed string) {
	me := r.applierID()
	log.FromContext(ctx).Info("Took over an interrupted apply; completing its report from the rows", "applier", me, "from", taken.from, "notResumed", notResumed)
	r.Recorder.Eventf(plan, nil, "Warning", eventApplyTakenOver, "Apply",
		"Applier %s took over the apply held by %s, which stopped renewing it; it completes the report from the rows and writes no row: %s", me, taken.from, notResumed)
}
