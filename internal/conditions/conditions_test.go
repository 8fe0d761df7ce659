package conditions

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

func TestSetReadiness(t *testing.T) {
	tests := []struct {
		name            string
		r               Readiness
		ready           metav1.ConditionStatus
		wantStalled     bool
		wantReconciling bool
	}{
		{"success", Readiness{Ready: true, Reason: "Done", Message: "ok"}, metav1.ConditionTrue, false, false},
		{"waiting", Readiness{Reason: "Waiting", Message: "later"}, metav1.ConditionFalse, false, false},
		{"working", Readiness{Reconciling: true, Reason: "Applying", Message: "now"}, metav1.ConditionFalse, false, true},
		{"final failure", Readiness{Stalled: true, Reason: "Refused", Message: "no"}, metav1.ConditionFalse, true, false},
		{"ready wins over stalled", Readiness{Ready: true, Stalled: true, Reason: "Done", Message: "ok"}, metav1.ConditionTrue, false, false},
		{"ready wins over reconciling", Readiness{Ready: true, Reconciling: true, Reason: "Done", Message: "ok"}, metav1.ConditionTrue, false, false},
		{"stalled wins over reconciling", Readiness{Stalled: true, Reconciling: true, Reason: "Refused", Message: "no"}, metav1.ConditionFalse, true, false},
	}
	for _, tt := range tests {
		// Start from a stalled, reconciling object: both must disappear unless they still hold.
		conds := []metav1.Condition{{Type: fleetv1alpha1.StalledCondition, Status: metav1.ConditionTrue, Reason: "Old", Message: "old"},
			{Type: fleetv1alpha1.ReconcilingCondition, Status: metav1.ConditionTrue, Reason: "Old", Message: "old"}}
		SetReadiness(&conds, 7, tt.r)
		ready := meta.FindStatusCondition(conds, fleetv1alpha1.ReadyCondition)
		if ready == nil || ready.Status != tt.ready || ready.Reason != tt.r.Reason || ready.ObservedGeneration != 7 {
			t.Errorf("%s: Ready = %+v", tt.name, ready)
		}
		stalled := meta.FindStatusCondition(conds, fleetv1alpha1.StalledCondition)
		if tt.wantStalled != (stalled != nil) {
			t.Errorf("%s: Stalled present = %v, want %v", tt.name, stalled != nil, tt.wantStalled)
		}
		if stalled != nil && (stalled.Status != metav1.ConditionTrue || stalled.Reason != tt.r.Reason) {
			t.Errorf("%s: Stalled = %+v", tt.name, stalled)
		}
		reconciling := meta.FindStatusCondition(conds, fleetv1alpha1.ReconcilingCondition)
		if tt.wantReconciling != (reconciling != nil) {
			t.Errorf("%s: Reconciling present = %v, want %v", tt.name, reconciling != nil, tt.wantReconciling)
		}
		if reconciling != nil && (reconciling.Status != metav1.ConditionTrue || reconciling.Reason != tt.r.Reason) {
			t.Errorf("%s: Reconciling = %+v", tt.name, reconciling)
		}
	}
}

func TestSetTruncatesLongMessages(t *testing.T) {
	var conds []metav1.Condition
	Set(&conds, 1, "X", true, "R", strings.Repeat("m", maxMessage+10))
	if got := len(conds[0].Message); got != maxMessage {
		t.Fatalf("message length %d, want %d", got, maxMessage)
	}
}

func TestRecordStampsEveryConditionAndLeavesReadinessAloneWhenNil(t *testing.T) {
	conds := []metav1.Condition{{Type: fleetv1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "Applying", Message: "now", ObservedGeneration: 2}}
	Record(&conds, 3, nil, Cond{Type: "Approved", True: true, Reason: "Approved", Message: strings.Repeat("x", maxMessage+5)})
	approved := meta.FindStatusCondition(conds, "Approved")
	if approved == nil || approved.Status != metav1.ConditionTrue || approved.ObservedGeneration != 3 || len(approved.Message) != maxMessage {
		t.Fatalf("Approved = %+v", approved)
	}
	if ready := meta.FindStatusCondition(conds, fleetv1alpha1.ReadyCondition); ready.Reason != "Applying" || ready.ObservedGeneration != 2 {
		t.Fatalf("a nil readiness changed Ready: %+v", ready)
	}
	Record(&conds, 4, &Readiness{Stalled: true, Reason: "Refused", Message: "no"})
	if ready := meta.FindStatusCondition(conds, fleetv1alpha1.ReadyCondition); ready.Reason != "Refused" || ready.ObservedGeneration != 4 ||
		!meta.IsStatusConditionTrue(conds, fleetv1alpha1.StalledCondition) {
		t.Fatalf("readiness not recorded: %+v", conds)
	}
}
