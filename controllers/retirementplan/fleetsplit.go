package retirementplan

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// The fan-out: how a fleet plan splits the namespace's rows by host, once, and the host
// plans it creates for the hosts that have an agent.

// split fans a fleet plan out (once) and creates the host plans the fan-out recorded.
func (r *FleetPlanReconciler) split(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, ph fleetPhase) error {
	if plan.Status.RegistryFingerprint == "" {
		if err := r.fanOut(ctx, plan); err != nil {
			return err
		}
	}
	return r.ensureHostPlans(ctx, plan, ph.label)
}

// fanoutReads is what a fleet plan reads when it splits the namespace by host: every
// registration, straight from the API server, the resourceVersion of that view, and
// which hosts have an agent now.
type fanoutReads struct {
	items           []fleetv1alpha1.WorkerRegistration
	resourceVersion string
	hosts           hostagent.Hosts
}

func (r *FleetPlanReconciler) readFanout(ctx context.Context, namespace string) (fanoutReads, error) {
	items, rv, err := r.listRegistrationsAt(ctx, namespace, "")
	if err != nil {
		return fanoutReads{}, err
	}
	hosts, err := hostagent.ListHosts(ctx, r.APIReader, r.AgentNamespace, r.Clock.Now())
	if err != nil {
		return fanoutReads{}, err
	}
	return fanoutReads{items: items, resourceVersion: rv, hosts: hosts}, nil
}

// fanOut reads the namespace's rows and the hosts' Leases once, and records how the fleet
// plan splits: a host plan for each host with Active rows and an agent, the hosts without
// one, the rows no host plan covers, the registry fingerprint and the snapshot. The write
// is guarded: should two coordinators fan out at once, one wins and the other re-reads.
func (r *FleetPlanReconciler) fanOut(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) error {
	reads, err := r.readFanout(ctx, plan.Namespace)
	if err != nil {
		return err
	}
	bound, repos, err := r.binding(ctx, plan)
	if err != nil {
		return err
	}
	rows := boundRows(reads.items, r.Repository, repos)
	f := retirement.PlanFanout(rows, func(h string) bool { _, ok := reads.hosts.Agent(h); return ok })
	// The rows no host plan covers are this fleet plan's own verdicts: their pages are
	// written before the status that records them, like any plan's.
	own, err := r.writePages(ctx, plan, retirement.Plan{Preserved: f.Uncovered})
	if err != nil {
		return err
	}
	s := &plan.Status
	s.Pages = own
	s.CanonicalRepository = bound.Repository
	s.RegistryFingerprint = retirement.RegistryFingerprint(rows)
	s.RegistryResourceVersion = reads.resourceVersion
	s.Hosts = nil
	for _, h := range f.Hosts {
		agent, _ := reads.hosts.Agent(h)
		s.Hosts = append(s.Hosts, fleetv1alpha1.HostPlanStatus{HostID: h, Plan: HostPlanName(plan.Name, h), Agent: agent.Agent})
	}
	s.HostsWithoutAgent = nil
	for _, h := range f.WithoutAgent[:min(len(f.WithoutAgent), retirement.MaxFleetHosts)] {
		s.HostsWithoutAgent = append(s.HostsWithoutAgent, fleetv1alpha1.HostRowCount{HostID: h.HostID, RowCount: int32(h.RowCount)})
	}
	s.HostsWithoutAgentCount = int32(len(f.WithoutAgent))
	u := retirement.UncoveredOf(f)
	s.Preserved = apiconv.Assessments(u.Listed)
	s.PreservedReasonCounts = int32Counts(u.ReasonCounts)
	s.PreservedCount, s.AssessedCount = int32(u.Count), int32(u.Count)
	s.Snapshot = r.snapshotOf(plan.Namespace, reads.items)
	s.ObservedGeneration = plan.Generation
	conditions.SetReadiness(&s.Conditions, plan.Generation, conditions.Readiness{Reconciling: true, Reason: fleetv1alpha1.ReasonWaitingForHostPlans,
		Message: fmt.Sprintf("Waiting for the agents of %d host(s) to plan their rows", len(s.Hosts))})
	if err := r.Status().Update(ctx, plan); err != nil {
		return fmt.Errorf("recording the fleet plan's hosts: %w", err)
	}
	if slices.Contains(f.Hosts, r.Host.HostID) {
		// This manager's own agent plans its host at this view next (gather.go).
		r.views.keep(plan.Namespace, reads.resourceVersion, reads.items)
	}
	fleetPlanHosts.WithLabelValues(plan.Namespace, "with_agent").Set(float64(len(f.Hosts)))
	fleetPlanHosts.WithLabelValues(plan.Namespace, "without_agent").Set(float64(len(f.WithoutAgent)))
	if len(f.WithoutAgent) > 0 {
		r.Recorder.Eventf(plan, nil, "Warning", "HostsWithoutAgent", "Plan",
			"%d host(s) with Active registrations have no agent; their %d row(s) are preserved as %s", len(f.WithoutAgent), u.ReasonCounts[retirement.ReasonHostBindingUnproven], retirement.ReasonHostBindingUnproven)
	}
	return nil
}

// ensureHostPlans creates the host plans the fan-out recorded (idempotent: the names are
// deterministic, and one that exists already is checked, not changed).
func (r *FleetPlanReconciler) ensureHostPlans(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, label string) error {
	for _, h := range plan.Status.Hosts {
		child := &fleetv1alpha1.RetirementPlan{
			ObjectMeta: metav1.ObjectMeta{Name: h.Plan, Namespace: plan.Namespace, Labels: map[string]string{fleetv1alpha1.FleetPlanLabel: label}},
			Spec: fleetv1alpha1.RetirementPlanSpec{Remote: plan.Spec.Remote, Host: plan.Spec.Host, Org: plan.Spec.Org, Repo: plan.Spec.Repo,
				CanonicalRepository: plan.Status.CanonicalRepository, HostID: h.HostID},
		}
		if err := controllerutil.SetControllerReference(plan, child, r.Scheme()); err != nil {
			return err
		}
		err := r.Create(ctx, child)
		switch {
		case err == nil:
			hostPlansCreated.Inc()
			r.Recorder.Eventf(plan, child, "Normal", "HostPlanCreated", "Plan", "Created host plan %s for host %s", child.Name, h.HostID)
		case apierrors.IsAlreadyExists(err):
			cur := &fleetv1alpha1.RetirementPlan{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(child), cur); err != nil {
				return fmt.Errorf("reading host plan %s: %w", child.Name, err)
			}
			if ref := metav1.GetControllerOf(cur); ref == nil || ref.UID != plan.UID || cur.Spec.HostID != h.HostID {
				return fmt.Errorf("a RetirementPlan %s exists that is not this fleet plan's host plan for host %q", child.Name, h.HostID)
			}
		default:
			return fmt.Errorf("creating host plan %s: %w", child.Name, err)
		}
	}
	return nil
}
