package taskclaim

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// Gitea is the part of the Gitea claim-record client the reconciler uses. It speaks the
// claim package's types.
type Gitea interface {
	ReadTarget(ctx context.Context, t claim.Target) (claim.TargetState, error)
	Publish(ctx context.Context, t claim.Target, rec claim.Record, opts ...giteaclaim.PublishOption) (giteaclaim.Published, error)
	Read(ctx context.Context, t claim.Target) (*claim.Record, int64, error)
	Clear(ctx context.Context, t claim.Target, claimID string, final claim.RecordState, opts ...giteaclaim.PublishOption) (giteaclaim.Published, error)
	RecordTransition(ctx context.Context, t claim.Target, tr giteaclaim.Transition) (giteaclaim.Transition, error)
	PublishFile(ctx context.Context, repo, path string, content []byte, message string) (giteaclaim.FileCommit, error)
	ReadFile(ctx context.Context, repo, path string) ([]byte, error)
	Assign(ctx context.Context, t claim.Target, login string) error
	Unassign(ctx context.Context, t claim.Target, login string) error
}

var _ Gitea = (*giteaclaim.Client)(nil)

// VerdictChecker answers whether a worker may act as a worker at all (the capability
// verdict a validation pins): by default a SubjectAccessReview of the worker's
// ServiceAccount for creating TaskClaims (internal/authz).
type VerdictChecker interface {
	Verdict(ctx context.Context, namespace, worker string) (string, error)
}

// world is everything one claim decision reads, gathered fresh in one place.
type world struct {
	worker  claim.Worker
	state   claim.TargetState
	lease   *coordinationv1.Lease
	verdict string
	// others counts the other claims the worker (or its identity) holds or is acquiring.
	others int
}

// lockRead reads the claim's per-target lock for one decision: straight from the API
// server (readLock), or as the step's own writes left it before the gather (heldLock).
// nil means there is no lock.
type lockRead func(ctx context.Context) (*coordinationv1.Lease, error)

// gather reads what the check of an active capability decides on: the worker, the
// target in Gitea, the capability verdict and the per-target lock (with readLock), all
// fresh. The worker's other claims do not matter to it.
func (r *Reconciler) gather(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (world, error) {
	return r.gatherWith(ctx, tc, false, func(ctx context.Context) (*coordinationv1.Lease, error) {
		return r.readLock(ctx, tc)
	})
}

// heldLock is the lock as the step's writes before the gather read or left it.
func heldLock(l *coordinationv1.Lease) lockRead {
	return func(context.Context) (*coordinationv1.Lease, error) { return l, nil }
}

// readLock reads the claim's per-target lock straight from the API server (nil when
// there is none).
func (r *Reconciler) readLock(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: repositoryOf(tc).LockName}, lease)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading claim lock: %w", err)
	}
	return lease, nil
}

// gatherWith reads the worker, the target in Gitea, the capability verdict, the lock
// (with lock) and, when countOthers, the worker's other claims, all fresh. It writes
// nothing: a step's writes come before its gather or after its decision. The reads are
// independent of each other, so they run at once: the worker's registration and its
// other claims (which need the registration's identity), the target in Gitea, the
// verdict, and the lock.
func (r *Reconciler) gatherWith(ctx context.Context, tc *fleetv1alpha1.TaskClaim, countOthers bool, lock lockRead) (world, error) {
	w := world{worker: claim.Worker{Name: tc.Spec.Worker}}
	target := apiconv.Target(tc.Spec.Target)
	// The first read that fails stops the others: the decision needs all of them.
	g, ctx := errgroup.WithContext(ctx)
	r.readWorker(ctx, g, tc, &w, countOthers)
	g.Go(func() error {
		gitea, err := r.giteaOf(ctx, tc)
		if err != nil {
			return err
		}
		st, err := r.targetReads().ReadTargetIn(ctx, keyOf(repositoryOf(tc)), gitea.ReadTarget, target)
		switch {
		case giteaclaim.Unreadable(err):
			// There is no item of the requested kind (the rules refuse the request for
			// what it asks), or its claim record cannot be read (refused as stale). Either
			// way an active capability on it ends: ownership can no longer be shown.
			// Retrying would keep such a capability alive.
			st = claim.TargetState{Missing: giteaclaim.MissingOf(err)}
		case err != nil:
			return fmt.Errorf("reading %s from Gitea: %w", target, err)
		}
		w.state = st
		return nil
	})
	g.Go(func() error {
		lease, err := lock(ctx)
		w.lease = lease
		return err
	})
	if err := g.Wait(); err != nil {
		return w, err
	}
	if w.lease != nil {
		w.state.LeaseGeneration, w.state.LeaseHolder, w.state.LeaseExpiresAt = lockState(w.lease)
	}
	return w, nil
}

