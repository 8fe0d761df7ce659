// Package conditions holds the status-condition setters shared by the reconcilers. They
// follow Flux and kstatus: Ready is always present and True only when the object reached
// the state its spec asks for; Stalled is present only while True, when the object is
// final and cannot progress without a new object (so `kubectl wait --for=condition=Ready`
// never reports success for a failure); Reconciling is present only while True, while the
// controller still works towards the spec (kstatus: InProgress).
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// maxMessage is the API's limit on a condition message.
const maxMessage = 32768

// Set sets one condition, observed at generation.
func Set(conds *[]metav1.Condition, generation int64, typ string, status bool, reason, msg string) {
	st := metav1.ConditionFalse
	if status {
		st = metav1.ConditionTrue
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: generation})
}

// Readiness is the pair Ready/Stalled as one verdict.
type Readiness struct {
	// Ready is true only on success.
	Ready bool
	// Stalled is true when the object is final and did not succeed.
	Stalled bool
	// Reconciling is true while the controller still works towards the spec (neither
	// Ready nor Stalled yet).
	Reconciling bool
	// Reason and Message explain both conditions.
	Reason, Message string
}

// SetReadiness writes Ready, Stalled while it is true and Reconciling while it is true
// (removing each otherwise). Ready wins over Stalled, and Stalled over Reconciling.
func SetReadiness(conds *[]metav1.Condition, generation int64, r Readiness) {
	Set(conds, generation, fleetv1alpha1.ReadyCondition, r.Ready, r.Reason, r.Message)
	stalled := r.Stalled && !r.Ready
	if stalled {
		Set(conds, generation, fleetv1alpha1.StalledCondition, true, r.Reason, r.Message)
	} else {
		meta.RemoveStatusCondition(conds, fleetv1alpha1.StalledCondition)
	}
	if r.Reconciling && !r.Ready && !stalled {
		Set(conds, generation, fleetv1alpha1.ReconcilingCondition, true, r.Reason, r.Message)
	} else {
		meta.RemoveStatusCondition(conds, fleetv1alpha1.ReconcilingCondition)
	}
}

// Cond is one condition a decision sets: Record stamps it with the generation.
type Cond struct {
	Type string
	// True is the condition's status (False otherwise).
	True            bool
	Reason, Message string
}

// Record sets each condition, then the readiness r (none when nil), all observed at
// generation: a status decided as a whole is written by one call.
func Record(conds *[]metav1.Condition, generation int64, r *Readiness, each ...Cond) {
	for _, c := range each {
		Set(conds, generation, c.Type, c.True, c.Reason, c.Message)
	}
	if r != nil {
		SetReadiness(conds, generation, *r)
	}
}
