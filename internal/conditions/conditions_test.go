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
		name        string
		r           Readiness
		ready       metav1.ConditionStatus
		wantStalled bool
	}{
		{"success", Readiness{Ready: true, Reason: "Done", Message: "ok"}, metav1.ConditionTrue, false},
		{"waiting", Readiness{Reason: "Waiting", Message: "later"}, metav1.ConditionFalse, false},
		{"final failure", Readiness{Stalled: true, Reason: "Refused", Message: "no"}, metav1.ConditionFalse, true},
		{"ready wins over stalled", Readiness{Ready: true, Stalled: true, Reason: "Done", Message: "ok"}, metav1.ConditionTrue, false},
	}
	for _, tt := range tests {
		// Start from a stalled object: Stalled must disappear unless it still holds.
		conds := []metav1.Condition{{Type: fleetv1alpha1.StalledCondition, Status: metav1.ConditionTrue, Reason: "Old", Message: "old"}}
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
	}
}

func TestSetTruncatesLongMessages(t *testing.T) {
	var conds []metav1.Condition
	Set(&conds, 1, "X", true, "R", strings.Repeat("m", maxMessage+10))
	if got := len(conds[0].Message); got != maxMessage {
		t.Fatalf("message length %d, want %d", got, maxMessage)
	}
}
