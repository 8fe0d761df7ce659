package retirementplan

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// The apply's report (the last layer of a host plan's apply, apply.go, and of a takeover,
// intent.go): written once, by the holder of the apply only.

// finish ends an apply attempt or a takeover: it returns a halt as the reconcile's error,
// records that this applier stood back for another, or writes the report.
func (r *HostPlanReconciler) finish(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, run applyRun) (ctrl.Result, error) {
	switch {
	case run.halt != nil:
		return ctrl.Result{}, run.halt
	case run.settled:
		return ctrl.Result{}, nil
	case run.stoodBack != nil:
		return r.standBack(ctx, plan, run.stoodBack.stage, run.stoodBack.decision), nil
	}
	log.FromContext(ctx).Info("Applied", "outcome", run.report.Outcome, "retired", run.report.RetiredCount, "interrupted", run.report.Interrupted)
	return r.writeApplyStatus(ctx, plan, run.report, run.post, run.hold, "")
}

// writeApplyStatus records the apply report. The rows are already written, so the report
// must not be lost to an unrelated write of the plan: it is retried on conflict. It is
// written only by the applier that holds the apply (hold; with the state Finished), or,
// when no intent was recorded (hold nil: no row was written), only while no apply started
// and no report was written, so it never overwrites another applier's apply or report. A
// report written for a host whose agent is lost (lost: why) sets the HostAgentLost
// condition in the same write.
func (r *HostPlanReconciler) writeApplyStatus(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, rep retirement.ApplyReport,
	post *fleetv1alpha1.PostApply, hold *retirement.Hold, lost string) (ctrl.Result, error) {
	now := metav1.NewTime(r.Clock.Now())
	verdict := retirement.JudgeApply(rep)
	for attempt := 1; ; attempt++ {
		switch {
		case hold != nil && !apiconv.Progress(plan.Status.ApplyProgress).HeldBy(*hold):
			refusedAppliersTotal.WithLabelValues("report").Inc()
			r.Recorder.Eventf(plan, nil, "Warning", eventApplyHoldLost, "Apply",
				"Applier %s did not write its report (%s): another applier holds the apply now", r.applierID(), rep.Outcome)
			return ctrl.Result{RequeueAfter: r.takeoverTimeout()}, nil
		case hold == nil && (plan.Status.ApplyProgress != nil || plan.Status.Outcome != retirement.OutcomePlanned):
			d := retirement.DecideApplier(apiconv.Progress(plan.Status.ApplyProgress), r.applierID(), r.Clock.Now(), r.takeoverTimeout())
			if d.Action == retirement.ApplierStart {
				d = retirement.ApplierDecision{Action: retirement.ApplierDone, Detail: "the plan's report is already written"}
			}
			return r.standBack(ctx, plan, "report", d), nil
		}
		// model: apply.pml step A9 (the report, written by the holder only)
		var more []conditions.Cond
		if lost != "" {
			more = append(more, lostCondition(lost))
		}
		setApplyStatus(plan, rep, verdict, post, now, more...)
		if hold != nil {
			p := plan.Status.ApplyProgress
			p.State, p.RenewedAt = retirement.ApplyFinished, metav1.NewMicroTime(now.Time)
			p.RetiredSoFar, p.IntendedRows = int32(rep.RetiredCount), nil
			switch {
			case rep.Resumed:
				p.Takeover = retirement.TakeoverResumed
			case rep.Recovered:
				p.Takeover = retirement.TakeoverCompleted
			}
		}
		err := r.Status().Update(ctx, plan)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt == maxCASAttempts {
			return ctrl.Result{}, fmt.Errorf("writing apply result %s: %w", rep.Outcome, err)
		}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(plan), plan); err != nil {
			return ctrl.Result{}, fmt.Errorf("re-reading plan to record apply result: %w", err)
		}
	}
	plansTotal.WithLabelValues(rep.Outcome).Inc()
	for _, p := range rep.Preserved {
		preservedTotal.WithLabelValues("apply", p.ReasonCode).Inc()
	}
	kind := corev1.EventTypeNormal
	if !verdict.Succeeded {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(plan, nil, kind, verdict.Reason, "Apply", "Apply finished with outcome %s: %d retired, %d preserved", rep.Outcome, rep.RetiredCount, len(rep.Preserved))
	return ctrl.Result{}, nil
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