// readWorker adds to g the reads of tc's worker: its registration, its capability
// verdict, and, when countOthers, its other claims (which need the registration's
// identity). They fill w.
func (r *Reconciler) readWorker(ctx context.Context, g *errgroup.Group, tc *fleetv1alpha1.TaskClaim, w *world, countOthers bool) {
	g.Go(func() error {
		wr := &fleetv1alpha1.WorkerRegistration{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: tc.Spec.Worker}, wr)
		switch {
		case apierrors.IsNotFound(err):
			// An unregistered worker: decided by the rules (authority), not an error.
		case err != nil:
			return fmt.Errorf("reading worker registration %s: %w", tc.Spec.Worker, err)
		default:
			w.worker = apiconv.Worker(wr)
		}
		if !countOthers {
			return nil
		}
		others, err := r.otherClaims(ctx, tc, w.worker)
		w.others = others
		return err
	})
	g.Go(func() error {
		v, err := r.Verdicts.Verdict(ctx, tc.Namespace, tc.Spec.Worker)
		if err != nil {
			return fmt.Errorf("resolving the worker's capability verdict: %w", err)
		}
		w.verdict = v
		return nil
	})
}

// targetReads is the reconciler's shared-read front of Gitea.ReadTarget (freshReads).
func (r *Reconciler) targetReads() *freshReads {
	r.readsInit.Do(func() { r.reads = newFreshReads(nil) })
	return r.reads
}

// otherClaims counts the claims, other than tc, that its worker or the worker's Gitea
// identity holds or is acquiring, in every namespace (claim.OtherClaims decides). Only
// the claims that could count are listed, by field selector and all at once: those of the
// same registration, those whose status.identityKey is the identity's key (in every
// namespace), and validated or active claims that carry no key (recorded before claims
// had one; they are few and end). The lists are read from the API server no older than
// tc as the caller last read or wrote it: they show every write made before tc's (so of
// two claims that each write themselves and then look, the later writer sees the
// earlier), without waiting for a read as fresh as etcd's latest write, which the API
// server answers only at its next watch progress notification.
func (r *Reconciler) otherClaims(ctx context.Context, tc *fleetv1alpha1.TaskClaim, w claim.Worker) (int, error) {
	// Each list gets options of its own: the client writes into them.
	selections := [][]client.ListOption{
		{client.InNamespace(tc.Namespace), client.MatchingFields{fieldWorker: tc.Spec.Worker}, notOlderThan(tc.ResourceVersion)},
		{client.MatchingFieldsSelector{Selector: unkeyedHolders()}, notOlderThan(tc.ResourceVersion)},
	}
	if key := claim.IdentityKey(w.Identity); key != "" {
		selections = append(selections, []client.ListOption{client.MatchingFields{fieldIdentityKey: key}, notOlderThan(tc.ResourceVersion)})
	}
	lists := make([]fleetv1alpha1.TaskClaimList, len(selections))
	g, ctx := errgroup.WithContext(ctx)
	for i, opts := range selections {
		g.Go(func() error { return r.APIReader.List(ctx, &lists[i], opts...) })
	}
	if err := g.Wait(); err != nil {
		return 0, fmt.Errorf("listing task claims: %w", err)
	}
	seen := map[types.UID]bool{}
	var candidates []fleetv1alpha1.TaskClaim
	for _, l := range lists {
		for _, item := range l.Items {
			if !seen[item.UID] {
				seen[item.UID] = true
				candidates = append(candidates, item)
			}
		}
	}
	return claim.OtherClaims(apiconv.ClaimRefOf(tc), w.Identity, apiconv.ClaimRefs(candidates)), nil
}

// The TaskClaim fields the API server selects by (the CRD's selectableFields).
const (
	fieldWorker      = "spec.worker"
	fieldPhase       = "status.phase"
	fieldIdentityKey = "status.identityKey"
)

// unkeyedHolders selects the claims in a holding phase that carry no identity key.
func unkeyedHolders() fields.Selector {
	terms := []fields.Selector{fields.OneTermEqualSelector(fieldIdentityKey, "")}
	for _, p := range append([]string{""}, claim.Phases...) {
		if !claim.HoldingPhase(p) {
			terms = append(terms, fields.OneTermNotEqualSelector(fieldPhase, p))
		}
	}
	return fields.AndSelectors(terms...)
}

// notOlderThan asks a List for a state no older than resourceVersion ("" asks for the
// most recent state).
func notOlderThan(resourceVersion string) client.ListOption {
	if resourceVersion == "" {
		return &client.ListOptions{}
	}
	return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: resourceVersion,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}}
}

// lockState is what a lock Lease says: its generation, its holder ("" when free), and
// when the holder's hold lapses (zero when unknown, which counts as holding).
func lockState(l *coordinationv1.Lease) (generation, holder string, expires time.Time) {
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil && holder != "" {
		expires = l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	}
	return l.ResourceVersion, holder, expires
}
