package retirementplan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// A RetirementPlan without spec.hostID is a fleet plan: one user action covering every
// host. See docs/retirementplan.md, "Several hosts".

// FleetPlanReconciler drives fleet plans (no spec.hostID): it splits the namespace's rows
// by host, creates one host plan per host that has an agent, judges the approval, and
// aggregates what the host plans report (a host plan closed because its agent was lost
// lists its host among the hosts without an agent). Only the fleet coordinator writes a
// fleet plan (Coordinator); no fleet-plan code writes a host plan.
type FleetPlanReconciler struct {
	*Deps
	// AgentNamespace holds the hosts' coordination Leases, read to learn which hosts have
	// an agent when a fleet plan fans out.
	AgentNamespace string
	// Coordinator is this manager's candidacy for the fleet coordinator Lease: only while
	// it holds that Lease does this reconciler fan out a fleet plan, write its status and
	// pages and create its host plans, so a fleet plan has one
	// writer. Nil: this reconciler drives every fleet plan it sees (a single manager, or a
	// test driving a reconciler by hand).
	Coordinator Coordinator
	// ApproverBackoff is how an approver that is not authorized yet is looked at again
	// (zero: retirement.DefaultApproverBackoff).
	ApproverBackoff retirement.Backoff

	// refusals counts, per plan UID, the consecutive ApproverNotAuthorized verdicts.
	refusals sync.Map
}

// Reconcile drives a fleet plan; it leaves host plans to HostPlanReconciler. Only the
// fleet coordinator writes a fleet plan, but one that just lost its Lease may have
// written it too: each attempt reads it afresh, and a conflict is answered by re-reading
// and deciding again.
func (r *FleetPlanReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	plan := &fleetv1alpha1.RetirementPlan{}
	for attempt := 0; ; attempt++ {
		if err := r.APIReader.Get(ctx, req.NamespacedName, plan); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if plan.Spec.HostID != "" {
			return ctrl.Result{}, nil
		}
		res, err := r.reconcileFleet(ctx, plan)
		if !apierrors.IsConflict(err) || attempt == maxFleetAttempts {
			return res, err
		}
		fleetConflicts.Inc()
	}
}

// maxFleetAttempts bounds the re-reads after conflicting writes of a fleet plan in one
// reconcile; then the error is returned and the work queue backs off.
const maxFleetAttempts = 5

// SetupWithManager registers the reconciler as "retirementplan-fleet".
func (r *FleetPlanReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return r.SetupWithManagerNamed(mgr, "retirementplan-fleet")
}

// SetupWithManagerNamed registers the reconciler under name, for fleet plans that pass
// preds. A fleet plan's own spec changes (generation) enqueue it, and so does any change
// of one of its host plans; when this manager becomes the fleet coordinator, every
// unfinished fleet plan is looked at again.
func (r *FleetPlanReconciler) SetupWithManagerNamed(mgr ctrl.Manager, name string, preds ...predicate.Predicate) error {
	fleetPlans := predicate.NewPredicateFuncs(func(o client.Object) bool { return !isHostPlan(o) })
	b := ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.RetirementPlan{}, builder.WithPredicates(append([]predicate.Predicate{fleetPlans, predicate.GenerationChangedPredicate{}}, preds...)...)).
		Watches(&fleetv1alpha1.RetirementPlan{}, handler.EnqueueRequestsFromMapFunc(fleetPlanOf), builder.WithPredicates(preds...)).
		Named(name).
		// Every manager runs it, and only the coordinator writes (coordinates): a standby
		// keeps its cache and queue warm, so taking over the Lease costs no resync.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)})
	if ch, ok := r.Coordinator.(interface {
		Changes() <-chan event.GenericEvent
	}); ok {
		b = b.WatchesRawSource(source.Channel(ch.Changes(), handler.EnqueueRequestsFromMapFunc(unfinishedPlans(r.Client, isFleetPlan))))
	}
	return b.Complete(r)
}

