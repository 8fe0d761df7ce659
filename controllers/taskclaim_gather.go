package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// ClaimGitea is the part of the Gitea claim-record client the TaskClaim reconciler uses.
type ClaimGitea interface {
	ReadTarget(ctx context.Context, repo string, kind giteaclaim.Kind, number int64) (giteaclaim.TargetState, error)
	Publish(ctx context.Context, t giteaclaim.Target, rec giteaclaim.Record) (giteaclaim.Published, error)
	Read(ctx context.Context, t giteaclaim.Target) (*giteaclaim.Record, int64, error)
	Clear(ctx context.Context, t giteaclaim.Target, claimID string, final giteaclaim.State) (giteaclaim.Published, error)
	RecordTransition(ctx context.Context, t giteaclaim.Target, tr giteaclaim.Transition) (giteaclaim.Transition, error)
	PublishFile(ctx context.Context, repo, path string, content []byte, message string) (giteaclaim.FileCommit, error)
}

var _ ClaimGitea = (*giteaclaim.Client)(nil)

// VerdictChecker answers whether a worker may act as a worker at all (the capability
// verdict pinned by validation): by default a SubjectAccessReview of the worker's
// ServiceAccount for creating TaskClaims.
type VerdictChecker interface {
	Verdict(ctx context.Context, namespace, worker string) (string, error)
}

// SubjectAccessReviewVerdict implements VerdictChecker with the API server's authorizer.
type SubjectAccessReviewVerdict struct{ Client client.Client }

// Verdict returns claim.VerdictAllowed when system:serviceaccount:<ns>:<worker> may create
// taskclaims in the namespace, and "denied" otherwise.
func (v SubjectAccessReviewVerdict) Verdict(ctx context.Context, namespace, worker string) (string, error) {
	ok, _, err := sarAllowed(ctx, v.Client, "system:serviceaccount:"+namespace+":"+worker, namespace, "create", "taskclaims")
	if err != nil {
		return "", err
	}
	if ok {
		return claim.VerdictAllowed, nil
	}
	return "denied", nil
}

// claimWorld is everything one claim decision reads, gathered in one place.
type claimWorld struct {
	worker      claim.Worker
	workerFound bool
	state       claim.TargetState
	gitea       giteaclaim.TargetState
	lease       *coordinationv1.Lease
	verdict     string
}

// leaseName is the deterministic per-target lock name.
func leaseName(t fleetv1alpha1.TaskTarget) string {
	sum := sha256.Sum256([]byte(strings.ToLower(t.Repository) + "|" + t.Kind + "|" + fmt.Sprint(t.Number)))
	return "fleet-claim-" + hex.EncodeToString(sum[:])[:20]
}

// sameRepo compares "owner/name" values the way Gitea does (case-insensitively).
func sameRepo(a, b string) bool { return a != "" && strings.EqualFold(a, b) }

func giteaTarget(t fleetv1alpha1.TaskTarget) giteaclaim.Target {
	return giteaclaim.Target{Repository: t.Repository, Kind: giteaclaim.Kind(t.Kind), Number: t.Number}
}

func claimTarget(t fleetv1alpha1.TaskTarget) claim.Target {
	return claim.Target{Repository: t.Repository, Kind: claim.Kind(t.Kind), Number: t.Number, HeadSHA: t.HeadSHA}
}

// gather reads the worker, the target in Gitea and the per-target lock, all fresh.
func (r *TaskClaimReconciler) gather(ctx context.Context, tc *fleetv1alpha1.TaskClaim) (claimWorld, error) {
	var w claimWorld
	wr := &fleetv1alpha1.WorkerRegistration{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: tc.Spec.Worker}, wr)
	switch {
	case apierrors.IsNotFound(err):
		// An unregistered worker: decided by the rules (authority), not an error.
	case err != nil:
		return w, fmt.Errorf("reading worker registration %s: %w", tc.Spec.Worker, err)
	default:
		w.workerFound = true
		phase := wr.Status.Phase
		if phase == "" {
			phase = fleetv1alpha1.PhaseActive
		}
		w.worker = claim.Worker{Name: wr.Name, Identity: wr.Spec.Identity, Repository: wr.Spec.Repository,
			Phase: phase, OwnershipState: wr.Status.OwnershipState}
	}
	if !w.workerFound {
		w.worker = claim.Worker{Name: tc.Spec.Worker}
	}

	gs, err := r.Gitea.ReadTarget(ctx, tc.Spec.Target.Repository, giteaclaim.Kind(tc.Spec.Target.Kind), tc.Spec.Target.Number)
	switch {
	case errors.Is(err, giteaclaim.ErrNotFound), errors.Is(err, giteaclaim.ErrKindMismatch),
		errors.Is(err, giteaclaim.ErrMalformedRecord):
		// The state read does not describe the requested target, or its claim record cannot
		// be read: the rules refuse it as stale, and an active capability on it ends
		// (ownership can no longer be shown). Retrying would keep such a capability alive.
		gs = giteaclaim.TargetState{}
	case err != nil:
		return w, fmt.Errorf("reading %s from Gitea: %w", giteaTarget(tc.Spec.Target), err)
	}
	w.gitea = gs
	w.state = stateOf(gs)

	lease := &coordinationv1.Lease{}
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: leaseName(tc.Spec.Target)}, lease)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return w, fmt.Errorf("reading claim lock: %w", err)
	default:
		w.lease = lease
		w.state.LeaseGeneration = lease.ResourceVersion
		if lease.Spec.HolderIdentity != nil {
			w.state.LeaseHolder = *lease.Spec.HolderIdentity
		}
		if lease.Spec.RenewTime != nil && lease.Spec.LeaseDurationSeconds != nil && w.state.LeaseHolder != "" {
			w.state.LeaseExpiresAt = lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
		}
	}

	w.verdict, err = r.Verdicts.Verdict(ctx, tc.Namespace, tc.Spec.Worker)
	if err != nil {
		return w, fmt.Errorf("resolving the worker's capability verdict: %w", err)
	}
	return w, nil
}

