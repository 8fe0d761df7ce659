package retirementplan

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// A host whose agent vanished after the fan-out (see retirement.HostAgentLost) would keep
// its fleet plan waiting forever. The fleet coordinator closes such a host's host plan
// the fail-closed way and writes no row: before the host planned, every row of the host
// is preserved as host_binding_unproven; before its apply started, the approved rows are
// preserved so and the host plan ends transaction_failed. An apply that recorded its
// intent keeps its crash-safe report: the coordinator takes its hold over once it lapsed
// and completes the report from the rows (settleApply), exactly as a returning agent
// would.

// eventHostAgentLost: a host plan was closed because its host's agent is gone.
const eventHostAgentLost = "HostAgentLost"

func (r *FleetPlanReconciler) hostAgentGrace() time.Duration {
	if r.HostAgentGrace <= 0 {
		return retirement.DefaultHostAgentGrace
	}
	return r.HostAgentGrace
}

// leaseOf is what the hosts' Leases say about hostID, for retirement.HostAgentLost. This
// manager's own agent counts as holding its host while it says so.
func (r *FleetPlanReconciler) leaseOf(hosts hostagent.Hosts, hostID string) (retirement.HostLease, time.Time) {
	if h, ok := hosts.Agent(hostID); ok {
		return retirement.HostLease{Held: true}, h.Expires
	}
	if r.HostPlans.holds(hostID) {
		return retirement.HostLease{Held: true}, time.Time{}
	}
	return retirement.HostLease{UnheldSince: hosts.Unheld[hostID]}, time.Time{}
}

