package retirementplan

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// applyRun is what one apply attempt did.
type applyRun struct {
	report retirement.ApplyReport
	post   *fleetv1alpha1.PostApply
	// hold is set once the intent was recorded: the report is then written only while
	// the plan still shows this hold.
	hold *applyHold
	// wait is set when another applier holds the apply: this attempt wrote nothing and
	// writes no report; look again then.
	wait *ctrl.Result
	// halt is set when the attempt stopped without a report: its intent could not be
	// recorded (nothing was written), the AfterWrite seam abandoned it
	// (ErrApplyAbandoned), or its hold was lost or could not be renewed. After the intent,
	// a takeover completes the report once the hold lapses.
	halt error
}

// applyApproved runs the apply of an approved plan and records its report.
func (r *HostPlanReconciler) applyApproved(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (ctrl.Result, error) {
	run := r.apply(ctx, plan)
	switch {
	case run.wait != nil:
		return *run.wait, nil
	case run.halt != nil:
		return ctrl.Result{}, run.halt
	}
	log.FromContext(ctx).Info("Applied", "outcome", run.report.Outcome, "retired", run.report.RetiredCount, "interrupted", run.report.Interrupted)
	return r.writeApplyStatus(ctx, plan, run.report, run.post, run.hold, "")
}

// apply re-reads everything, re-decides, records its intent, and retires each surviving
// row with a resourceVersion-guarded write. Every failure before the intent is a report;
// after it, only a stop that leaves the plan held (see applyRun.halt) is not.
func (r *HostPlanReconciler) apply(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) applyRun {
	failed := func(detail string) retirement.ApplyReport {
		return retirement.ApplyReport{Outcome: retirement.OutcomeTransactionFailed, Detail: detail}
	}
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
		fresh.plan.RegistryFingerprint = retirement.RegistryFingerprintBeforeSiblings(rows, r.retiredBy(plan), plan.Spec.HostID)
	}
	decision := retirement.DecideApply(apiconv.Approval(plan.Status.HostApproval), fresh.plan, rows)
	if !decision.Proceed {
		return applyRun{report: retirement.Summarize(decision, nil, nil, ""), post: r.snapshot(ctx, plan.Namespace)}
	}
	if ok, why := r.stillApproved(ctx, plan); !ok {
		return applyRun{report: failed("the approval is no longer honoured, nothing was retired: " + why), post: r.snapshot(ctx, plan.Namespace)}
	}
	hold, wait, err := r.recordIntent(ctx, plan, decision.Retire)
	switch {
	case err != nil: // nothing was written; the next attempt starts afresh
		return applyRun{halt: err}
	case hold == nil:
		return applyRun{wait: &wait}
	}
	retired, preserved, interruption, halt := r.retireRows(ctx, plan, hold, fresh.items, decision.Retire, fence)
	if halt != nil {
		return applyRun{halt: halt}
	}
	return applyRun{report: retirement.Summarize(decision, retired, preserved, interruption), post: r.snapshot(ctx, plan.Namespace), hold: hold}
}

