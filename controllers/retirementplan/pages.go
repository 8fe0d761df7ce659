package retirementplan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// pageWriters is how many pages are written at once.
const pageWriters = 4

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplanpages,verbs=get;list;create;update;delete
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=retirementplans/finalizers,verbs=update

// pageLabels are the labels of a plan's pages: PlanLabel with the plan's name and, for a
// fleet plan and for a host plan of one, fleetv1alpha1.FleetPlanLabel with the fleet plan's label
// value, so one selector lists every row of a fleet.
func pageLabels(plan *fleetv1alpha1.RetirementPlan) map[string]string {
	labels := map[string]string{fleetv1alpha1.PlanLabel: labelValue(plan.Name)}
	if fleet := fleetLabelOf(plan); fleet != "" {
		labels[fleetv1alpha1.FleetPlanLabel] = fleet
	}
	return labels
}

// fleetLabelOf is the fleetv1alpha1.FleetPlanLabel value that groups a plan's pages with its fleet's:
// a fleet plan's own, or a host plan's fleet plan's (the label its fleet plan gave it);
// "" for a host plan that belongs to no fleet plan.
func fleetLabelOf(plan *fleetv1alpha1.RetirementPlan) string {
	if plan.Spec.HostID == "" {
		return labelValue(plan.Name)
	}
	if ref := metav1.GetControllerOf(plan); ref != nil && ref.Kind == kindRetirementPlan {
		return plan.Labels[fleetv1alpha1.FleetPlanLabel]
	}
	return ""
}

// writePages writes the plan's full candidates and preserved lists as RetirementPlanPages
// owned by the plan, and removes pages of an earlier attempt that the lists no longer
// fill. It runs before the plan's status is written, so a status that names its pages
// finds them. Pages are read and written straight through the API server: the manager
// never caches them, whatever the fleet's size. The counts returned are this plan's own
// pages, listed by PlanLabel.
func (r *Deps) writePages(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, p retirement.Plan) (*fleetv1alpha1.RetirementPlanPages, error) {
	want := map[string]bool{}
	labels := pageLabels(plan)
	// Pages are independent objects: they are written concurrently, a few at a time, so
	// the API server's decoding and storage of one overlaps with the next.
	writes, wctx := errgroup.WithContext(ctx)
	writes.SetLimit(pageWriters)
	out := &fleetv1alpha1.RetirementPlanPages{Selector: fleetv1alpha1.PlanLabel + "=" + labelValue(plan.Name)}
	for _, list := range []struct {
		name  string
		short string
		rows  []retirement.Assessment
		count *int32
	}{
		{fleetv1alpha1.PageListCandidates, "c", p.Candidates, &out.Candidates},
		{fleetv1alpha1.PageListPreserved, "p", p.Preserved, &out.Preserved},
	} {
		pages := retirement.Paginate(list.rows, r.pageRows(), retirement.PageMaxBytes)
		*list.count = int32(len(pages))
		for i, rows := range pages {
			list := list
			page := &fleetv1alpha1.RetirementPlanPage{
				ObjectMeta: metav1.ObjectMeta{Name: pageName(plan.Name, list.short, i+1), Namespace: plan.Namespace},
			}
			want[page.Name] = true
			fill := func() error {
				page.Labels = maps.Clone(labels)
				page.OwnerReferences = nil
				page.Plan, page.PlanUID, page.List = plan.Name, string(plan.UID), list.name
				page.Page, page.PageCount, page.RowCount = int32(i+1), int32(len(pages)), int32(len(rows))
				page.Shared, page.Rows = apiconv.Page(rows)
				return controllerutil.SetControllerReference(plan, page, r.Scheme())
			}
			writes.Go(func() error { return r.putPage(wctx, page, fill) })
		}
	}
	if err := writes.Wait(); err != nil {
		return nil, err
	}
	if err := r.deletePagesExcept(ctx, plan, want); err != nil {
		return nil, err
	}
	return out, nil
}

// deletePagesExcept deletes the pages plan controls whose names keep does not hold: the
// leftovers of an earlier, larger paging, or (keep empty) every page of a plan whose
// pages are reported as not written.
func (r *Deps) deletePagesExcept(ctx context.Context, plan *fleetv1alpha1.RetirementPlan, keep map[string]bool) error {
	// Which pages exist is all this needs: their metadata, not their rows.
	existing := &metav1.PartialObjectMetadataList{}
	existing.SetGroupVersionKind(fleetv1alpha1.GroupVersion.WithKind("RetirementPlanPageList"))
	if err := r.APIReader.List(ctx, existing, client.InNamespace(plan.Namespace), client.MatchingLabels{fleetv1alpha1.PlanLabel: labelValue(plan.Name)}); err != nil {
		return fmt.Errorf("listing the plan's pages: %w", err)
	}
	for i := range existing.Items {
		if old := &existing.Items[i]; !keep[old.Name] && metav1.IsControlledBy(old, plan) {
			stale := &fleetv1alpha1.RetirementPlanPage{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: old.Namespace}}
			if err := r.Delete(ctx, stale, client.Preconditions{UID: &old.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting page %s: %w", old.Name, err)
			}
		}
	}
	return nil
}

// putPage creates a page, or overwrites the one an earlier attempt (or a deleted plan of
// the same name) left under its name.
func (r *Deps) putPage(ctx context.Context, page *fleetv1alpha1.RetirementPlanPage, fill func() error) error {
	if err := fill(); err != nil {
		return err
	}
	err := r.Create(ctx, page)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating page %s: %w", page.Name, err)
		}
		return nil
	}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(page), page); err != nil {
		return fmt.Errorf("reading page %s: %w", page.Name, err)
	}
	if err := fill(); err != nil {
		return err
	}
	if err := r.Update(ctx, page); err != nil {
		return fmt.Errorf("updating page %s: %w", page.Name, err)
	}
	return nil
}