// closeLostHosts looks at the host plans the fleet plan waits for (not planned yet, or,
// once approved, without an apply result) and closes those whose host's agent is lost.
// It returns when to look again while some host plan still waits for a live agent.
func (r *FleetPlanReconciler) closeLostHosts(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, approved bool) (ctrl.Result, error) {
	now := r.Clock.Now()
	hosts, err := hostagent.ListHosts(ctx, r.APIReader, r.AgentNamespace, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	children, err := r.hostPlans(ctx, plan)
	if err != nil {
		return ctrl.Result{}, err
	}
	grace := r.hostAgentGrace()
	var next time.Time
	later := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	var res ctrl.Result
	for _, h := range plan.Status.Hosts {
		child := children[h.HostID]
		if child == nil {
			continue
		}
		waiting := child.Status.Outcome == "" || (approved && child.Status.Outcome == retirement.OutcomePlanned)
		if !waiting {
			continue
		}
		lease, expires := r.leaseOf(hosts, h.HostID)
		lost, at := retirement.HostAgentLost(lease, now, grace)
		if !lost {
			later(at)
			if !expires.IsZero() {
				later(expires.Add(grace)) // the holder may stop renewing: look again then
			}
			continue
		}
		detail := retirement.LostHostDetail(h.HostID, lease, grace)
		logger := log.FromContext(ctx).WithValues("hostPlan", child.Name, "host", h.HostID)
		switch {
		case applyInProgress(child):
			// Crash-safe as ever: wait out the hold, then complete the report from the rows.
			unlock := r.HostPlans.lockPlan(client.ObjectKeyFromObject(child))
			got, err := r.HostPlans.settleApply(ctx, child)
			unlock()
			if err != nil {
				return ctrl.Result{}, err
			}
			if got.RequeueAfter > 0 {
				later(now.Add(got.RequeueAfter))
			}
			continue
		case child.Status.Outcome == "":
			logger.Info("The host's agent is gone before planning; its rows are preserved", "detail", detail)
			if err := r.planLostHost(ctx, child, detail); err != nil {
				return ctrl.Result{}, err
			}
		default:
			logger.Info("The host's agent is gone before its apply; nothing is retired on that host", "detail", detail)
			var ids []string
			if a := plan.Spec.Approval; a != nil {
				ids = retirement.HostIdentities(a.WorkerIdentities, child.Status.CandidateWorkerIdentities)
			}
			markLost(child, detail)
			if _, err := r.HostPlans.writeApplyStatus(ctx, child, retirement.LostHostApply(ids, detail), r.snapshot(ctx, child.Namespace), nil); err != nil {
				return ctrl.Result{}, err
			}
		}
		hostsLostTotal.Inc()
		r.Recorder.Eventf(plan, child, "Warning", eventHostAgentLost, "Plan", "Host plan %s closed without writing any row: %s", child.Name, detail)
	}
	// Every host plan closed so is listed among the hosts without an agent (derived from
	// the host plans, so a retried reconcile lists it too).
	for _, h := range plan.Status.Hosts {
		if c := children[h.HostID]; c != nil && meta.IsStatusConditionTrue(c.Status.Conditions, conditionHostAgentLost) {
			if err := r.listWithoutAgent(ctx, plan, h.HostID); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if !next.IsZero() {
		res.RequeueAfter = max(next.Sub(now), time.Second)
	}
	return res, nil
}

// conditionHostAgentLost is True on a host plan the fleet coordinator closed because its
// host's agent was gone.
const conditionHostAgentLost = "HostAgentLost"

func markLost(child *fleetv1alpha1.RetirementPlan, detail string) {
	conditions.Set(&child.Status.Conditions, child.Generation, conditionHostAgentLost, true, eventHostAgentLost, detail)
}

// planLostHost writes the dry run of a host plan whose host lost its agent before
// planning (retirement.LostHostPlan), every row preserved. The status write is guarded
// by the resourceVersion read, so an agent that came back and planned first wins; once it
// is in, the coordinator writes the plan's pages and records them.
func (r *FleetPlanReconciler) planLostHost(ctx context.Context, child *fleetv1alpha1.RetirementPlan, detail string) error {
	items, err := r.listRegistrations(ctx, child.Namespace)
	if err != nil {
		return err
	}
	canonical := retirement.CanonicalRepository(child.Status.CanonicalRepository, child.Spec.CanonicalRepository, r.Repository)
	p := retirement.LostHostPlan(apiconv.Rows(items), child.Spec.HostID, canonical, detail)
	setPlanStatus(child, p, r.Clock.Now())
	markLost(child, detail)
	child.Status.Pages = nil
	markHostPlan(child)
	child.Status.Snapshot = r.snapshotOf(child.Namespace, items)
	if err := r.Status().Update(ctx, child); err != nil {
		return fmt.Errorf("closing host plan %s: %w", child.Name, err)
	}
	// Should the coordinator stop before this, PagesReady stays absent, and the fleet
	// plan reports the host's pages as not written.
	pages, err := r.writePages(ctx, child, p)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		child.Status.Pages = pages
		conditions.Set(&child.Status.Conditions, child.Generation, fleetv1alpha1.PagesReadyCondition, true, fleetv1alpha1.ReasonPagesWritten,
			fmt.Sprintf("%d preserved page(s) hold every row", pages.Preserved))
		err := r.Status().Update(ctx, child)
		if apierrors.IsConflict(err) {
			if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(child), child); gerr != nil {
				return gerr
			}
		}
		return err
	})
}

// listWithoutAgent adds a lost host to the fleet plan's hostsWithoutAgent (once).
func (r *FleetPlanReconciler) listWithoutAgent(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, hostID string) error {
	s := &plan.Status
	for _, h := range s.HostsWithoutAgent {
		if h.HostID == hostID {
			return nil
		}
	}
	items, err := r.listRegistrations(ctx, plan.Namespace)
	if err != nil {
		return err
	}
	n := 0
	for i := range items {
		if items[i].Spec.Process.HostID == hostID && items[i].Status.Phase != fleetv1alpha1.PhaseRetired {
			n++
		}
	}
	if len(s.HostsWithoutAgent) < retirement.MaxFleetHosts {
		s.HostsWithoutAgent = append(s.HostsWithoutAgent, fleetv1alpha1.HostRowCount{HostID: hostID, RowCount: int32(n)})
	}
	s.HostsWithoutAgentCount++
	for i := range s.Hosts {
		if s.Hosts[i].HostID == hostID {
			s.Hosts[i].Agent = ""
		}
	}
	if err := r.Status().Update(ctx, plan); err != nil {
		return fmt.Errorf("listing host %s without an agent: %w", hostID, err)
	}
	return nil
}
