package apiconv

import (
	"slices"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// ClaimRefs are the claims as the one-claim-per-worker rule sees them.
func ClaimRefs(items []fleetv1alpha1.TaskClaim) []claim.ClaimRef {
	out := make([]claim.ClaimRef, 0, len(items))
	for i := range items {
		tc := &items[i]
		ref := claim.ClaimRef{ClaimID: string(tc.UID), Namespace: tc.Namespace, Worker: tc.Spec.Worker,
			Phase: tc.Status.Phase, Acquiring: slices.Contains(tc.Finalizers, fleetv1alpha1.ClaimFinalizer)}
		switch {
		case tc.Status.Capability != nil:
			ref.Identity = tc.Status.Capability.Identity
		case tc.Status.Validation != nil:
			ref.Identity = tc.Status.Validation.Identity
		}
		out = append(out, ref)
	}
	return out
}

// ClaimRefOf is one claim as the one-claim-per-worker rule sees it.
func ClaimRefOf(tc *fleetv1alpha1.TaskClaim) claim.ClaimRef {
	return ClaimRefs([]fleetv1alpha1.TaskClaim{*tc})[0]
}