// fleetPlanOf maps a host plan to its fleet plan.
func fleetPlanOf(_ context.Context, o client.Object) []reconcile.Request {
	plan, ok := o.(*fleetv1alpha1.RetirementPlan)
	if !ok || plan.Spec.HostID == "" {
		return nil
	}
	if ref := metav1.GetControllerOf(plan); ref != nil && ref.Kind == kindRetirementPlan {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: plan.Namespace, Name: ref.Name}}}
	}
	return nil
}

// unfinishedPlans maps any event to the plans that keep are true of and that are not
// finished (no outcome yet, or planned): what a manager looks at again when it gains a
// Lease.
func unfinishedPlans(c client.Reader, keep func(*fleetv1alpha1.RetirementPlan) bool) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := &fleetv1alpha1.RetirementPlanList{}
		if err := c.List(ctx, list); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			p := &list.Items[i]
			if keep(p) && (p.Status.Outcome == "" || p.Status.Outcome == retirement.OutcomePlanned) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
			}
		}
		return out
	}
}

func isFleetPlan(p *fleetv1alpha1.RetirementPlan) bool { return p.Spec.HostID == "" }

// coordinates says whether this reconciler is the one writer of fleet plans now.
func (r *FleetPlanReconciler) coordinates() bool {
	return r.Coordinator == nil || r.Coordinator.Held()
}

// kindRetirementPlan is the kind a host plan's controller ownerReference names.
const kindRetirementPlan = "RetirementPlan"

// maxLabelValue is the longest label value Kubernetes accepts.
const maxLabelValue = 63

// shortHash is the first n hex digits of the SHA-256 of s.
func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// labelValue is the value a plan's name takes in a label (PlanLabel on its pages,
// FleetPlanLabel on a fleet plan's host plans): the name, or, when longer than a label
// value may be (a host plan's name is its fleet plan's and 10 more characters), its first
// 54 characters and a hash of the whole. Two names that share those 54 characters still
// differ in the hash; pages also carry the plan's full name and UID.
func labelValue(parent string) string {
	if len(parent) <= maxLabelValue {
		return parent
	}
	return parent[:maxLabelValue-9] + "-" + shortHash(parent, 8)
}

// HostPlanName is the name of fleet plan parent's host plan for hostID:
// "<parent>-h<first 8 hex digits of sha256(hostID)>", the parent's part shortened and
// hashed when the whole would exceed 253 characters. It depends on nothing else, so every
// agent names the same host plan alike.
func HostPlanName(parent, hostID string) string {
	suffix := "-h" + shortHash(hostID, 8)
	if len(parent)+len(suffix) <= 253 {
		return parent + suffix
	}
	return parent[:253-len(suffix)-9] + "-" + shortHash(parent, 8) + suffix
}