// stateOf maps what Gitea said into the claim package's view.
func stateOf(gs giteaclaim.TargetState) claim.TargetState {
	st := claim.TargetState{
		Target:         claim.Target{Repository: gs.Target.Repository, Kind: claim.Kind(gs.Target.Kind), Number: gs.Target.Number, HeadSHA: gs.HeadSHA},
		State:          gs.State,
		Merged:         gs.Merged,
		Author:         gs.Author,
		Pushers:        gs.Pushers,
		Reviewed:       gs.Reviewed,
		Approved:       gs.Approved,
		Labels:         gs.Labels,
		Assignees:      gs.Assignees,
		ParityRevision: gs.BaseSHA,
	}
	if len(gs.UnmappedCommitEmails) > 0 {
		// Commits by people Gitea cannot name: independence cannot be proven.
		st.Author = ""
	}
	for _, d := range gs.Dependencies {
		st.Dependencies = append(st.Dependencies, claim.DependencyEdge{Repository: d.Repository, Number: d.Number, State: d.State})
	}
	if gs.Claim != nil {
		st.ClaimRecord = &claim.ClaimRecord{ClaimID: gs.Claim.ClaimID, Worker: gs.Claim.Worker, Identity: gs.Claim.Identity,
			ExpiresAt: gs.Claim.ExpiresAt, State: string(gs.Claim.State)}
	}
	return st
}

// validationOf stores a validation in the API's shape.
func validationOf(v claim.Validation, at time.Time) *fleetv1alpha1.ClaimValidation {
	return &fleetv1alpha1.ClaimValidation{
		Pin: v.Pin, Role: string(v.Role), Operations: v.Operations, Identity: v.Identity,
		CapabilityVerdict: v.CapabilityVerdict, RepositoryBinding: v.RepositoryBinding,
		ParityRevision: v.ParityRevision, DependencyStates: v.DependencyStates, HeadSHA: v.HeadSHA,
		ClaimGeneration: v.ClaimGeneration, RuleSetDigest: v.RuleSetDigest, ValidatedAt: metaTime(at),
	}
}

// validationFrom rebuilds the issued validation from status and spec (its pin is checked
// against the components, so nothing can be lost on the way).
func validationFrom(tc *fleetv1alpha1.TaskClaim) claim.Validation {
	s := tc.Status.Validation
	if s == nil {
		return claim.Validation{}
	}
	return claim.Validation{
		PinComponents: claim.PinComponents{
			Identity: s.Identity, Worker: tc.Spec.Worker, CapabilityVerdict: s.CapabilityVerdict,
			RepositoryBinding: s.RepositoryBinding, Target: claimTarget(tc.Spec.Target), Role: claim.Role(s.Role),
			ParityRevision: s.ParityRevision, DependencyStates: s.DependencyStates, HeadSHA: s.HeadSHA,
			ClaimGeneration: s.ClaimGeneration, RuleSetDigest: s.RuleSetDigest,
		},
		Operations: s.Operations,
		Pin:        s.Pin,
	}
}

// capabilityFrom rebuilds the pure capability from status.
func capabilityFrom(tc *fleetv1alpha1.TaskClaim) *claim.Capability {
	c := tc.Status.Capability
	if c == nil {
		return nil
	}
	parity := ""
	if tc.Status.Validation != nil {
		parity = tc.Status.Validation.ParityRevision
	}
	return &claim.Capability{
		Worker: c.Worker, Identity: c.Identity, Repository: c.Repository,
		Target: claim.Target{Repository: c.Repository, Kind: claim.Kind(c.Target.Kind), Number: c.Target.Number, HeadSHA: c.Target.HeadSHA},
		Role:   claim.Role(c.Role), Operations: c.Operations, Pin: c.Pin, ParityRevision: parity,
		ClaimID: c.ClaimID, LeaseName: c.LeaseName, LeaseGeneration: c.LeaseGeneration, ExpiresAt: c.ExpiresAt.Time,
	}
}

func capabilityOf(c *claim.Capability) *fleetv1alpha1.TaskCapability {
	return &fleetv1alpha1.TaskCapability{
		Worker: c.Worker, Identity: c.Identity, Repository: c.Repository,
		Target: fleetv1alpha1.ClaimTargetRef{Kind: string(c.Target.Kind), Number: c.Target.Number, HeadSHA: c.Target.HeadSHA},
		Role:   string(c.Role), Operations: c.Operations, Pin: c.Pin, ClaimID: c.ClaimID,
		LeaseName: c.LeaseName, LeaseGeneration: c.LeaseGeneration, ExpiresAt: metaTime(c.ExpiresAt),
	}
}

func resultOf(r claim.Result) *fleetv1alpha1.ClaimResult {
	return &fleetv1alpha1.ClaimResult{
		Outcome: string(r.Outcome), Class: string(r.Class), Blocker: string(r.Blocker),
		FailedPredicate: r.FailedPredicate, RuleID: r.RuleID, Message: r.Message,
		ContentionIsNormal: r.ContentionIsNormal, ReassessFromFreshState: r.ReassessFromFreshState,
		RetryPermitted: r.RetryPermitted, RuleSetDigest: r.RuleSetDigest,
	}
}
