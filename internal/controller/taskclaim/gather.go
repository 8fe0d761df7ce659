package taskclaim

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// gather reads the worker, the target in Gitea and the per-target lock, all fresh.
func (r *Reconciler) gather(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (world, error) {
	lease, err := r.readLock(ctx, tc)
	if err != nil {
		return world{}, err
	}
	return r.gatherWith(ctx, tc, lease)
}

// readLock reads the claim's per-target lock straight from the API server (nil when
// there is none).
func (r *Reconciler) readLock(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: claim.LockName(apiconv.Target(tc.Spec.Target))}, lease)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading claim lock: %w", err)
	}
	return lease, nil
}

// gatherWith reads the worker, the target in Gitea, the capability verdict and the
// worker's other claims, all fresh, and takes lease as the lock's state (a read made in
// this same reconcile, nil when there is none). The reads are independent of each
// other, so they run at once: the worker's registration and its other claims (which
// need the registration's identity), the target in Gitea, and the verdict.
func (r *Reconciler) gatherWith(ctx context.Context, tc *fleetv1alpha1.TaskClaim, lease *coordinationv1.Lease) (world, error) {
	w := world{worker: claim.Worker{Name: tc.Spec.Worker}}
	target := apiconv.Target(tc.Spec.Target)
	var g errgroup.Group
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
		others, err := r.otherClaims(ctx, tc, w.worker)
		w.others = others
		return err
	})
	g.Go(func() error {
		st, err := r.targetReads().ReadTarget(ctx, target)
		switch {
		case giteaclaim.Unreadable(err):
			// The state read does not describe the requested target, or its claim record
			// cannot be read: the rules refuse it as stale, and an active capability on it
			// ends (ownership can no longer be shown). Retrying would keep such a
			// capability alive.
			st = claim.TargetState{}
		case err != nil:
			return fmt.Errorf("reading %s from Gitea: %w", target, err)
		}
		w.state = st
		return nil
	})
	g.Go(func() error {
		v, err := r.Verdicts.Verdict(ctx, tc.Namespace, tc.Spec.Worker)
		if err != nil {
			return fmt.Errorf("resolving the worker's capability verdict: %w", err)
		}
		w.verdict = v
		return nil
	})
	if err := g.Wait(); err != nil {
		return w, err
	}
	if lease != nil {
		w.lease = lease
		w.state.LeaseGeneration, w.state.LeaseHolder, w.state.LeaseExpiresAt = lockState(lease)
	}
	return w, nil
}

// targetReads is the reconciler's shared-read front of Gitea.ReadTarget (freshReads).
func (r *Reconciler) targetReads() *freshReads {
	r.readsInit.Do(func() { r.reads = newFreshReads(r.Gitea.ReadTarget) })
	return r.reads
}

// otherClaims counts the claims, other than tc, that its worker or the worker's Gitea
// identity holds or is acquiring, in every namespace, read straight from the API server.
func (r *Reconciler) otherClaims(ctx context.Context, tc *fleetv1alpha1.TaskClaim, w claim.Worker) (int, error) {
	list := &fleetv1alpha1.TaskClaimList{}
	if err := r.APIReader.List(ctx, list); err != nil {
		return 0, fmt.Errorf("listing task claims: %w", err)
	}
	return claim.OtherClaims(apiconv.ClaimRefOf(tc), w.Identity, apiconv.ClaimRefs(list.Items)), nil
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
