package retirementplan

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// apply re-reads everything, re-decides, and retires each surviving row with a
// resourceVersion-guarded write. It never returns an error: every failure is a report.
func (r *Reconciler) apply(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (retirement.ApplyReport, *fleetv1alpha1.PostApply) {
	failed := func(detail string) retirement.ApplyReport {
		return retirement.ApplyReport{Outcome: retirement.OutcomeTransactionFailed, Detail: detail}
	}
	// The fence is read before the authoritative read, so a claim acquired at any point
	// after it is seen before the next write.
	fence, err := r.Fence.Read(ctx, plan.Namespace)
	if err != nil {
		return failed(err.Error()), nil
	}
	fresh, err := r.assess(ctx, plan)
	if err != nil {
		return failed(err.Error()), nil
	}
	decision := retirement.DecideApply(apiconv.Approval(r.effectiveApproval(ctx, plan)), fresh.plan, apiconv.Rows(fresh.items))
	if !decision.Proceed {
		return retirement.Summarize(decision, nil, nil, ""), r.snapshot(ctx, plan.Namespace)
	}
	if ok, why := r.stillApproved(ctx, plan); !ok {
		return failed("the approval is no longer honoured, nothing was retired: " + why), r.snapshot(ctx, plan.Namespace)
	}
	retired, preserved, interruption := r.retireRows(ctx, plan, fresh.items, decision.Retire, fence)
	return retirement.Summarize(decision, retired, preserved, interruption), r.snapshot(ctx, plan.Namespace)
}

// retireRows writes each row the decision retires, re-checking the fence and the row's
// liveness right before its own write. It stops at the first fence movement or write
// failure and reports every row it did not reach.
func (r *Reconciler) retireRows(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, items []fleetv1alpha1.WorkerRegistration,
	rows []retirement.Row, fence string) (retired []string, preserved []retirement.Assessment, interruption string) {
	byName := make(map[string]*fleetv1alpha1.WorkerRegistration, len(items))
	for i := range items {
		byName[items[i].Name] = &items[i]
	}
	cadence := r.approverRecheck()
	lastCheck, sinceCheck := r.Clock.Now(), 0 // apply checked the approval right before this loop
	for i, row := range rows {
		if r.BeforeWrite != nil {
			r.BeforeWrite(ctx, row.Name)
		}
		if cadence.Due(sinceCheck, r.Clock.Since(lastCheck)) {
			if ok, why := r.stillApproved(ctx, plan); !ok {
				interruption = retirement.ReasonApprovalRevoked + ": the approval is no longer honoured (" + why + "); the remaining rows were left untouched"
				return retired, append(preserved, retirement.UntouchedAssessments(rows[i:], retirement.ReasonApprovalRevoked, interruption)...), interruption
			}
			lastCheck, sinceCheck = r.Clock.Now(), 0
		}
		sinceCheck++
		if moved, err := r.Fence.Moved(ctx, plan.Namespace, fence); moved {
			interruption = retirement.ReasonExternalFenceMoved + ": a task claim was acquired during apply; the remaining rows were left untouched"
			if err != nil {
				interruption = fmt.Sprintf("%s: the workflow fence could not be read (%v)", retirement.ReasonExternalFenceMoved, err)
			}
			return retired, append(preserved, retirement.UntouchedAssessments(rows[i:], retirement.ReasonExternalFenceMoved, interruption)...), interruption
		}
		wr := byName[row.Name].DeepCopy() // carries the resourceVersion just read
		var reprobe *retirement.Probe
		if r.Reprober != nil {
			p := probe(ctx, r.Reprober, wr)
			reprobe = &p
		}
		if ok, reason, detail := retirement.RecheckBeforeWrite(row, reprobe, r.Host); !ok {
			preserved = append(preserved, retirement.Assessment{WorkerIdentity: row.Name, ReasonCode: reason, Detail: detail})
			continue
		}
		switch err := r.retire(ctx, plan, wr); {
		case apierrors.IsConflict(err):
			preserved = append(preserved, retirement.Assessment{WorkerIdentity: row.Name, ReasonCode: retirement.ReasonRowChangedSincePlan,
				Detail: "the registration changed after it was read, so the guarded write was refused"})
		case err != nil:
			interruption = fmt.Sprintf("writing %s failed: %v", row.Name, err)
			return retired, append(preserved, retirement.UntouchedAssessments(rows[i:], retirement.OutcomeTransactionFailed, interruption)...), interruption
		default:
			retired = append(retired, row.Name)
		}
	}
	return retired, preserved, ""
}

// retire writes one row as Retired, guarded by the resourceVersion it was read at. Its
// history stays: nothing is deleted.
func (r *Reconciler) retire(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, wr *fleetv1alpha1.WorkerRegistration) error {
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
// must not be lost to a conflicting plan update: it is retried on conflict.
func (r *Reconciler) writeApplyStatus(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, rep retirement.ApplyReport, post *fleetv1alpha1.PostApply) error {
	now := metav1.NewTime(r.Clock.Now())
	verdict := retirement.JudgeApply(rep)
	for attempt := 0; ; attempt++ {
		setApplyStatus(plan, rep, verdict, post, now)
		err := r.Status().Update(ctx, plan)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt == 5 {
			return fmt.Errorf("writing apply result %s: %w", rep.Outcome, err)
		}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(plan), plan); err != nil {
			return fmt.Errorf("re-reading plan to record apply result: %w", err)
		}
	}
	plansTotal.WithLabelValues(rep.Outcome).Inc()
	for _, p := range rep.Preserved {
		preservedTotal.WithLabelValues("apply", p.ReasonCode).Inc()
	}
	kind := "Normal"
	if !verdict.Succeeded {
		kind = "Warning"
	}
	r.Recorder.Eventf(plan, nil, kind, verdict.Reason, "Apply", "Apply finished with outcome %s: %d retired, %d preserved", rep.Outcome, rep.RetiredCount, len(rep.Preserved))
	return nil
}