// pageName is "<plan>-<c|p><number>", with the plan's name shortened and hashed when the
// result would exceed the 253 characters of an object name.
func pageName(plan, list string, n int) string {
	suffix := fmt.Sprintf("-%s%04d", list, n)
	if len(plan)+len(suffix) <= 253 {
		return plan + suffix
	}
	sum := sha256.Sum256([]byte(plan))
	return plan[:253-len(suffix)-11] + "-" + hex.EncodeToString(sum[:5]) + suffix
}

// pageRows is how many rows a page holds at most.
func (r *Deps) pageRows() int {
	if r.PageRows > 0 {
		return r.PageRows
	}
	return retirement.PageMaxRows
}

// pageJob is a planned plan's verdicts, kept in this agent's memory from the status write
// that records the plan until its pages are written. Only the agent that computed the
// verdicts holds them: the same plan computed again later could differ, so a restarted
// agent does not rewrite them; it reports the pages as not written instead.
type pageJob struct {
	uid                  types.UID
	plannedAt            time.Time
	candidateFingerprint string
	plan                 retirement.Plan
}

// pageWriteBackoff retries a failed page write a few times, within seconds, before the
// pages are given up.
var pageWriteBackoff = wait.Backoff{Steps: 4, Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.1}

// holdPages keeps, for writePending, the verdicts of a plan about to be recorded as
// planned at plannedAt (its PagesReady then says the pages are being written).
func (r *HostPlanReconciler) holdPages(plan *fleetv1alpha1.RetirementPlan, p retirement.Plan, plannedAt time.Time) {
	r.pendingPages.Store(client.ObjectKeyFromObject(plan), pageJob{uid: plan.UID, plannedAt: metav1.NewTime(plannedAt).Rfc3339Copy().Time,
		candidateFingerprint: p.CandidateFingerprint, plan: p})
}

// writePending writes the pages of a plan this agent planned, then records them in
// status.pages with PagesReady=True. A plan whose verdicts this agent does not hold (it
// restarted, or another agent planned) gets PagesReady=False, PagesNotWritten, as does
// one whose pages still fail after a few retries. Either way the plan itself is untouched:
// its counts, fingerprints and lists are in status, and approval and apply never read
// pages.
func (r *HostPlanReconciler) writePending(ctx context.Context, plan *fleetv1alpha1.RetirementPlan) error {
	v, held := r.pendingPages.LoadAndDelete(client.ObjectKeyFromObject(plan))
	job, _ := v.(pageJob)
	if held && (job.uid != plan.UID || plan.Status.PlannedAt == nil || !plan.Status.PlannedAt.Time.Equal(job.plannedAt) || plan.Status.CandidateFingerprint != job.candidateFingerprint) {
		held = false // verdicts of an earlier attempt of this plan
	}
	reason, message := fleetv1alpha1.ReasonPagesNotWritten,
		"The agent that planned this plan stopped before it wrote the pages; status keeps the counts and the first rows of each list, and a new plan pages every row"
	var pages *fleetv1alpha1.RetirementPlanPages
	if held {
		err := retry.OnError(pageWriteBackoff, func(error) bool { return ctx.Err() == nil }, func() error {
			var err error
			pages, err = r.writePages(ctx, plan, job.plan)
			return err
		})
		switch {
		case err == nil:
			reason, message = fleetv1alpha1.ReasonPagesWritten,
				fmt.Sprintf("%d candidate page(s) and %d preserved page(s) hold every row", pages.Candidates, pages.Preserved)
		case ctx.Err() != nil:
			r.pendingPages.Store(client.ObjectKeyFromObject(plan), job) // shutting down: nothing to report yet
			return err
		default:
			message = "Writing the pages failed: " + err.Error()
			pagesTotal.WithLabelValues("failed").Inc()
		}
	}
	if !held {
		pagesTotal.WithLabelValues("lost").Inc()
	}
	if reason == fleetv1alpha1.ReasonPagesNotWritten {
		// A part of the rows in pages would read as the whole: what an agent that stopped,
		// or writes that failed, left is removed, and the message says if that failed too.
		if err := r.deletePagesExcept(ctx, plan, nil); err != nil {
			message += "; the pages written before remain, removing them failed: " + err.Error()
		}
		r.Recorder.Eventf(plan, nil, "Warning", reason, "Plan", "%s", message)
	}
	// The plan's other fields may have moved meanwhile (the fleet coordinator closing the
	// plan of a lost host): only pages and PagesReady are this write's.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		conditions.Set(&plan.Status.Conditions, plan.Generation, fleetv1alpha1.PagesReadyCondition,
			reason == fleetv1alpha1.ReasonPagesWritten, reason, message)
		plan.Status.Pages = pages
		err := r.Status().Update(ctx, plan)
		if apierrors.IsConflict(err) {
			if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(plan), plan); gerr != nil {
				return gerr
			}
			recorded := ""
			if c := meta.FindStatusCondition(plan.Status.Conditions, fleetv1alpha1.PagesReadyCondition); c != nil {
				recorded = c.Reason
			}
			switch retirement.SettlePages(reason, recorded) {
			case retirement.KeepRecorded:
				return nil
			case retirement.DropPages: // a takeover reported them not written meanwhile
				pages = nil
				return r.deletePagesExcept(ctx, plan, nil)
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the plan's pages: %w", err)
	}
	if reason == fleetv1alpha1.ReasonPagesWritten && pages != nil {
		pagesTotal.WithLabelValues("written").Inc()
	}
	return nil
}

// forgetPages lets go of the verdicts held for a plan that is gone.
func (r *HostPlanReconciler) forgetPages(key types.NamespacedName) { r.pendingPages.Delete(key) }
