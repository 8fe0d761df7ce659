package taskclaim

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/conditions"
)

// setReadiness writes Ready and Stalled for the claim's phase (claim.Readiness).
func setReadiness(tc *fleetv1alpha1.TaskClaim, reason, msg string) {
	ready, stalled := claim.Readiness(tc.Status.Phase)
	conditions.SetReadiness(&tc.Status.Conditions, tc.Generation, conditions.Readiness{Ready: ready, Stalled: stalled, Reason: reason, Message: msg})
}

func setCondition(tc *fleetv1alpha1.TaskClaim, typ string, status bool, reason, msg string) {
	conditions.Set(&tc.Status.Conditions, tc.Generation, typ, status, reason, msg)
}

// markValidated records an issued pin. The claim is not Ready until it is won.
func markValidated(tc *fleetv1alpha1.TaskClaim, v claim.Validation, res claim.Result, at time.Time) {
	tc.Status.Phase = claim.PhaseValidated
	tc.Status.Validation = apiconv.ValidationStatus(v, at)
	tc.Status.IdentityKey = claim.IdentityKey(v.Identity)
	tc.Status.Result = apiconv.ResultStatus(res)
	setCondition(tc, fleetv1alpha1.ValidatedCondition, true, fleetv1alpha1.ReasonAwaitingPin,
		"Validated as "+string(v.Role)+": copy status.validation.pin into spec.pin to claim")
	setReadiness(tc, fleetv1alpha1.ReasonAwaitingPin, "Waiting for spec.pin")
}

// markActive records a won, published and proven claim and its capability.
func markActive(tc *fleetv1alpha1.TaskClaim, c *claim.Capability, res claim.Result) {
	tc.Status.Phase = claim.PhaseActive
	tc.Status.Role = string(c.Role)
	tc.Status.Capability = apiconv.CapabilityStatus(c)
	if slices.Contains(c.Operations, claim.OpPushBranch) {
		tc.Status.Capability.WorkBranch = claim.WorkBranch(tc.Namespace, tc.Name)
	}
	tc.Status.Result = apiconv.ResultStatus(res)
	setCondition(tc, fleetv1alpha1.ClaimedCondition, true, fleetv1alpha1.ReasonAcquired, "The claim won the lock and is published in Gitea")
	setCondition(tc, fleetv1alpha1.CapabilityActiveCondition, true, fleetv1alpha1.ReasonAcquired,
		fmt.Sprintf("Capability for %s active until %s", c.Role, c.ExpiresAt.UTC().Format(time.RFC3339)))
	setReadiness(tc, fleetv1alpha1.ReasonAcquired, "Claim acquired")
}

// rejectionMessage is how a refusal reads in conditions and events.
func rejectionMessage(res claim.Result) string {
	return fmt.Sprintf("%s (%s): %s", res.FailedPredicate, res.Class, res.Message)
}

// markRejected records a typed, final refusal: not Ready, and Stalled.
func markRejected(tc *fleetv1alpha1.TaskClaim, res claim.Result) {
	tc.Status.Phase = claim.PhaseRejected
	tc.Status.Result = apiconv.ResultStatus(res)
	tc.Status.Capability = nil
	msg := rejectionMessage(res)
	setCondition(tc, fleetv1alpha1.CapabilityActiveCondition, false, fleetv1alpha1.ReasonRejected, "No capability: the claim was refused")
	setReadiness(tc, fleetv1alpha1.ReasonRejected, msg)
}

// markEnded records the end of a claim: the capability is gone and the worker neutral.
// Ready stays True for a claim its worker gave back (released, completed), and turns
// False and Stalled for one that expired or was revoked.
func markEnded(tc *fleetv1alpha1.TaskClaim, phase string, trigger claim.Trigger, at time.Time) {
	tc.Status.Phase = phase
	tc.Status.Capability = nil
	tc.Status.Result = apiconv.ResultStatus(claim.EndResult(phase, apiconv.Target(tc.Spec.Target)))
	tc.Status.EndedReason = string(trigger)
	tc.Status.EndedAt = ptr.To(apiconv.Time(at))
	setCondition(tc, fleetv1alpha1.CapabilityActiveCondition, false, fleetv1alpha1.ReasonEnded, "Capability ended: "+string(trigger))
	setReadiness(tc, phase, "Claim ended ("+string(trigger)+"); the worker is neutral")
}

// markClearPending records that a final claim still has its Gitea record and lock to end;
// the finalizer stays until RecordCleared turns True.
func markClearPending(tc *fleetv1alpha1.TaskClaim) {
	setCondition(tc, fleetv1alpha1.RecordClearedCondition, false, fleetv1alpha1.ReasonClearPending,
		"Ending the claim's Gitea record and freeing its lock")
}
