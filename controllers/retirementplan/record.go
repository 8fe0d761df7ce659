package retirementplan

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// The one status write that ends each stage of a host plan (hostStep, hostplan.go): the
// dry run, the approval's record, or the apply's report. A stage decides; record writes
// what it decided and nothing else. (The pages' record, pages.go, and the apply's own
// compare-and-swap writes of its hold, intent.go and rows.go, are the only other writes
// of a host plan's status.)

// hostResult is what one stage of a host plan found, and what record writes for it. At
// most one of planned, approval and report is set. With none of them nothing is written:
// the step waits (the approval has not landed), stands back (stoodBack), or stops with
// halt.
type hostResult struct {
	// planned is a dry run: the plan, and the registrations' snapshot and view it read.
	planned *world
	// approval is the fleet plan's approval narrowed to this host, recorded once before
	// the apply records its intent.
	approval *fleetv1alpha1.RetirementApproval
	// report is an apply's report. It is written by the holder of hold only, or, when
	// hold is nil (no intent was recorded, no row written), only while no apply started
	// and no report was written.
	report *retirement.ApplyReport
	hold   *retirement.Hold
	// lost, with a report, says why the host's agent is lost: the report carries
	// HostAgentLost.
	lost string
	// stoodBack says this applier found the apply held by another (or finished) and wrote
	// nothing.
	stoodBack *standing
	// halt stops the step without a write: its error is the reconcile's. After an intent,
	// a takeover completes the report once the hold lapses.
	halt error
}

// standing says at which stage an applier stood back for another, and why.
type standing struct {
	stage    string
	decision retirement.ApplierDecision
}

// record writes what one stage of a host plan decided, and says whether the step goes on
// to the next stage. A dry run or an approval that loses its compare-and-swap is decided
// again on the next reconcile. A report is not lost to an unrelated write: it is retried
// on the re-read plan as long as the plan still shows this applier's hold (or, without
// one, still awaits its apply).
func (r *HostPlanReconciler) record(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, st hostResult) (ctrl.Result, bool, error) {
	switch {
	case st.halt != nil:
		return ctrl.Result{}, false, st.halt
	case st.stoodBack != nil:
		return r.standBack(ctx, plan, st.stoodBack.stage, st.stoodBack.decision), false, nil
	case st.planned == nil && st.approval == nil && st.report == nil:
		return ctrl.Result{}, false, nil
	}
	now := r.Clock.Now()
	for attempt := 1; ; attempt++ {
		if st.report != nil {
			if res, stop := r.reportStandsBack(ctx, plan, st); stop {
				return res, false, nil
			}
		}
		// model: apply.pml step A9 (the report, written by the holder only)
		nextHostStatus(plan, st, now) // status.go
		err := r.Status().Update(ctx, plan)
		if err == nil {
			break
		}
		if st.report == nil || !apierrors.IsConflict(err) || attempt == maxCASAttempts {
			return ctrl.Result{}, false, fmt.Errorf("writing %s: %w", st.what(), err)
		}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(plan), plan); err != nil {
			return ctrl.Result{}, false, fmt.Errorf("re-reading the host plan before writing %s: %w", st.what(), err)
		}
	}
	r.recorded(ctx, plan, st)
	return ctrl.Result{}, st.report == nil, nil
}

// what names what a result records, for errors.
func (st hostResult) what() string {
	switch {
	case st.planned != nil:
		return "the host plan's dry run"
	case st.approval != nil:
		return "the host plan's approval"
	}
	return "apply result " + st.report.Outcome
}

// reportStandsBack checks, before each attempt to write a report, that this applier may:
// with a hold, the plan must still show it; without one, no apply may have started and no
// report be written. Otherwise it records why nothing is written and says when to look
// again.
func (r *HostPlanReconciler) reportStandsBack(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, st hostResult) (ctrl.Result, bool) {
	progress := apiconv.Progress(plan.Status.ApplyProgress)
	switch {
	case st.hold != nil && !progress.HeldBy(*st.hold):
		refusedAppliersTotal.WithLabelValues("report").Inc()
		r.Recorder.Eventf(plan, nil, "Warning", eventApplyHoldLost, "Apply",
			"Applier %s did not write its report (%s): another applier holds the apply now", r.applierID(), st.report.Outcome)
		return ctrl.Result{RequeueAfter: r.takeoverTimeout()}, true
	case st.hold == nil && progress.State == retirement.ApplyInProgress:
		return r.standBack(ctx, plan, "report", retirement.ApplierDecision{Action: retirement.ApplierWait,
			Detail: "another applier recorded its intent meanwhile"}), true
	case st.hold == nil && (plan.Status.ApplyProgress != nil || plan.Status.Outcome != retirement.OutcomePlanned):
		return r.standBack(ctx, plan, "report", retirement.ApplierDecision{Action: retirement.ApplierDone,
			Detail: "the plan's report is already written"}), true
	}
	return ctrl.Result{}, false
}

// recorded tells what a status write recorded: log, events and metrics.
func (r *HostPlanReconciler) recorded(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, st hostResult) {
	logger := log.FromContext(ctx)
	switch {
	case st.planned != nil:
		p := st.planned.plan
		logger.Info("Planned host plan", "candidates", p.CandidateCount, "preserved", p.PreservedCount)
		plansTotal.WithLabelValues(retirement.OutcomePlanned).Inc()
		for reason, n := range p.PreservedReasonCounts {
			preservedTotal.WithLabelValues("plan", reason).Add(float64(n))
		}
		r.Recorder.Eventf(plan, nil, "Normal", fleetv1alpha1.ReasonPlanned, "Plan",
			"Planned: %d candidate(s), %d preserved of %d assessed", p.CandidateCount, p.PreservedCount, p.AssessedCount)
	case st.approval != nil:
		logger.Info("Recorded the fleet plan's approval; applying host plan", "identities", len(st.approval.WorkerIdentities))
	default:
		rep := *st.report
		verdict := retirement.JudgeApply(rep)
		logger.Info("Applied", "outcome", rep.Outcome, "retired", rep.RetiredCount, "interrupted", rep.Interrupted)
		plansTotal.WithLabelValues(rep.Outcome).Inc()
		for _, p := range rep.Preserved {
			preservedTotal.WithLabelValues("apply", p.ReasonCode).Inc()
		}
		kind := corev1.EventTypeNormal
		if !verdict.Succeeded {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(plan, nil, kind, verdict.Reason, "Apply", "Apply finished with outcome %s: %d retired, %d preserved", rep.Outcome, rep.RetiredCount, len(rep.Preserved))
	}
}

// standBack records that this reconciler found the apply held by someone else (or
// finished) at stage, and wrote nothing. It returns when to look again.
func (r *HostPlanReconciler) standBack(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, stage string, d retirement.ApplierDecision) ctrl.Result {
	refusedAppliersTotal.WithLabelValues(stage).Inc()
	log.FromContext(ctx).Info("Another applier holds the apply; this one writes nothing", "stage", stage, "applier", r.applierID(), "detail", d.Detail)
	r.Recorder.Eventf(plan, nil, "Normal", eventApplyInProgress, "Apply",
		"Applier %s wrote nothing at %s: %s", r.applierID(), stage, d.Detail)
	if d.Action == retirement.ApplierDone {
		return ctrl.Result{}
	}
	after := d.After
	if after <= 0 {
		after = r.takeoverTimeout()
	}
	return ctrl.Result{RequeueAfter: after}
}
