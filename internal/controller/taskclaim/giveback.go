package taskclaim

import (
	"context"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// endGivenBack ends an active capability the worker gave back (spec.release or
// spec.cycleComplete) without reading the target first: claim.CheckActive decides a
// give-back before anything it reads from Gitea, so a fresh read would change nothing.
// That keeps a release to the record's clear (a read and the guarded write) and one
// audit comment. done is false when the claim was not given back.
func (r *Reconciler) endGivenBack(ctx context.Context, tc *fleetv1alpha1.TaskClaim, c *claim.Capability) (done bool, err error) {
	if !tc.Spec.Release && !tc.Spec.CycleComplete {
		return false, nil
	}
	trigger, ends := claim.CheckActive(claim.ActiveInput{Capability: *c, Now: r.Clock.Now(),
		Released: tc.Spec.Release, CycleComplete: tc.Spec.CycleComplete})
	if !ends {
		return false, nil
	}
	return true, r.end(ctx, tc, trigger, nil)
}