// reconcileFleet drives a fleet plan: fan out, wait for the host plans' plans, judge the
// approval as for any plan, wait for the host plans' applies, aggregate. Every step is a
// function of what the API server holds, and only the fleet coordinator runs it; the
// host plans are planned and applied by their hosts' agents (HostPlanReconciler), whose
// every write enqueues the fleet plan again. Should two managers run it (a coordinator
// that lost its Lease mid-reconcile), they converge: writes are guarded by
// resourceVersion, and a conflict is retried from a fresh read.
func (r *FleetPlanReconciler) reconcileFleet(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (ctrl.Result, error) {
	if !r.coordinates() {
		fleetStandbyTotal.Inc()
		return ctrl.Result{}, nil
	}
	if plan.Status.Outcome != "" && pagesPending(plan) {
		// Host plans write their pages after they are planned, and the fleet plan may be
		// applied by then: its pages are recorded whatever its outcome.
		if err := r.refreshFleetPages(ctx, plan); err != nil {
			return ctrl.Result{}, err
		}
	}
	switch plan.Status.Outcome {
	case "":
		planned, err := r.planFleet(ctx, plan)
		if err != nil || !planned {
			return ctrl.Result{}, err
		}
	case retirement.OutcomePlanned:
	default:
		return ctrl.Result{}, nil
	}
	if plan.Spec.Approval == nil {
		return ctrl.Result{}, nil
	}
	if !approvedNow(plan) {
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
	}
	return ctrl.Result{}, r.aggregateApply(ctx, plan)
}

// planFleet fans a fleet plan out (once), creates its host plans, and aggregates their
// dry runs once every one is planned.
func (r *FleetPlanReconciler) planFleet(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (bool, error) {
	if plan.Status.RegistryFingerprint == "" {
		if err := r.fanOut(ctx, plan); err != nil {
			return false, err
		}
	}
	if err := r.ensureHostPlans(ctx, plan); err != nil {
		return false, err
	}
	planned, err := r.aggregatePlan(ctx, plan)
	if err != nil || !planned {
		return false, err // a host plan's change enqueues the fleet plan again
	}
	log.FromContext(ctx).Info("Planned", "hosts", len(plan.Status.Hosts), "candidates", plan.Status.CandidateCount, "preserved", plan.Status.PreservedCount)
	return true, nil
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
	rows := apiconv.Rows(reads.items)
	f := retirement.PlanFanout(rows, func(h string) bool { _, ok := reads.hosts.Agent(h); return ok })
	// The rows no host plan covers are this fleet plan's own verdicts: their pages are
	// written before the status that records them, like any plan's.
	own, err := r.writePages(ctx, plan, retirement.Plan{Preserved: f.Uncovered})
	if err != nil {
		return err
	}
	s := &plan.Status
	s.Pages = own
	s.CanonicalRepository = retirement.CanonicalRepository(s.CanonicalRepository, plan.Spec.CanonicalRepository, r.Repository)
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

func int32Counts(m map[string]int) map[string]int32 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int32, len(m))
	for k, v := range m {
		out[k] = int32(v)
	}
	return out
}

func intCounts(m map[string]int32) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = int(v)
	}
	return out
}

