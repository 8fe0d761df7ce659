// Package gitearepository holds the GiteaRepository reconciler: it resolves each
// repository on its GiteaServer to the Gitea repository ID (once; the ID is the key from
// then on, so a rename in Gitea changes nothing), checks that the default branch is
// protected so that no worker identity can write around the gateway, and records the
// verdict (internal/forge) as the repository's Ready condition.
//
// One writer: every manager runs the reconciler, and only the fleet coordinator checks
// and writes.
package gitearepository

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/giteaserver"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/forge"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// serverIndex indexes GiteaRepositories by spec.server.
const serverIndex = "spec.server"

// Reconciler checks GiteaRepositories.
type Reconciler struct {
	Client   client.Client
	Dialer   *giteaserver.Dialer
	Recorder events.EventRecorder
	// Coordinator gates the writes: only its holder checks (nil: always).
	Coordinator giteaserver.Coordinator
	// CredentialsNamespace holds the gateway's credential Secrets: their logins are the
	// worker identities the hardening check looks for.
	CredentialsNamespace string
	// Interval between checks of a Ready repository (DefaultInterval when zero), and Retry
	// between checks of one that is not (giteaserver.RetryInterval when zero).
	Interval, Retry time.Duration
}

// DefaultInterval is how often a Ready repository is checked again. Each check reads the
// published rule set back, so a copy changed in Gitea stops the repository's claims
// within it.
const DefaultInterval = time.Minute

// next is when to check repo again.
func (r *Reconciler) next(ready bool) time.Duration {
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	return giteaserver.Next(ready, interval, r.Retry)
}

// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=gitearepositories,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=gitearepositories/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=taskclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=fleet.giteatools.dev,resources=gitearepositories/status,verbs=get;update;patch

// SetupWithManager registers the reconciler: a repository is checked when its spec
// changes, when its server's status or spec does, and when another repository of its
// namespace changes (which may make it a duplicate, or no longer one).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &fleetv1alpha1.GiteaRepository{}, serverIndex, func(o client.Object) []string {
		return []string{o.(*fleetv1alpha1.GiteaRepository).Spec.Server}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1alpha1.GiteaRepository{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&fleetv1alpha1.GiteaServer{}, handler.EnqueueRequestsFromMapFunc(r.ofServer)).
		Watches(&fleetv1alpha1.GiteaRepository{}, handler.EnqueueRequestsFromMapFunc(r.siblings)).
		Named("gitearepository").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

// ofServer maps a GiteaServer to the repositories on it.
func (r *Reconciler) ofServer(ctx context.Context, o client.Object) []reconcile.Request {
	return r.list(ctx, client.MatchingFields{serverIndex: o.GetName()}, nil)
}

// siblings maps a repository to the other repositories of its namespace.
func (r *Reconciler) siblings(ctx context.Context, o client.Object) []reconcile.Request {
	return r.list(ctx, client.InNamespace(o.GetNamespace()), func(other *fleetv1alpha1.GiteaRepository) bool { return other.Name != o.GetName() })
}

func (r *Reconciler) list(ctx context.Context, opt client.ListOption, keep func(*fleetv1alpha1.GiteaRepository) bool) []reconcile.Request {
	list := &fleetv1alpha1.GiteaRepositoryList{}
	if err := r.Client.List(ctx, list, opt); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if keep == nil || keep(&list.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// Reconcile checks one repository and records what it found when that changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	repo := &fleetv1alpha1.GiteaRepository{}
	if err := r.Client.Get(ctx, req.NamespacedName, repo); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.Coordinator != nil && !r.Coordinator.Held() {
		return ctrl.Result{RequeueAfter: r.next(false)}, nil
	}
	if !repo.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, repo)
	}
	if controllerutil.AddFinalizer(repo, fleetv1alpha1.RepositoryFinalizer) {
		if err := r.Client.Update(ctx, repo); err != nil {
			return ctrl.Result{}, err
		}
	}
	facts, err := r.check(ctx, repo)
	if err != nil {
		return ctrl.Result{}, err
	}
	v := forge.JudgeRepository(facts)
	before := repo.Status.DeepCopy()
	was := conditionOf(repo)
	conditions.Set(&repo.Status.Conditions, repo.Generation, fleetv1alpha1.ReadyCondition, v.Ready, v.Reason, v.Message)
	repo.Status.ObservedGeneration = repo.Generation
	if repo.Status.RepositoryID == 0 && facts.ID > 0 {
		repo.Status.RepositoryID = facts.ID // resolved once: the key from now on
	}
	if facts.FullName != "" {
		repo.Status.FullName = facts.FullName
	}
	if facts.Setup != nil {
		repo.Status.DefaultBranch = facts.Setup.DefaultBranch
	}
	repo.Status.RuleSetDigest = facts.RuleSet // cleared when the check could not show it
	if !equality.Semantic.DeepEqual(before, &repo.Status) {
		if err := r.Client.Status().Update(ctx, repo); err != nil {
			return ctrl.Result{}, err
		}
		if was == nil || was.Ready != v.Ready || was.Reason != v.Reason {
			kind := corev1.EventTypeNormal
			if !v.Ready {
				kind = corev1.EventTypeWarning
			}
			r.Recorder.Eventf(repo, nil, kind, v.Reason, "Check", "%s", v.Message)
		}
		log.FromContext(ctx).Info("Checked Gitea repository", "ready", v.Ready, "reason", v.Reason, "id", repo.Status.RepositoryID)
	}
	return ctrl.Result{RequeueAfter: r.next(v.Ready)}, nil
}