// retireRows writes each row the decision retires, re-checking the fence and the row's
// liveness right before its own write, and renewing the apply's hold as it goes. It
// stops at the first fence movement or write failure and reports every row it did not
// reach. It stops without a report (halt) when its hold was taken over or could not be
// renewed, or when the AfterWrite seam abandons the apply.
func (r *HostPlanReconciler) retireRows(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, hold *applyHold, items []fleetv1alpha1.WorkerRegistration,
	rows []retirement.Row, fence string) (retired []string, preserved []retirement.Assessment, interruption string, halt error) {
	byName := make(map[string]*fleetv1alpha1.WorkerRegistration, len(items))
	for i := range items {
		byName[items[i].Name] = &items[i]
	}
	cadence := r.approverRecheck()
	renewal := retirement.RenewCadence(cadence, r.takeoverTimeout())
	lastCheck, sinceCheck := r.Clock.Now(), 0 // apply checked the approval right before this loop
	lastRenew, sinceRenew := hold.renewedAt.Time, 0
	for i, row := range rows {
		if r.BeforeWrite != nil {
			r.BeforeWrite(ctx, row.Name)
		}
		if cadence.Due(sinceCheck, r.Clock.Since(lastCheck)) {
			if ok, why := r.stillApproved(ctx, plan); !ok {
				interruption = retirement.ReasonApprovalRevoked + ": the approval is no longer honoured (" + why + "); the remaining rows were left untouched"
				return retired, append(preserved, retirement.UntouchedAssessments(rows[i:], retirement.ReasonApprovalRevoked, interruption)...), interruption, nil
			}
			lastCheck, sinceCheck = r.Clock.Now(), 0
		}
		sinceCheck++
		// model: apply.pml step A6 (fence check before each row)
		if moved, err := r.Fence.Moved(ctx, plan.Namespace, fence); moved {
			interruption = retirement.ReasonExternalFenceMoved + ": a task claim was acquired during apply; the remaining rows were left untouched"
			if err != nil {
				interruption = fmt.Sprintf("%s: the workflow fence could not be read (%v)", retirement.ReasonExternalFenceMoved, err)
			}
			return retired, append(preserved, retirement.UntouchedAssessments(rows[i:], retirement.ReasonExternalFenceMoved, interruption)...), interruption, nil
		}
		wr := byName[row.Name].DeepCopy() // carries the resourceVersion just read
		var reprobe *retirement.Probe
		if r.Reprober != nil {
			p := probe(ctx, r.Reprober, wr)
			reprobe = &p
		}
		// model: apply.pml step A7 (liveness re-probe)
		if ok, reason, detail := retirement.RecheckBeforeWrite(row, reprobe, r.Host); !ok {
			preserved = append(preserved, retirement.Assessment{WorkerIdentity: row.Name, ReasonCode: reason, Detail: detail})
			continue
		}
		// The hold is renewed right before the write that needs it, so no row is written
		// on a hold older than a third of the takeover timeout.
		if renewal.Due(sinceRenew, r.Clock.Since(lastRenew)) {
			renewed, err := r.renew(ctx, plan, *hold, len(retired))
			if err != nil {
				return retired, preserved, "", r.holdLost(plan, err)
			}
			*hold, lastRenew, sinceRenew = renewed, renewed.renewedAt.Time, 0
		}
		sinceRenew++
		// model: apply.pml step A8 (write guarded by the row resourceVersion)
		switch err := r.retire(ctx, plan, wr); {
		case apierrors.IsConflict(err):
			preserved = append(preserved, retirement.Assessment{WorkerIdentity: row.Name, ReasonCode: retirement.ReasonRowChangedSincePlan,
				Detail: "the registration changed after it was read, so the guarded write was refused"})
		case err != nil:
			interruption = fmt.Sprintf("writing %s failed: %v", row.Name, err)
			return retired, append(preserved, retirement.UntouchedAssessments(rows[i:], retirement.OutcomeTransactionFailed, interruption)...), interruption, nil
		default:
			retired = append(retired, row.Name)
			if r.AfterWrite != nil {
				if err := r.AfterWrite(ctx, row.Name); err != nil {
					return retired, preserved, "", fmt.Errorf("%w (after %s): %w", ErrApplyAbandoned, row.Name, err)
				}
			}
		}
	}
	return retired, preserved, "", nil
}

// holdLost records that a running apply stopped because its hold was taken over (or
// could not be renewed). It writes nothing more: the holder, or a takeover once the hold
// lapses, writes the report.
func (r *HostPlanReconciler) holdLost(plan *fleetv1alpha1.RetirementPlan, err error) error {
	if errors.Is(err, errHoldLost) {
		refusedAppliersTotal.WithLabelValues("renew").Inc()
		r.Recorder.Eventf(plan, nil, "Warning", eventApplyHoldLost, "Apply",
			"Applier %s stopped writing rows: another applier holds the apply now", r.applierID())
	}
	return fmt.Errorf("apply stopped without a report, to be completed by whoever holds it: %w", err)
}

// retire writes one row as Retired, guarded by the resourceVersion it was read at. Its
// history stays: nothing is deleted.
func (r *HostPlanReconciler) retire(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, wr *fleetv1alpha1.WorkerRegistration) error {
	now := metav1.NewTime(r.Clock.Now())
	wr.Status.Phase = fleetv1alpha1.PhaseRetired
	wr.Status.OwnershipState = fleetv1alpha1.OwnershipHistorical
	wr.Status.RetiredAt = &now
	wr.Status.RetiredBy = r.retiredBy(plan)
	wr.Status.RetirementReason = retirement.ReasonEligibleStaleOrphan
	if err := r.Status().Update(ctx, wr); err != nil {
		return err
	}
	retiredTotal.Inc()
	r.Recorder.Eventf(wr, plan, "Normal", "Retired", "Retire", "Retired by RetirementPlan %s: the process is provably gone", plan.Name)
	return nil
}

// writeApplyStatus records the apply report. The rows are already written, so the report
// must not be lost to an unrelated write of the plan: it is retried on conflict. It is
// written only by the applier that holds the apply (hold; with the state Finished), or,
// when no intent was recorded (hold nil: no row was written), only while no apply started
// and no report was written, so it never overwrites another applier's apply or report. A
// report written for a host whose agent is lost (lost: why) sets the HostAgentLost
// condition in the same write.
func (r *HostPlanReconciler) writeApplyStatus(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, rep retirement.ApplyReport,
	post *fleetv1alpha1.PostApply, hold *applyHold, lost string) (ctrl.Result, error) {
	now := metav1.NewTime(r.Clock.Now())
	verdict := retirement.JudgeApply(rep)
	for attempt := 1; ; attempt++ {
		switch {
		case hold != nil && !heldBy(plan, *hold):
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
		setApplyStatus(plan, rep, verdict, post, now)
		if lost != "" {
			markLost(plan, lost)
		}
		if hold != nil {
			p := plan.Status.ApplyProgress
			p.State, p.RenewedAt = retirement.ApplyFinished, metav1.NewMicroTime(now.Time)
			p.RetiredSoFar, p.Intended = int32(rep.RetiredCount), nil
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