// ensureHostPlans creates the host plans the fan-out recorded (idempotent: the names are
// deterministic, and one that exists already is checked, not changed).
func (r *FleetPlanReconciler) ensureHostPlans(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) error {
	for _, h := range plan.Status.Hosts {
		child := &fleetv1alpha1.RetirementPlan{
			ObjectMeta: metav1.ObjectMeta{Name: h.Plan, Namespace: plan.Namespace, Labels: map[string]string{fleetv1alpha1.FleetPlanLabel: labelValue(plan.Name)}},
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

// shares reads the host plans of a fleet plan as the aggregate sees them, in the order of
// status.hosts (sorted by host id).
func (r *FleetPlanReconciler) shares(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) ([]retirement.HostShare, map[string]*fleetv1alpha1.RetirementPlan, error) {
	children, err := r.hostPlans(ctx, plan)
	if err != nil {
		return nil, nil, err
	}
	out := make([]retirement.HostShare, 0, len(plan.Status.Hosts))
	for _, h := range plan.Status.Hosts {
		out = append(out, shareOf(h, children[h.HostID]))
	}
	return out, children, nil
}

// recordFleetPages sets a planned fleet plan's PagesReady from its host plans' and, once
// every host plan's pages are written, its status.pages.
func (r *FleetPlanReconciler) recordFleetPages(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, children map[string]*fleetv1alpha1.RetirementPlan) error {
	hosts := make([]retirement.HostPages, 0, len(plan.Status.Hosts))
	for _, h := range plan.Status.Hosts {
		hp := retirement.HostPages{HostID: h.HostID, AgentLost: h.Agent == ""}
		if c := children[h.HostID]; c != nil {
			if cond := meta.FindStatusCondition(c.Status.Conditions, fleetv1alpha1.PagesReadyCondition); cond != nil {
				hp.State = cond.Reason
			}
			hp.AgentLost = hp.AgentLost || meta.IsStatusConditionTrue(c.Status.Conditions, conditionHostAgentLost)
		}
		hosts = append(hosts, hp)
	}
	reason, message := retirement.FleetPages(hosts)
	written := reason == fleetv1alpha1.ReasonPagesWritten
	conditions.Set(&plan.Status.Conditions, plan.Generation, fleetv1alpha1.PagesReadyCondition, written, reason, message)
	plan.Status.Pages = nil
	if written {
		pages, err := r.fleetPages(ctx, plan, children)
		if err != nil {
			return err
		}
		plan.Status.Pages = pages
	}
	return nil
}

// refreshFleetPages records a planned fleet plan's pages as its host plans write theirs.
func (r *FleetPlanReconciler) refreshFleetPages(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) error {
	children, err := r.hostPlans(ctx, plan)
	if err != nil {
		return err
	}
	before := plan.Status.DeepCopy()
	if err := r.recordFleetPages(ctx, plan, children); err != nil {
		return err
	}
	return r.updateIfChanged(ctx, plan, before)
}

// fleetPages is a planned fleet plan's status.pages: the page counts of its host plans
// and of its own pages (the rows no host plan covers, written at fan-out), and the
// selector that lists them all.
func (r *FleetPlanReconciler) fleetPages(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, children map[string]*fleetv1alpha1.RetirementPlan) (*fleetv1alpha1.RetirementPlanPages, error) {
	out := &fleetv1alpha1.RetirementPlanPages{Selector: fleetPagesSelector(plan)}
	for _, h := range plan.Status.Hosts {
		if c := children[h.HostID]; c != nil && c.Status.Pages != nil {
			out.Candidates += c.Status.Pages.Candidates
			out.Preserved += c.Status.Pages.Preserved
		}
	}
	// The fleet plan's own pages hold only Preserved rows; their metadata is enough.
	own := &metav1.PartialObjectMetadataList{}
	own.SetGroupVersionKind(fleetv1alpha1.GroupVersion.WithKind("RetirementPlanPageList"))
	if err := r.APIReader.List(ctx, own, client.InNamespace(plan.Namespace), client.MatchingLabels{fleetv1alpha1.PlanLabel: labelValue(plan.Name)}); err != nil {
		return nil, fmt.Errorf("listing the fleet plan's own pages: %w", err)
	}
	for i := range own.Items {
		if metav1.IsControlledBy(&own.Items[i], plan) {
			out.Preserved++
		}
	}
	return out, nil
}

// recordShares copies each host plan's outcome and counts into status.hosts.
func recordShares(plan *fleetv1alpha1.RetirementPlan, shares []retirement.HostShare) {
	for i := range plan.Status.Hosts {
		h, s := &plan.Status.Hosts[i], shares[i]
		h.Outcome, h.CandidateFingerprint = s.Outcome, s.CandidateFingerprint
		h.CandidateCount, h.PreservedCount = int32(s.CandidateCount), int32(s.PreservedCount)
		h.RetiredCount = 0
		if s.Apply != nil {
			h.RetiredCount = int32(s.Apply.RetiredCount)
		}
	}
}

// aggregatePlan writes the fleet plan's dry run once every host plan is planned.
func (r *FleetPlanReconciler) aggregatePlan(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (bool, error) {
	shares, children, err := r.shares(ctx, plan)
	if err != nil {
		return false, err
	}
	s := &plan.Status
	before := s.DeepCopy()
	if err := r.recordLostHosts(ctx, plan, children); err != nil {
		return false, err
	}
	fp := retirement.AggregatePlan(shares, retirement.Uncovered{
		Listed: apiconv.AssessmentsOf(s.Preserved), Count: int(s.PreservedCount),
		ReasonCounts: intCounts(s.PreservedReasonCounts), HostsWithoutAgent: int(s.HostsWithoutAgentCount),
	})
	recordShares(plan, shares)
	if !fp.Planned {
		conditions.SetReadiness(&s.Conditions, plan.Generation, conditions.Readiness{Reconciling: true, Reason: fleetv1alpha1.ReasonWaitingForHostPlans, Message: fp.Message})
		return false, r.updateIfChanged(ctx, plan, before)
	}
	for _, sh := range shares { // every host plan records the binding it planned with
		if sh.CanonicalRepository != "" {
			s.CanonicalRepository = sh.CanonicalRepository
			break
		}
	}
	setFleetPlanStatus(plan, fp, r.Clock.Now())
	if err := r.recordFleetPages(ctx, plan, children); err != nil {
		return false, err
	}
	if err := r.Status().Update(ctx, plan); err != nil {
		return false, fmt.Errorf("writing the fleet plan: %w", err)
	}
	plansTotal.WithLabelValues(retirement.OutcomePlanned).Inc()
	r.Recorder.Eventf(plan, nil, "Normal", fleetv1alpha1.ReasonPlanned, "Plan",
		"Planned over %d host(s): %d candidate(s), %d preserved of %d assessed (%d host(s) without an agent)",
		len(shares), fp.CandidateCount, fp.PreservedCount, fp.AssessedCount, s.HostsWithoutAgentCount)
	return true, nil
}

// aggregateApply writes the fleet plan's apply result once every host plan has one.
func (r *FleetPlanReconciler) aggregateApply(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) error {
	shares, children, err := r.shares(ctx, plan)
	if err != nil {
		return err
	}
	rep, message, done := retirement.AggregateApply(shares)
	before := plan.Status.DeepCopy()
	if err := r.recordLostHosts(ctx, plan, children); err != nil {
		return err
	}
	recordShares(plan, shares)
	if pagesPending(plan) { // a host plan may have written its pages just before its apply
		if err := r.recordFleetPages(ctx, plan, children); err != nil {
			return err
		}
	}
	if !done {
		return r.updateIfChanged(ctx, plan, before)
	}
	verdict := retirement.JudgeApply(rep)
	if message != "" {
		verdict.Message = message
	}
	post := r.snapshot(ctx, plan.Namespace)
	now := metav1.NewTime(r.Clock.Now())
	for attempt := 0; ; attempt++ {
		setApplyStatus(plan, rep, verdict, post, now)
		err := r.Status().Update(ctx, plan)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt == 5 {
			return fmt.Errorf("writing the fleet apply result %s: %w", rep.Outcome, err)
		}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(plan), plan); err != nil {
			return fmt.Errorf("re-reading the fleet plan: %w", err)
		}
		if plan.Status.Outcome != retirement.OutcomePlanned {
			return nil // another agent recorded the same aggregate
		}
		if err := r.recordLostHosts(ctx, plan, children); err != nil {
			return err
		}
		recordShares(plan, shares)
		if pagesPending(plan) {
			if err := r.recordFleetPages(ctx, plan, children); err != nil {
				return err
			}
		}
	}
	plansTotal.WithLabelValues(rep.Outcome).Inc()
	kind := "Normal"
	if !verdict.Succeeded {
		kind = "Warning"
	}
	r.Recorder.Eventf(plan, nil, kind, verdict.Reason, "Apply", "Fleet apply over %d host(s) finished with outcome %s: %d retired, %d preserved",
		len(shares), rep.Outcome, rep.RetiredCount, len(rep.Preserved))
	return nil
}

// updateIfChanged writes the plan's status when it differs from before.
func (r *FleetPlanReconciler) updateIfChanged(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, before *fleetv1alpha1.RetirementPlanStatus) error {
	if equalStatus(before, &plan.Status) {
		return nil
	}
	if err := r.Status().Update(ctx, plan); err != nil {
		return fmt.Errorf("recording the host plans' progress: %w", err)
	}
	return nil
}

// checkApproval records the Approved condition: true only when the approval repeats the
// plan exactly, the guarding admission policy vouches for it, and the approver is no
// worker and holds the approve verb. A refusal is announced by a Warning event when it
// is new, not on every recheck.
func (r *FleetPlanReconciler) checkApproval(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) (retirement.ApprovalVerdict, error) {
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
