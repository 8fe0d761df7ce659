package controllers

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// approverRecheckInterval is how often a plan whose approver lacks the approve verb is
// looked at again (an operator may bind the approver role later).
const approverRecheckInterval = 30 * time.Second

// RetirementPlanReconciler plans retirements as a dry run and applies an approved plan.
type RetirementPlanReconciler struct {
	client.Client
	// APIReader reads straight from the API server; apply never trusts the cache.
	APIReader client.Reader
	// Prober probes this host's processes while planning; nil leaves every pid unknown.
	Prober liveness.Prober
	// Reprober re-establishes, right before each row's write, that the exact process is
	// gone; nil means apply retires nothing (liveness_reprobe_unavailable).
	Reprober liveness.Prober
	// Host is the machine (and boot) this controller runs on.
	Host retirement.Host
	// Repository is the default canonical repository binding.
	Repository string
	// Approvers checks the approve verb of the approver right before the first write.
	Approvers ApproverChecker
	Clock     clock.PassiveClock
	Recorder  events.EventRecorder
	// BeforeWrite, when set, runs right before each row's fence check and guarded write.
	// It is a test seam for interleaving concurrent changes.
	BeforeWrite func(ctx context.Context, worker string)
}

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplans,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplans/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=workerregistrations,verbs=retire
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update

