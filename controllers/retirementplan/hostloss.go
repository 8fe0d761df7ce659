package retirementplan

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// A host whose agent vanished after the fan-out (see retirement.HostAgentLost) would keep
// its fleet plan waiting forever. The host-plan reconciler of the fleet coordinator
// stands in for that agent and closes the host plan the fail-closed way, writing no row:
// before the host planned, every row of the host is preserved as host_binding_unproven;
// before its apply started, the approved rows are preserved so and the host plan ends
// transaction_failed. The close is one status write that also sets the HostAgentLost
// condition, guarded by the resourceVersion read before the decision, so an agent that
// came back and planned or recorded its intent first wins. An apply that recorded its
// intent keeps its crash-safe report: the stand-in takes its hold over once it lapsed and
// completes the report from the rows (completeLost). Unlike a returning agent it does not
// resume the apply: it cannot probe the host's processes. So it waits twice the takeover
// timeout (retirement.StandInTakeoverTimeout), and a returning agent takes over first.
// The fleet plan only reads the condition.

// eventHostAgentLost: a host plan was closed because its host's agent is gone.
const eventHostAgentLost = "HostAgentLost"

// conditionHostAgentLost is True on a host plan closed because its host's agent was gone.
const conditionHostAgentLost = "HostAgentLost"

func (r *HostPlanReconciler) hostAgentGrace() time.Duration {
	if r.HostAgentGrace <= 0 {
		return retirement.DefaultHostAgentGrace
	}
	return r.HostAgentGrace
}

// standsIn says whether this reconciler closes the host plans of lost hosts now: while
// this manager is the fleet coordinator (or, without a Coordinator, always).
func (r *HostPlanReconciler) standsIn() bool {
	return r.Coordinator == nil || r.Coordinator.Held()
}

// leaseOf is what the hosts' Leases say about hostID, for retirement.HostAgentLost.
func leaseOf(hosts hostagent.Hosts, hostID string) (retirement.HostLease, time.Time) {
	if h, ok := hosts.Agent(hostID); ok {
		return retirement.HostLease{Held: true}, h.Expires
	}
	return retirement.HostLease{UnheldSince: hosts.Unheld[hostID]}, time.Time{}
}

// reconcileLost looks at a host plan of a host this manager is not the agent of. While the
// plan waits for its host's agent (not planned yet, an apply in progress, or approved
// without an apply result), it closes the plan once that agent is lost, and otherwise
// says when to look again.
// model: apply.pml steps L1 (read the plan) and L2 (close it, guarded by its
// resourceVersion, only while no apply has started)
func (r *HostPlanReconciler) reconcileLost(ctx context.Context, key types.NamespacedName) (ctrl.Result, error) {
	plan := &fleetv1alpha1.RetirementPlan{}
	if err := r.APIReader.Get(ctx, key, plan); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	approval, parent, _ := r.hostApproval(ctx, plan)
	if !retirement.WaitsForAgent(plan.Status.Outcome, applyInProgress(plan), approval != nil) {
		return ctrl.Result{}, nil
	}
	now := r.Clock.Now()
	hosts, err := hostagent.ListHosts(ctx, r.APIReader, r.AgentNamespace, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	hostID, grace := plan.Spec.HostID, r.hostAgentGrace()
	lease, expires := leaseOf(hosts, hostID)
	verdict := retirement.JudgeLostHost(retirement.LostHostInput{Outcome: plan.Status.Outcome, ApplyInProgress: applyInProgress(plan),
		Approved: approval != nil, Lease: lease, LeaseExpires: expires, Now: now, Grace: grace})
	detail := retirement.LostHostDetail(hostID, lease, grace)
	logger := log.FromContext(ctx).WithValues("hostPlan", plan.Name, "host", hostID)
	switch verdict.Action {
	case retirement.LostHostLeave:
		return ctrl.Result{}, nil
	case retirement.LostHostWait:
		if verdict.RecheckAt.IsZero() {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{RequeueAfter: max(verdict.RecheckAt.Sub(now), time.Second)}, nil
	case retirement.LostHostSettleApply:
		// Crash-safe as ever: wait out the hold, then complete the report from the rows.
		// The stand-in is not on the rows' host, so it cannot re-probe them: it does not
		// resume.
		res, _, err := r.record(ctx, plan, r.completeLost(ctx, plan))
		return res, err
	case retirement.LostHostClosePlan:
		logger.Info("The host's agent is gone before planning; its rows are preserved", "detail", detail)
		if err := r.planLostHost(ctx, plan, detail); err != nil {
			return ctrl.Result{}, err
		}
	case retirement.LostHostCloseApply:
		logger.Info("The host's agent is gone before its apply; nothing is retired on that host", "detail", detail)
		rep := retirement.LostHostApply(approval.WorkerIdentities, detail)
		res, _, err := r.record(ctx, plan, hostResult{report: &rep, lost: detail})
		if err != nil || res.RequeueAfter > 0 || !meta.IsStatusConditionTrue(plan.Status.Conditions, conditionHostAgentLost) {
			return res, err
		}
	}
	hostsLostTotal.Inc()
	regarding := plan
	if parent != nil {
		regarding = parent
	}
	r.Recorder.Eventf(regarding, plan, "Warning", eventHostAgentLost, "Plan", "Host plan %s closed without writing any row: %s", plan.Name, detail)
	return ctrl.Result{}, nil
}

// lostCondition is the HostAgentLost condition a host plan closed for a lost agent
// carries, saying why.
func lostCondition(detail string) conditions.Cond {
	return conditions.Cond{Type: conditionHostAgentLost, True: true, Reason: eventHostAgentLost, Message: detail}
}

// planLostHost writes the dry run of a host plan whose host lost its agent before
// planning (retirement.LostHostPlan), every row preserved. The status write is guarded
// by the resourceVersion read, so an agent that came back and planned first wins; once it
// is in, the stand-in writes the plan's pages and records them.
func (r *HostPlanReconciler) planLostHost(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, detail string) error {
	items, err := r.listRegistrations(ctx, plan.Namespace)
	if err != nil {
		return err
	}
	bound, repos, err := r.binding(ctx, plan)
	if err != nil {
		return err
	}
	p := retirement.LostHostPlan(boundRows(items, r.Repository, repos), plan.Spec.HostID, bound.Repository, bound.Canonical(), detail)
	ready, conds := planStatus(plan, p, r.Clock.Now())
	conditions.Record(&plan.Status.Conditions, plan.Generation, ready, append(conds, lostCondition(detail))...)
	plan.Status.Pages = nil
	plan.Status.Snapshot = r.snapshotOf(plan.Namespace, items)
	if err := r.Status().Update(ctx, plan); err != nil {
		return fmt.Errorf("closing host plan %s: %w", plan.Name, err)
	}
	// Should the stand-in stop before this, PagesReady stays absent, and the fleet plan
	// reports the host's pages as not written.
	pages, err := r.writePages(ctx, plan, p)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		plan.Status.Pages = pages
		conditions.Set(&plan.Status.Conditions, plan.Generation, fleetv1alpha1.PagesReadyCondition, true, fleetv1alpha1.ReasonPagesWritten,
			fmt.Sprintf("%d preserved page(s) hold every row", pages.Preserved))
		err := r.Status().Update(ctx, plan)
		if apierrors.IsConflict(err) {
			if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(plan), plan); gerr != nil {
				return gerr
			}
		}
		return err
	})
}
