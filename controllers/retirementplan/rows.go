package retirementplan

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// The row writes of an apply (the third layer of a host plan's apply, apply.go): each row
// the decision retires is written with a resourceVersion-guarded update, after the fence
// and the row's liveness are checked once more, while the apply's hold is renewed as it
// goes.

// errHoldLost is a renewal's answer when the re-read plan shows another hold.
var errHoldLost = errors.New("another applier holds the apply")

// rowsRun is what the row writes of one apply did.
type rowsRun struct {
	retired   []string
	preserved []retirement.Assessment
	// stop is set when the writes stopped early and a report is still due: the rows
	// from stop.at on were left untouched, for stop.reason.
	stop *rowsStop
	// halt is set when the writes stopped and no report may be written (see
	// applyRun.halt).
	halt error
}

// rowsStop says where and why the row writes stopped early.
type rowsStop struct {
	at                   int
	reason, interruption string
}

// retireRows writes each row the decision retires. Each row's turn renews the apply's
// hold when due, re-checks the approval at its cadence, the fence and the row's
// liveness, and then writes the row guarded by the resourceVersion it was read at. It
// stops at an approval no longer honoured, a fence movement or a failed write, and says
// where (rowsRun.stop); it halts without a report when its hold was taken over or could
// not be renewed, or when the AfterWrite seam abandons the apply.
func (r *HostPlanReconciler) retireRows(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, ref string, hold *retirement.Hold, items []fleetv1alpha1.WorkerRegistration,
	rows []retirement.Row, fence string) rowsRun {
	byName := make(map[string]*fleetv1alpha1.WorkerRegistration, len(items))
	for i := range items {
		byName[items[i].Name] = &items[i]
	}
	cadence := r.approverRecheck()
	renewal := retirement.RenewCadence(cadence, r.takeoverTimeout())
	lastCheck, sinceCheck := r.Clock.Now(), 0
	lastRenew, sinceRenew := hold.RenewedAt, 0
	var run rowsRun
	stop := func(at int, reason, interruption string) rowsRun {
		run.stop = &rowsStop{at: at, reason: reason, interruption: interruption}
		return run
	}
	for i, row := range rows {
		if r.RowWrites != nil {
			// A stop while waiting (the manager shutting down) leaves the apply as a crash
			// would: its hold lapses and a takeover resumes it.
			if err := r.RowWrites.Wait(ctx); err != nil {
				run.halt = fmt.Errorf("waiting for the turn of %s: %w", row.Name, err)
				return run
			}
		}
		if r.BeforeWrite != nil {
			r.BeforeWrite(ctx, row.Name)
		}
		// The hold is renewed at the start of a row's turn when due, so no row is checked
		// and written on a hold older than a third of the takeover timeout.
		if renewal.Due(sinceRenew, r.Clock.Since(lastRenew)) {
			renewed, err := r.renew(ctx, plan, *hold, len(run.retired))
			if err != nil {
				run.halt = err
				return run
			}
			*hold, lastRenew, sinceRenew = renewed, renewed.RenewedAt, 0
		}
		sinceRenew++
		// The first row's turn judges the approval again, right before the first write: the
		// apply judged it before its reads, and a revocation since stops it here.
		if i == 0 || cadence.Due(sinceCheck, r.Clock.Since(lastCheck)) {
			if _, ok, why := r.stillApproved(ctx, plan); !ok {
				return stop(i, retirement.ReasonApprovalRevoked,
					retirement.ReasonApprovalRevoked+": the approval is no longer honoured ("+why+"); the remaining rows were left untouched")
			}
			lastCheck, sinceCheck = r.Clock.Now(), 0
		}
		sinceCheck++
		// model: apply.pml step A6 (fence check before each row)
		if moved, err := r.Fence.Moved(ctx, plan.Namespace, fence); moved {
			if err != nil {
				return stop(i, retirement.ReasonExternalFenceMoved,
					fmt.Sprintf("%s: the workflow fence could not be read (%v)", retirement.ReasonExternalFenceMoved, err))
			}
			return stop(i, retirement.ReasonExternalFenceMoved,
				retirement.ReasonExternalFenceMoved+": a task claim was acquired during apply; the remaining rows were left untouched")
		}
		kept, err := r.probeAndRetire(ctx, plan, ref, row, byName[row.Name].DeepCopy())
		switch {
		case kept != nil:
			run.preserved = append(run.preserved, *kept)
		case err != nil:
			return stop(i, retirement.OutcomeTransactionFailed, fmt.Sprintf("writing %s failed: %v", row.Name, err))
		default:
			run.retired = append(run.retired, row.Name)
			if r.AfterWrite != nil {
				if err := r.AfterWrite(ctx, row.Name); err != nil {
					run.halt = fmt.Errorf("%w (after %s): %w", ErrApplyAbandoned, row.Name, err)
					return run
				}
			}
		}
	}
	return run
}

