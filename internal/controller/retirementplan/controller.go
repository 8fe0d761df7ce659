// Package retirementplan holds the RetirementPlan reconciler: it plans retirements as a
// dry run, checks the approval, and applies an approved plan exactly once.
//
// Reconcile reads the plan, asks internal/retirement for every decision (the plan, the
// approval verdict, the apply decision, each row's recheck, the report), and writes the
// result: gather.go reads the world, apply.go is the guarded write sequence, status.go
// records the answers.
package retirementplan

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// ApproverChecker answers what an approval verdict needs to know about who approved:
// whether the subject (approvedBy with approvedGroups) may approve in the namespace,
// whether it is a worker, and whether the admission policy that guards approvals is
// installed as shipped.
type ApproverChecker interface {
	CanApprove(ctx context.Context, s authz.Subject, namespace string) (allowed bool, reason string, err error)
	WorkerFacts(ctx context.Context, s authz.Subject, namespace string) (retirement.SubjectFacts, error)
	ApprovalGuard(ctx context.Context) (retirement.ApprovalGuard, error)
}

// Fence is the workflow fence: it moves whenever a task claim is acquired.
type Fence interface {
	Read(ctx context.Context, namespace string) (string, error)
	Moved(ctx context.Context, namespace, since string) (bool, error)
}

// Reconciler plans retirements as a dry run and applies an approved plan.
type Reconciler struct {
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
	// Approvers checks the approver and the guarding policy when the approval lands,
	// right before the first write, and again during a long apply.
	Approvers ApproverChecker
	// ApproverRecheck is how often a long apply checks the approval again (zero:
	// retirement.DefaultApproverRecheck).
	ApproverRecheck retirement.Recheck
	// ApproverBackoff is how an approver that is not authorized yet is looked at again
	// (zero: retirement.DefaultApproverBackoff).
	ApproverBackoff retirement.Backoff
	// refusals counts, per plan UID, the consecutive ApproverNotAuthorized verdicts.
	refusals sync.Map
	// Fence is the workflow fence, read before the authoritative read and before each row.
	Fence    Fence
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	// PageRows caps the rows of one RetirementPlanPage (zero: retirement.PageMaxRows).
	PageRows int
	// BeforeWrite, when set, runs right before each row's fence check and guarded write.
	// It is a test seam for interleaving concurrent changes.
	BeforeWrite func(ctx context.Context, worker string)

	// The single applier (intent.go).

	// ApplierID names this applier in status.applyProgress (empty: ProcessApplierID, the
	// host name and a random suffix minted once per process).
	ApplierID string
	// TakeoverTimeout is how long an apply's hold lasts without renewal before another
	// reconcile takes it over and completes the report (zero:
	// retirement.DefaultTakeoverTimeout).
	TakeoverTimeout time.Duration
	// AfterWrite, when set, runs right after each successful row write. An error abandons
	// the apply at once, writing nothing more (no row, no renewal, no report), as if the
	// process had died there: a test seam for crashes between two row writes.
	AfterWrite func(ctx context.Context, worker string) error
}

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplans,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplans/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=workerregistrations,verbs=retire
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update

// Reconcile plans, checks the approval, and applies an approved plan exactly once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	plan := &fleetv1alpha1.RetirementPlan{}
	if err := r.Get(ctx, req.NamespacedName, plan); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	logger := log.FromContext(ctx) // carries the RetirementPlan's namespace and name

	// An apply recorded as in progress: wait for its holder, or take over a lapsed hold
	// and complete the report from the rows (intent.go). Nothing else touches such a plan.
	if applyInProgress(plan) {
		return r.settleApply(ctx, plan)
	}

	if plan.Status.Outcome != "" && plan.Status.Outcome != retirement.OutcomePlanned {
		return ctrl.Result{}, nil // applied (or refused) once; a new attempt is a new plan
	}
	if plan.Status.Outcome == "" {
		if err := r.plan(ctx, plan); err != nil {
			return ctrl.Result{}, err
		}
		logger.Info("Planned", "candidates", plan.Status.CandidateCount, "preserved", plan.Status.PreservedCount)
	}
	if plan.Spec.Approval == nil {
		return ctrl.Result{}, nil
	}
	verdict, err := r.checkApproval(ctx, plan)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !verdict.Approved {
		if verdict.Final {
			r.refusals.Delete(plan.UID)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{RequeueAfter: r.nextApproverCheck(plan.UID)}, nil
	}
	r.refusals.Delete(plan.UID)
	return r.applyApproved(ctx, plan) // apply.go: intent, guarded row writes, report
}

// plan computes the dry-run plan and writes it to status.
func (r *Reconciler) plan(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) error {
	fresh, err := r.assess(ctx, plan)
	if err != nil {
		return err
	}
	pages, err := r.writePages(ctx, plan, fresh.plan)
	if err != nil {
		return err
	}
	setPlanStatus(plan, fresh.plan, r.Clock.Now())
	plan.Status.Pages = pages
	plan.Status.Snapshot = r.snapshotOf(plan.Namespace, fresh.items)
	if err := r.Status().Update(ctx, plan); err != nil { // guarded by the resourceVersion read above
		return fmt.Errorf("writing plan status: %w", err)
	}
	p := fresh.plan
	plansTotal.WithLabelValues(retirement.OutcomePlanned).Inc()
	for reason, n := range p.PreservedReasonCounts {
		preservedTotal.WithLabelValues("plan", reason).Add(float64(n))
	}
	r.Recorder.Eventf(plan, nil, "Normal", fleetv1alpha1.ReasonPlanned, "Plan",
		"Planned: %d candidate(s), %d preserved of %d assessed", p.CandidateCount, p.PreservedCount, p.AssessedCount)
	return nil
}

// checkApproval records the Approved condition: true only when the approval repeats the
// plan exactly, the guarding admission policy vouches for it, and the approver is no
// worker and holds the approve verb. A refusal is announced by a Warning event when it
// is new, not on every recheck.
func (r *Reconciler) checkApproval(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (retirement.ApprovalVerdict, error) {
	previous := ""
	if c := meta.FindStatusCondition(plan.Status.Conditions, fleetv1alpha1.ApprovedCondition); c != nil {
		previous = c.Reason
	}
	verdict, err := r.judgeApproval(ctx, plan)
	if err != nil {
		return retirement.ApprovalVerdict{}, err
	}
	setApproval(plan, verdict)
	if err := r.Status().Update(ctx, plan); err != nil {
		return retirement.ApprovalVerdict{}, fmt.Errorf("writing the Approved condition: %w", err)
	}
	approvalsTotal.WithLabelValues(verdict.Reason).Inc()
	if retirement.ApprovalEventDue(previous, verdict) {
		r.Recorder.Eventf(plan, nil, "Warning", verdict.Reason, "Approve", "Not approved: %s", verdict.Message)
	}
	return verdict, nil
}

// SetupWithManager registers the reconciler. Only spec changes (generation) matter: the
// plan is computed once and applied once.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.RetirementPlan{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("retirementplan").
		Complete(r)
}