// Reconcile plans, checks the approval, and applies an approved plan exactly once.
func (r *RetirementPlanReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	plan := &fleetv1alpha1.RetirementPlan{}
	if err := r.Get(ctx, req.NamespacedName, plan); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := log.FromContext(ctx).WithValues("RetirementPlan", client.ObjectKeyFromObject(plan))
	if plan.Status.Outcome != "" && plan.Status.Outcome != retirement.OutcomePlanned {
		return ctrl.Result{}, nil // applied (or refused) once; a new attempt is a new plan
	}

	if plan.Status.Outcome == "" {
		if err := r.plan(ctx, plan); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("Planned", "candidates", plan.Status.CandidateCount, "preserved", plan.Status.PreservedCount)
	}
	if plan.Spec.Approval == nil {
		return ctrl.Result{}, nil
	}

	approved, wait, err := r.checkApproval(ctx, plan)
	if err != nil || !approved {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	report, post := r.apply(ctx, plan)
	log.Info("Applied", "outcome", report.Outcome, "retired", report.RetiredCount, "interrupted", report.Interrupted)
	return ctrl.Result{}, r.writeApplyStatus(ctx, plan, report, post)
}

// plan computes the dry-run plan and writes it to status.
func (r *RetirementPlanReconciler) plan(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) error {
	fresh, _, err := r.assess(ctx, plan)
	if err != nil {
		return err
	}
	setPlanStatus(plan, fresh, r.Clock.Now())
	if err := r.Status().Update(ctx, plan); err != nil { // guarded by the resourceVersion read above
		return fmt.Errorf("writing plan status: %w", err)
	}
	plansTotal.WithLabelValues(retirement.OutcomePlanned).Inc()
	for reason, n := range fresh.PreservedReasonCounts {
		preservedTotal.WithLabelValues("plan", reason).Add(float64(n))
	}
	r.Recorder.Eventf(plan, nil, "Normal", fleetv1alpha1.ReasonPlanned, "Plan",
		"Planned: %d candidate(s), %d preserved of %d assessed", fresh.CandidateCount, fresh.PreservedCount, fresh.AssessedCount)
	return nil
}

// assess reads the registrations and task claims straight from the API server and
// builds the plan from them.
func (r *RetirementPlanReconciler) assess(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (retirement.Plan, []fleetv1alpha1.WorkerRegistration, error) {
	regs := &fleetv1alpha1.WorkerRegistrationList{}
	if err := r.APIReader.List(ctx, regs, client.InNamespace(plan.Namespace)); err != nil {
		return retirement.Plan{}, nil, fmt.Errorf("listing worker registrations: %w", err)
	}
	claims := &fleetv1alpha1.TaskClaimList{}
	if err := r.APIReader.List(ctx, claims, client.InNamespace(plan.Namespace)); err != nil {
		return retirement.Plan{}, nil, fmt.Errorf("listing task claims (the workflow fence): %w", err)
	}
	owners := workflowOwners(claims.Items)
	rows := make([]retirement.Row, 0, len(regs.Items))
	for i := range regs.Items {
		rows = append(rows, rowOf(&regs.Items[i]))
	}
	p := retirement.BuildPlan(retirement.Input{
		Rows:                 rows,
		CanonicalRepository:  r.canonicalRepository(plan),
		Now:                  r.Clock.Now(),
		Host:                 r.Host,
		Probes:               probeAll(ctx, r.Prober, regs.Items),
		ActiveWorkflowOwners: owners,
	})
	return p, regs.Items, nil
}

func (r *RetirementPlanReconciler) canonicalRepository(plan *fleetv1alpha1.RetirementPlan) string {
	if plan.Status.CanonicalRepository != "" {
		return plan.Status.CanonicalRepository
	}
	if plan.Spec.CanonicalRepository != "" {
		return plan.Spec.CanonicalRepository
	}
	return r.Repository
}

// checkApproval sets the Approved condition. It returns approved=true only when the
// approval repeats the plan exactly and the approver holds the approve verb.
func (r *RetirementPlanReconciler) checkApproval(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (bool, time.Duration, error) {
	a := plan.Spec.Approval
	reason, msg, wait := fleetv1alpha1.ReasonApprovalMatches, "The approval matches the plan and the approver holds the approve verb", time.Duration(0)
	if mismatch := approvalMismatch(plan); mismatch != "" {
		reason, msg = fleetv1alpha1.ReasonApprovalMismatch, mismatch
	} else if ok, why, err := r.Approvers.CanApprove(ctx, a.ApprovedBy, plan.Namespace); err != nil {
		return false, 0, err
	} else if !ok {
		reason, msg, wait = fleetv1alpha1.ReasonApproverNotAuthorized, why, approverRecheckInterval
	}
	approved := reason == fleetv1alpha1.ReasonApprovalMatches
	setApprovedCondition(plan, approved, reason, msg)
	if err := r.Status().Update(ctx, plan); err != nil {
		return false, 0, fmt.Errorf("writing the Approved condition: %w", err)
	}
	approvalsTotal.WithLabelValues(reason).Inc()
	if !approved {
		r.Recorder.Eventf(plan, nil, "Warning", reason, "Approve", "Not approved: %s", msg)
	}
	return approved, wait, nil
}

// apply re-reads everything, re-decides, and retires each surviving row with a
// resourceVersion-guarded write. It never returns an error: every failure is a report.
func (r *RetirementPlanReconciler) apply(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (retirement.ApplyReport, *fleetv1alpha1.PostApply) {
	a := plan.Spec.Approval
	approval := retirement.Approval{RegistryFingerprint: a.RegistryFingerprint, CandidateFingerprint: a.CandidateFingerprint, WorkerIdentities: a.WorkerIdentities}
	failed := func(detail string) retirement.ApplyReport {
		return retirement.ApplyReport{Outcome: retirement.OutcomeTransactionFailed, Detail: detail}
	}

	// The fence is read before the authoritative read, so a claim acquired at any point
	// after it is seen before the next write.
	fence, err := readWorkflowFence(ctx, r.APIReader, plan.Namespace)
	if err != nil {
		return failed(err.Error()), nil
	}
	fresh, items, err := r.assess(ctx, plan)
	if err != nil {
		return failed(err.Error()), nil
	}
	rows := make([]retirement.Row, 0, len(items))
	byName := make(map[string]*fleetv1alpha1.WorkerRegistration, len(items))
	for i := range items {
		rows = append(rows, rowOf(&items[i]))
		byName[items[i].Name] = &items[i]
	}
	decision := retirement.DecideApply(approval, fresh, rows)
	if !decision.Proceed {
		return retirement.Summarize(decision, nil, nil, ""), r.postApply(ctx, plan.Namespace)
	}
	if ok, why, err := r.Approvers.CanApprove(ctx, a.ApprovedBy, plan.Namespace); err != nil || !ok {
		if err != nil {
			why = err.Error()
		}
		return failed("the approver no longer holds the approve verb, nothing was retired: " + why), r.postApply(ctx, plan.Namespace)
	}

	var retired []string
	var preserved []retirement.Assessment
	interruption := ""
	for i, row := range decision.Retire {
		if r.BeforeWrite != nil {
			r.BeforeWrite(ctx, row.Name)
		}
		if moved, detail := r.fenceMoved(ctx, plan.Namespace, fence); moved {
			interruption = detail
			preserved = append(preserved, retirement.UntouchedAssessments(decision.Retire[i:], retirement.ReasonExternalFenceMoved, detail)...)
			break
		}
		wr := byName[row.Name].DeepCopy() // carries the resourceVersion just read
		var probe *retirement.Probe
		if r.Reprober != nil {
			p := probeOne(ctx, r.Reprober, wr)
			probe = &p
		}
		if ok, reason, detail := retirement.RecheckBeforeWrite(row, probe, r.Host); !ok {
			preserved = append(preserved, retirement.Assessment{WorkerIdentity: row.Name, ReasonCode: reason, Detail: detail})
			continue
		}
		now := metav1.NewTime(r.Clock.Now())
		wr.Status.Phase = fleetv1alpha1.PhaseRetired
		wr.Status.OwnershipState = fleetv1alpha1.OwnershipHistorical
		wr.Status.RetiredAt = &now
		wr.Status.RetiredBy = plan.Namespace + "/" + plan.Name
		wr.Status.RetirementReason = retirement.ReasonEligibleStaleOrphan
		if err := r.Status().Update(ctx, wr); err != nil {
			if apierrors.IsConflict(err) {
				preserved = append(preserved, retirement.Assessment{WorkerIdentity: row.Name, ReasonCode: retirement.ReasonRowChangedSincePlan,
					Detail: "the registration changed after it was read, so the guarded write was refused"})
				continue
			}
			interruption = fmt.Sprintf("writing %s failed: %v", row.Name, err)
			preserved = append(preserved, retirement.UntouchedAssessments(decision.Retire[i:], retirement.OutcomeTransactionFailed, interruption)...)
			break
		}
		retired = append(retired, row.Name)
		retiredTotal.Inc()
		r.Recorder.Eventf(wr, plan, "Normal", "Retired", "Retire", "Retired by RetirementPlan %s: the process is provably gone", plan.Name)
	}
	return retirement.Summarize(decision, retired, preserved, interruption), r.postApply(ctx, plan.Namespace)
}

// fenceMoved re-reads the workflow fence and compares it with the version the apply
// started from. An unreadable fence counts as moved: unreadable never equals unchanged.
func (r *RetirementPlanReconciler) fenceMoved(ctx context.Context, namespace, fence string) (bool, string) {
	now, err := readWorkflowFence(ctx, r.APIReader, namespace)
	if err != nil {
		return true, fmt.Sprintf("%s: the workflow fence could not be read (%v)", retirement.ReasonExternalFenceMoved, err)
	}
	if now != fence {
		return true, retirement.ReasonExternalFenceMoved + ": a task claim was acquired during apply; the remaining rows were left untouched"
	}
	return false, ""
}

// postApply reports the fleet as it is after the apply.
func (r *RetirementPlanReconciler) postApply(ctx context.Context, namespace string) *fleetv1alpha1.PostApply {
	regs := &fleetv1alpha1.WorkerRegistrationList{}
	if err := r.APIReader.List(ctx, regs, client.InNamespace(namespace)); err != nil {
		return nil
	}
	return postApplyOf(membersOf(regs.Items), r.Clock.Now())
}

// writeApplyStatus records the apply report. The rows are already written, so the report
// must not be lost to a conflicting plan update: it is retried on conflict.
func (r *RetirementPlanReconciler) writeApplyStatus(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, rep retirement.ApplyReport, post *fleetv1alpha1.PostApply) error {
	now := metav1.NewTime(r.Clock.Now())
	for attempt := 0; ; attempt++ {
		setApplyStatus(plan, rep, post, now)
		err := r.Status().Update(ctx, plan)
		if err == nil || !apierrors.IsConflict(err) || attempt == 5 {
			if err != nil {
				return fmt.Errorf("writing apply result %s: %w", rep.Outcome, err)
			}
			break
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
	if rep.Outcome != retirement.OutcomeApplied || rep.Interrupted {
		kind = "Warning"
	}
	reason := fleetv1alpha1.ReasonApplyRefused
	if c := meta.FindStatusCondition(plan.Status.Conditions, fleetv1alpha1.AppliedCondition); c != nil {
		reason = c.Reason
	}
	r.Recorder.Eventf(plan, nil, kind, reason, "Apply", "Apply finished with outcome %s: %d retired, %d preserved", rep.Outcome, rep.RetiredCount, len(rep.Preserved))
	return nil
}

// SetupWithManager registers the reconciler. Only spec changes (generation) matter: the
// plan is computed once and applied once.
func (r *RetirementPlanReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.RetirementPlan{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("retirementplan").
		Complete(r)
}
