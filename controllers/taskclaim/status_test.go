package taskclaim

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
)

func readiness(tc *fleetv1alpha1.TaskClaim) (ready, stalled string) {
	if c := meta.FindStatusCondition(tc.Status.Conditions, fleetv1alpha1.ReadyCondition); c != nil && c.ObservedGeneration == tc.Generation {
		ready = string(c.Status)
	}
	if c := meta.FindStatusCondition(tc.Status.Conditions, fleetv1alpha1.StalledCondition); c != nil {
		stalled = string(c.Status)
	}
	return ready, stalled
}

func TestStatusSetters(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	capability := &claim.Capability{Worker: "w", Identity: "carol", Repository: "acme/widgets", Role: claim.RoleAuthor,
		Target: claim.Target{Repository: "acme/widgets", Kind: claim.KindIssue, Number: 7}, ExpiresAt: now.Add(time.Hour)}
	refused := claim.ContentionLoss(claim.PredicateLeaseCASConflict, capability.Target)
	tests := []struct {
		name           string
		mark           func(*fleetv1alpha1.TaskClaim)
		phase          string
		ready, stalled string
	}{
		{"validated: waiting for the pin", func(tc *fleetv1alpha1.TaskClaim) {
			markValidated(tc, claim.Validation{Pin: "sha256:p"}, claim.Result{Outcome: claim.OutcomeValidated}, now)
		}, claim.PhaseValidated, "False", ""},
		{"active", func(tc *fleetv1alpha1.TaskClaim) {
			markActive(tc, capability, claim.Result{Outcome: claim.OutcomeAcquired})
		}, claim.PhaseActive, "True", ""},
		{"rejected", func(tc *fleetv1alpha1.TaskClaim) { markRejected(tc, refused) }, claim.PhaseRejected, "False", "True"},
		{"released", func(tc *fleetv1alpha1.TaskClaim) { markEnded(tc, claim.PhaseReleased, claim.TriggerRelease, now) }, claim.PhaseReleased, "True", ""},
		{"completed", func(tc *fleetv1alpha1.TaskClaim) { markEnded(tc, claim.PhaseCompleted, claim.ExpiryCycleComplete, now) }, claim.PhaseCompleted, "True", ""},
		{"expired", func(tc *fleetv1alpha1.TaskClaim) { markEnded(tc, claim.PhaseExpired, claim.ExpiryExpired, now) }, claim.PhaseExpired, "False", "True"},
		{"revoked", func(tc *fleetv1alpha1.TaskClaim) { markEnded(tc, claim.PhaseRevoked, claim.TriggerBlock, now) }, claim.PhaseRevoked, "False", "True"},
	}
	for _, tt := range tests {
		// Every claim starts active so the setters must also take the capability away.
		tc := &fleetv1alpha1.TaskClaim{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		markActive(tc, capability, claim.Result{Outcome: claim.OutcomeAcquired})
		tt.mark(tc)
		if tc.Status.Phase != tt.phase {
			t.Errorf("%s: phase %s, want %s", tt.name, tc.Status.Phase, tt.phase)
		}
		if ready, stalled := readiness(tc); ready != tt.ready || stalled != tt.stalled {
			t.Errorf("%s: Ready=%q Stalled=%q, want %q %q", tt.name, ready, stalled, tt.ready, tt.stalled)
		}
		if hasCap := tc.Status.Capability != nil; hasCap != (tt.phase == claim.PhaseActive || tt.phase == claim.PhaseValidated) {
			t.Errorf("%s: capability present = %v", tt.name, hasCap)
		}
		// An ended claim's outcome is its ending, never "acquired".
		wantOutcome := map[string]string{
			claim.PhaseValidated: "validated", claim.PhaseActive: "acquired", claim.PhaseRejected: "not_acquired",
			claim.PhaseReleased: "released", claim.PhaseCompleted: "completed", claim.PhaseExpired: "expired", claim.PhaseRevoked: "revoked",
		}[tt.phase]
		if tc.Status.Result == nil || tc.Status.Result.Outcome != wantOutcome {
			t.Errorf("%s: result %+v, want outcome %s", tt.name, tc.Status.Result, wantOutcome)
		}
	}
}

func TestClearPendingKeepsTheClaimHeld(t *testing.T) {
	tc := &fleetv1alpha1.TaskClaim{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	markEnded(tc, claim.PhaseReleased, claim.TriggerRelease, time.Now())
	markClearPending(tc)
	c := meta.FindStatusCondition(tc.Status.Conditions, fleetv1alpha1.RecordClearedCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != fleetv1alpha1.ReasonClearPending || c.ObservedGeneration != 3 {
		t.Fatalf("RecordCleared = %+v", c)
	}
}

func TestActiveStatusNamesTheAuthorsWorkBranch(t *testing.T) {
	for _, tt := range []struct {
		role claim.Role
		want string
	}{
		{claim.RoleAuthor, "fleet/team-a/bot-1-issue-7"},
		{claim.RoleReviewer, ""},
		{claim.RoleMerger, ""},
	} {
		c := &claim.Capability{Worker: "bot-1", Role: tt.role, Operations: claim.OperationsFor(tt.role),
			Target: claim.Target{Repository: "acme/widgets", Kind: claim.KindIssue, Number: 7}}
		tc := &fleetv1alpha1.TaskClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "bot-1-issue-7"}}
		markActive(tc, c, claim.Result{Outcome: claim.OutcomeAcquired})
		if got := tc.Status.Capability.WorkBranch; got != tt.want {
			t.Errorf("%s: status.capability.workBranch %q, want %q", tt.role, got, tt.want)
		}
		if tt.want != "" && tt.want != claim.WorkBranch(tc.Namespace, tc.Name) {
			t.Errorf("the shown branch %q is not the one the gateway permits (%q)", tt.want, claim.WorkBranch(tc.Namespace, tc.Name))
		}
	}
}
