package retirementplan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// The single-applier protocol (see internal/retirement/resume.go):
//
//  1. After the fence read, the fresh authoritative read, DecideApply and the approver
//     re-check, the applier records its intent in status.applyProgress (InProgress,
//     applier, startedAt, renewedAt, the intended rows with the resourceVersion each was
//     read at) with one compare-and-swap write of the plan's status. Only the winner of
//     that write writes rows.
//  2. While writing it renews renewedAt (and retiredSoFar) by compare-and-swap, at the
//     approver re-check cadence (at least three times per takeover timeout). A renewal,
//     and the final report, are written only while the plan still shows this applier's
//     hold: its applier id and the renewedAt it last wrote. A conflict with an unrelated
//     write is retried on the re-read plan; a re-read that shows another hold stops the
//     apply at once, without any further row write or report.
//  3. The report is written with the state Finished, in the same compare-and-swap.
//  4. A reconcile that finds an apply in progress waits while its hold is fresh, and
//     once the hold is older than the takeover timeout takes it over by
//     compare-and-swap (takeOver). On the rows' host it resumes the apply the way an
//     apply goes (apply.go): approval, fence, a fresh read and plan, and for each
//     remaining row its recorded resourceVersion, a new probe and a guarded write
//     (retirement.DecideResume). The stand-in of a lost host (completeLost), or a taker
//     whose approval is no longer honoured, writes no row and completes the report from
//     what the rows show (retirement.CompleteInterrupted).

// Event reasons of the single-applier protocol.
const (
	// eventApplyInProgress: a reconcile found the apply held by another applier (or lost
	// the race to record its intent) and wrote nothing.
	eventApplyInProgress = "ApplyInProgress"
	// eventApplyTakenOver: a reconcile took over a lapsed hold, to resume the apply or to
	// complete its report.
	eventApplyTakenOver = "ApplyTakenOver"
	// eventApplyHoldLost: a running apply found its hold taken over and stopped at once.
	eventApplyHoldLost = "ApplyHoldLost"
)

// maxCASAttempts bounds how often a compare-and-swap write of the plan's status is tried
// again after a conflict with an unrelated write.
const maxCASAttempts = 6

// ErrApplyAbandoned is returned by Reconcile when the AfterWrite seam stopped an apply
// between two row writes: nothing more was written, not even the report, exactly as if
// the process had died there.
var ErrApplyAbandoned = errors.New("apply abandoned between two row writes")

var processApplierID = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "fleet-controller"
	}
	if len(host) > 240 {
		host = host[:240]
	}
	return host + "-" + utilrand.String(6)
})

// ProcessApplierID is this process's applier instance id: the host name and a random
// suffix, minted once per process, so a restarted agent on the same host is a different
// applier from its previous incarnation.
func ProcessApplierID() string { return processApplierID() }

func (r *HostPlanReconciler) applierID() string {
	if r.ApplierID != "" {
		return r.ApplierID
	}
	return ProcessApplierID()
}

func (r *HostPlanReconciler) takeoverTimeout() time.Duration {
	if r.TakeoverTimeout <= 0 {
		return retirement.DefaultTakeoverTimeout
	}
	return r.TakeoverTimeout
}

// recordIntent records, by compare-and-swap, that this applier starts the apply and will
// write rows. It returns the hold, or nil and the decision that made it stand back when
// another applier started (or finished) first, or the plan is no longer an approved
// plan awaiting its apply.
// model: apply.pml step A3 (the intent, guarded by the plan's resourceVersion)
func (r *HostPlanReconciler) recordIntent(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, rows []retirement.Row,
	items []fleetv1alpha1.WorkerRegistration) (*retirement.Hold, retirement.ApplierDecision, error) {
	names := make([]string, 0, len(rows))
	for _, row := range rows {
		names = append(names, row.Name)
	}
	intended := apiconv.IntendedRows(items, names) // each at the resourceVersion its write will carry
	me := r.applierID()
	for attempt := 1; ; attempt++ {
		now := r.Clock.Now()
		d := retirement.DecideApplier(apiconv.Progress(plan.Status.ApplyProgress), me, now, r.takeoverTimeout())
		if d.Action != retirement.ApplierStart || plan.Status.Outcome != retirement.OutcomePlanned ||
			!approvedNow(plan) {
			if d.Action == retirement.ApplierStart { // the report is written, or the approval was withdrawn
				d = retirement.ApplierDecision{Action: retirement.ApplierDone, Detail: "the plan is no longer an approved plan awaiting its apply"}
			}
			return nil, d, nil
		}
		plan.Status.ApplyProgress = &fleetv1alpha1.ApplyProgress{
			State:         retirement.ApplyInProgress,
			Applier:       me,
			StartedAt:     metav1.NewTime(now),
			RenewedAt:     metav1.NewMicroTime(now),
			IntendedCount: int32(len(intended)),
			IntendedRows:  intended,
		}
		err := r.Status().Update(ctx, plan)
		if err == nil {
			hold := apiconv.Progress(plan.Status.ApplyProgress).Hold()
			log.FromContext(ctx).Info("Recorded the apply's intent", "applier", me, "intended", len(intended))
			return &hold, retirement.ApplierDecision{}, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxCASAttempts {
			return nil, retirement.ApplierDecision{}, fmt.Errorf("recording the apply's intent: %w", err)
		}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(plan), plan); err != nil {
			return nil, retirement.ApplierDecision{}, fmt.Errorf("re-reading the plan to record the apply's intent: %w", err)
		}
	}
}