// DeletionPoll is how often a GiteaRepository being deleted looks again for claims that
// still hold records or locks in it.
const DeletionPoll = 2 * time.Second

// finalize lets repo go once no claim in it holds a Gitea record or a lock any more.
// Deleting it made it unfit for claims (Resolver), so the TaskClaim reconciler ends its
// active capabilities (ownership_loss) and refuses new claims there; until they released
// their records (their finalizers are gone) repo stays, not Ready with reason Deleting
// and the count. Then the free locks its claims named are deleted (with their
// resourceVersion as a precondition, so a lock taken meanwhile stays) and the finalizer
// is dropped.
func (r *Reconciler) finalize(ctx context.Context, repo *fleetv1alpha1.GiteaRepository) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(repo, fleetv1alpha1.RepositoryFinalizer) {
		return ctrl.Result{}, nil
	}
	holding, locks, err := r.claimsIn(ctx, repo)
	if err != nil {
		return ctrl.Result{}, err
	}
	if holding > 0 {
		v := forge.JudgeDeletion(holding)
		was := conditionOf(repo)
		before := repo.Status.DeepCopy()
		conditions.Set(&repo.Status.Conditions, repo.Generation, fleetv1alpha1.ReadyCondition, v.Ready, v.Reason, v.Message)
		repo.Status.ObservedGeneration = repo.Generation
		if !equality.Semantic.DeepEqual(before, &repo.Status) {
			if err := r.Client.Status().Update(ctx, repo); err != nil {
				return ctrl.Result{}, err
			}
			if was == nil || was.Reason != v.Reason {
				r.Recorder.Eventf(repo, nil, corev1.EventTypeNormal, v.Reason, "Delete", "%s", v.Message)
			}
		}
		return ctrl.Result{RequeueAfter: DeletionPoll}, nil
	}
	for _, name := range locks {
		if err := r.deleteFreeLock(ctx, repo.Namespace, name); err != nil {
			return ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(repo, fleetv1alpha1.RepositoryFinalizer)
	if err := r.Client.Update(ctx, repo); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("Released the Gitea repository: no claim holds a record or lock in it", "locksDeleted", len(locks))
	return ctrl.Result{}, nil
}

// claimsIn counts the claims of repo's namespace that were validated in repo (the same
// server and repository ID) and still hold their record or lock (they carry
// ClaimFinalizer), and lists the locks all of them named.
func (r *Reconciler) claimsIn(ctx context.Context, repo *fleetv1alpha1.GiteaRepository) (int, []string, error) {
	if repo.Status.RepositoryID == 0 {
		return 0, nil, nil // never resolved: no claim was ever decided there
	}
	list := &fleetv1alpha1.TaskClaimList{}
	if err := r.Client.List(ctx, list, client.InNamespace(repo.Namespace)); err != nil {
		return 0, nil, fmt.Errorf("listing the TaskClaims of %s: %w", repo.Namespace, err)
	}
	holding := 0
	var locks []string
	for i := range list.Items {
		tc := &list.Items[i]
		at := tc.Status.Repository
		if at == nil || at.Server != repo.Spec.Server || at.ID != repo.Status.RepositoryID {
			continue
		}
		if controllerutil.ContainsFinalizer(tc, fleetv1alpha1.ClaimFinalizer) {
			holding++
		}
		if at.LockName != "" && !slices.Contains(locks, at.LockName) {
			locks = append(locks, at.LockName)
		}
	}
	slices.Sort(locks)
	return holding, locks, nil
}

// deleteFreeLock deletes the lock ns/name if no claim holds it.
func (r *Reconciler) deleteFreeLock(ctx context.Context, ns, name string) error {
	lease := &coordinationv1.Lease{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != "" {
		return nil // held: its claim ends and frees it, and the sweep removes it later
	}
	rv, uid := lease.ResourceVersion, lease.UID
	err := r.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &rv, UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// check reads what JudgeRepository decides on: the server and its verdict, then, on a
// Ready server, the repository, its siblings and its hardening setup.
func (r *Reconciler) check(ctx context.Context, repo *fleetv1alpha1.GiteaRepository) (forge.RepositoryFacts, error) {
	f := forge.RepositoryFacts{Server: repo.Spec.Server}
	srv := &fleetv1alpha1.GiteaServer{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: repo.Spec.Server}, srv); {
	case apierrors.IsNotFound(err):
		f.ServerMissing = true
		return f, nil
	case err != nil:
		return f, err
	}
	if f.ServerVerdict = giteaserver.Verdict(srv); f.ServerVerdict == nil || !f.ServerVerdict.Ready {
		return f, nil
	}
	c, dialFacts, err := r.Dialer.Dial(ctx, srv)
	switch {
	case err != nil:
		return f, err
	case c == nil: // the server's Secret or CA changed since its own check
		v := forge.JudgeServer(dialFacts)
		f.ServerVerdict = &v
		return f, nil
	}
	logins, err := r.workerLogins(ctx)
	if err != nil {
		return f, err
	}
	f = c.RepositoryFacts(ctx, f, repo.Status.RepositoryID, repo.Spec.Owner, repo.Spec.Name, logins)
	if f.ID > 0 {
		if f.Duplicate, err = r.olderTwin(ctx, repo, f); err != nil {
			return f, err
		}
	}
	// The rule set is published only to a repository fit for claims otherwise: the claims
	// there are decided under it, and a write to a repository the check finds wanting
	// would do nobody any good.
	if forge.JudgeRepository(f).Ready {
		if err := giteaclaim.PublishRuleSet(ctx, c, f.FullName); err != nil {
			if ctx.Err() != nil {
				return f, ctx.Err()
			}
			f.RuleSetProblem = err.Error()
		} else {
			f.RuleSet = claim.RuleSetDigest()
		}
	}
	return f, nil
}

// workerLogins lists the logins of the gateway's credential Secrets: the worker identities.
func (r *Reconciler) workerLogins(ctx context.Context) ([]string, error) {
	list := &corev1.SecretList{}
	if err := r.Dialer.Reader.List(ctx, list, client.InNamespace(r.CredentialsNamespace), client.HasLabels{fleetv1alpha1.GiteaLoginLabel}); err != nil {
		return nil, err
	}
	var logins []string
	for _, s := range list.Items {
		if l := s.Labels[fleetv1alpha1.GiteaLoginLabel]; l != "" && !slices.Contains(logins, l) {
			logins = append(logins, l)
		}
	}
	slices.Sort(logins)
	return logins, nil
}

// olderTwin names the oldest other GiteaRepository of repo's namespace that names the
// same repository: on the same server, resolved to the same ID (or, before it resolved,
// with the same owner and name, as Gitea compares them), or with the same owner and name
// on another server, since claims name a repository by owner/name within their
// namespace. It names it only if it is older than repo ("" if none).
func (r *Reconciler) olderTwin(ctx context.Context, repo *fleetv1alpha1.GiteaRepository, f forge.RepositoryFacts) (string, error) {
	list := &fleetv1alpha1.GiteaRepositoryList{}
	if err := r.Client.List(ctx, list, client.InNamespace(repo.Namespace)); err != nil {
		return "", err
	}
	var oldest *fleetv1alpha1.GiteaRepository
	for i := range list.Items {
		o := &list.Items[i]
		sameName := strings.EqualFold(o.Spec.Owner+"/"+o.Spec.Name, repo.Spec.Owner+"/"+repo.Spec.Name)
		sameRepo := o.Spec.Server == repo.Spec.Server && (o.Status.RepositoryID == f.ID ||
			(o.Status.RepositoryID == 0 && strings.EqualFold(o.Spec.Owner+"/"+o.Spec.Name, f.FullName)))
		if o.UID == repo.UID || (!sameName && !sameRepo) || !olderThan(o, repo) {
			continue
		}
		if oldest == nil || olderThan(o, oldest) {
			oldest = o
		}
	}
	if oldest == nil {
		return "", nil
	}
	return oldest.Name, nil
}

// olderThan orders repositories by creation, then by name.
func olderThan(a, b *fleetv1alpha1.GiteaRepository) bool {
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.Name < b.Name
}

// conditionOf reads the repository's recorded Ready condition (nil when none).
func conditionOf(repo *fleetv1alpha1.GiteaRepository) *forge.Verdict {
	for _, c := range repo.Status.Conditions {
		if c.Type == fleetv1alpha1.ReadyCondition {
			return &forge.Verdict{Ready: c.Status == "True", Reason: c.Reason, Message: c.Message}
		}
	}
	return nil
}
