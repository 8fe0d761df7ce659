package workerregistration

import (
	"fmt"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/conditions"
	"github.com/giteatools/fleet-controller/internal/fleet"
	"github.com/giteatools/fleet-controller/internal/forge"
)

// setOwnership records the ownership state the controller computed, and the probe answer
// it rests on, in wr's status.
func setOwnership(wr *fleetv1alpha1.WorkerRegistration, state string, pid fleet.PIDState) {
	wr.Status.Phase = fleet.EffectivePhase(wr.Status.Phase)
	wr.Status.OwnershipState = state
	wr.Status.ObservedGeneration = wr.Generation
	conditions.SetReadiness(&wr.Status.Conditions, wr.Generation, conditions.Readiness{
		Ready: true, Reason: fleetv1alpha1.ReasonReconciled,
		Message: fmt.Sprintf("Ownership is %s (process probe: %s)", state, pid),
	})
}

// setUnattendedOwnership records the ownership state of a row whose host has no agent:
// computed from the heartbeat alone (no probe of its process is possible), so a fresh
// heartbeat stays live.
func setUnattendedOwnership(wr *fleetv1alpha1.WorkerRegistration, state string) {
	wr.Status.Phase = fleet.EffectivePhase(wr.Status.Phase)
	wr.Status.OwnershipState = state
	wr.Status.ObservedGeneration = wr.Generation
	conditions.SetReadiness(&wr.Status.Conditions, wr.Generation, conditions.Readiness{
		Ready: true, Reason: fleetv1alpha1.ReasonNoHostAgent,
		Message: fmt.Sprintf("Ownership is %s from the heartbeat alone: no agent holds host %q, so its process cannot be probed", state, wr.Spec.Process.HostID),
	})
}

// setBinding records whether wr's repository binding names a repository of its
// namespace (forge.Bind found b for it).
func setBinding(wr *fleetv1alpha1.WorkerRegistration, b forge.Binding) {
	switch {
	case wr.Spec.Repository == "":
		conditions.Set(&wr.Status.Conditions, wr.Generation, fleetv1alpha1.RepositoryBoundCondition, false, fleetv1alpha1.ReasonRepositoryNotBound,
			"spec.repository is not set: the registration is bound to no repository")
	case b.Problem != "":
		conditions.Set(&wr.Status.Conditions, wr.Generation, fleetv1alpha1.RepositoryBoundCondition, false, fleetv1alpha1.ReasonRepositoryNotBound, b.Problem)
	case b.Object != "":
		conditions.Set(&wr.Status.Conditions, wr.Generation, fleetv1alpha1.RepositoryBoundCondition, true, fleetv1alpha1.ReasonRepositoryBound,
			fmt.Sprintf("%s is the GiteaRepository %s of this namespace", b.Repository, b.Object))
	default:
		conditions.Set(&wr.Status.Conditions, wr.Generation, fleetv1alpha1.RepositoryBoundCondition, true, fleetv1alpha1.ReasonRepositoryBound,
			fmt.Sprintf("%s is the manager's --repository repository", b.Repository))
	}
}