// takeover is a lapsed hold this applier took over: the progress it found, the hold it
// holds now, and the applier whose hold lapsed.
type takeover struct {
	progress retirement.Progress
	hold     retirement.Hold
	from     string
}

// takeOver looks at a plan whose apply is in progress: it stands back while the hold is
// younger than timeout, and takes a lapsed hold over by compare-and-swap. Without a
// takeover, the result says what to record: standing back, nothing (the apply finished
// since the plan was read), or the halt of a write that failed.
// model: apply.pml steps A0 (wait for a fresh hold) and T1 (take over a lapsed one)
func (r *HostPlanReconciler) takeOver(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, timeout time.Duration) (*takeover, hostResult) {
	me := r.applierID()
	for attempt := 1; ; attempt++ {
		d := retirement.DecideApplier(apiconv.Progress(plan.Status.ApplyProgress), me, r.Clock.Now(), timeout)
		switch d.Action {
		case retirement.ApplierWait:
			return nil, hostResult{stoodBack: &standing{stage: "wait", decision: d}}
		case retirement.ApplierTakeOver:
		default: // finished (or cleared) since the plan was read: nothing to do here
			return nil, hostResult{}
		}
		p := plan.Status.ApplyProgress
		from := p.Applier
		p.Applier, p.TakenOverFrom = me, from
		p.RenewedAt = metav1.NewMicroTime(r.Clock.Now())
		err := r.Status().Update(ctx, plan)
		if err == nil {
			takeoversTotal.Inc()
			progress := apiconv.Progress(plan.Status.ApplyProgress)
			return &takeover{progress: progress, hold: progress.Hold(), from: from}, hostResult{}
		}
		if !apierrors.IsConflict(err) || attempt == maxCASAttempts {
			return nil, hostResult{halt: fmt.Errorf("taking over the apply: %w", err)}
		}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(plan), plan); err != nil {
			return nil, hostResult{halt: fmt.Errorf("re-reading the plan to take over the apply: %w", err)}
		}
	}
}

// completeLost is the stand-in of a lost host's agent with an apply in progress on that
// host: it waits twice as long as an agent would (so that a returning agent takes over
// first and resumes), takes the lapsed hold over, and completes the report from the rows,
// writing no row: it is not on the rows' host, so it cannot probe their processes again.
// model: apply.pml steps T1-T3 (take over; read the rows, write the report; no row write)
func (r *HostPlanReconciler) completeLost(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) hostResult {
	taken, wait := r.takeOver(ctx, plan, retirement.StandInTakeoverTimeout(r.takeoverTimeout()))
	if taken == nil {
		return wait
	}
	items, err := r.listRegistrations(ctx, plan.Namespace)
	if err != nil {
		return hostResult{halt: fmt.Errorf("reading the intended rows of an interrupted apply: %w", err)}
	}
	var requested []string
	if a := plan.Status.HostApproval; a != nil {
		requested = a.WorkerIdentities
	}
	notResumed := "this agent is not on the rows' host, so it cannot probe their processes again"
	r.tookOver(ctx, plan, taken, notResumed)
	rep := retirement.CompleteInterrupted(retirement.Interrupted{
		Progress: taken.progress, Requested: requested, PlanRef: retiredBy(plan), Rows: apiconv.Rows(items), NotResumed: notResumed,
	})
	return hostResult{report: &rep, hold: &taken.hold}
}
