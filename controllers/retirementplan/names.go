package retirementplan

import (
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// How plans and their labels are named: deterministic, so every agent names alike.

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

// retiredBy is what a retired row records as the plan that retired it: the fleet plan
// the user acted on (for a host plan, its owner), as namespace/name.
func retiredBy(plan *fleetv1alpha1.RetirementPlan) string {
	if ref := metav1.GetControllerOf(plan); plan.Spec.HostID != "" && ref != nil && ref.Kind == kindRetirementPlan {
		return plan.Namespace + "/" + ref.Name
	}
	return plan.Namespace + "/" + plan.Name
}