// probeAndRetire probes row's process again and writes it as Retired, guarded by the
// resourceVersion wr carries. It returns the assessment of a row it kept (alive again, or
// changed since it was read) or the error of a failed write.
//
// A conflict whose re-read shows the row with the fingerprint it was read at (a write
// that changed nothing the approval covers: the coordinator marking a host's rows while
// the host had no agent, or the agent marking them back) is not a change of the row:
// the row is probed and written again, guarded by the new resourceVersion, up to
// maxCASAttempts times. Any other change keeps it as row_changed_since_plan.
func (r *HostPlanReconciler) probeAndRetire(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, ref string, row retirement.Row,
	wr *fleetv1alpha1.WorkerRegistration) (*retirement.Assessment, error) {
	approved := retirement.RowFingerprint(apiconv.Row(wr))
	for attempt := 1; ; attempt++ {
		var reprobe *retirement.Probe
		if r.Reprober != nil {
			p := probe(ctx, r.Reprober, wr)
			reprobe = &p
		}
		// model: apply.pml step A7 (liveness re-probe)
		if ok, reason, detail := retirement.RecheckBeforeWrite(row, reprobe, r.Host); !ok {
			return &retirement.Assessment{WorkerIdentity: row.Name, ReasonCode: reason, Detail: detail}, nil
		}
		// model: apply.pml step A8 (write guarded by the row resourceVersion)
		err := r.retire(ctx, plan, ref, wr)
		if !apierrors.IsConflict(err) {
			return nil, err
		}
		changed := &retirement.Assessment{WorkerIdentity: row.Name, ReasonCode: retirement.ReasonRowChangedSincePlan,
			Detail: "the registration changed after it was read, so the guarded write was refused"}
		if attempt == maxCASAttempts {
			return changed, nil
		}
		cur := &fleetv1alpha1.WorkerRegistration{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(wr), cur); err != nil || !retirement.RowUnchanged(approved, apiconv.Row(cur)) {
			return changed, nil
		}
		wr = cur
	}
}

// retire writes one row as Retired, guarded by the resourceVersion it was read at. Its
// history stays: nothing is deleted.
func (r *HostPlanReconciler) retire(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, ref string, wr *fleetv1alpha1.WorkerRegistration) error {
	now := metav1.NewTime(r.Clock.Now())
	wr.Status.Phase = fleetv1alpha1.PhaseRetired
	wr.Status.OwnershipState = fleetv1alpha1.OwnershipHistorical
	wr.Status.RetiredAt = &now
	wr.Status.RetiredBy = ref
	wr.Status.RetirementReason = retirement.ReasonEligibleStaleOrphan
	if err := r.Status().Update(ctx, wr); err != nil {
		return err
	}
	retiredTotal.Inc()
	r.Recorder.Eventf(wr, plan, "Normal", "Retired", "Retire", "Retired by RetirementPlan %s: the process is provably gone", plan.Name)
	return nil
}

// renew writes a new renewedAt (and retiredSoFar) while the plan still shows hold, and
// returns the new hold. When another applier holds the plan now, or the renewal cannot be
// written, it records why and the apply stops writing: the holder, or a takeover once the
// hold lapses, writes the report.
// model: apply.pml step A5 (the renewal; losing it stops the applier)
func (r *HostPlanReconciler) renew(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, hold retirement.Hold, retiredSoFar int) (retirement.Hold, error) {
	stopped := func(err error) (retirement.Hold, error) {
		return hold, fmt.Errorf("apply stopped without a report, to be completed by whoever holds it: %w", err)
	}
	for attempt := 1; ; attempt++ {
		if !apiconv.Progress(plan.Status.ApplyProgress).HeldBy(hold) {
			refusedAppliersTotal.WithLabelValues("renew").Inc()
			r.Recorder.Eventf(plan, nil, "Warning", eventApplyHoldLost, "Apply",
				"Applier %s stopped writing rows: another applier holds the apply now", r.applierID())
			return stopped(errHoldLost)
		}
		p := plan.Status.ApplyProgress
		p.RenewedAt = metav1.NewMicroTime(r.Clock.Now())
		p.RetiredSoFar = int32(retiredSoFar)
		err := r.Status().Update(ctx, plan)
		if err == nil {
			return apiconv.Progress(plan.Status.ApplyProgress).Hold(), nil
		}
		if !apierrors.IsConflict(err) || attempt == maxCASAttempts {
			return stopped(fmt.Errorf("renewing the apply's hold: %w", err))
		}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(plan), plan); err != nil {
			return stopped(fmt.Errorf("re-reading the plan to renew the apply's hold: %w", err))
		}
	}
}
