package taskclaim

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

func TestRegistrationChanged(t *testing.T) {
	base := func() *fleetv1alpha1.WorkerRegistration {
		return &fleetv1alpha1.WorkerRegistration{
			ObjectMeta: metav1.ObjectMeta{Name: "w", Generation: 1, ResourceVersion: "10"},
			Status: fleetv1alpha1.WorkerRegistrationStatus{Phase: fleetv1alpha1.PhaseActive,
				OwnershipState: fleetv1alpha1.OwnershipLive, LastHeartbeatAt: ptr.To(metav1.NewTime(time.Unix(1000, 0)))},
		}
	}
	tests := []struct {
		name   string
		mutate func(*fleetv1alpha1.WorkerRegistration)
		want   bool
	}{
		{"heartbeat only", func(w *fleetv1alpha1.WorkerRegistration) {
			w.ResourceVersion = "11"
			w.Status.LastHeartbeatAt = ptr.To(metav1.NewTime(time.Unix(1010, 0)))
		}, false},
		{"nothing", func(*fleetv1alpha1.WorkerRegistration) {}, false},
		{"retired", func(w *fleetv1alpha1.WorkerRegistration) { w.Status.Phase = fleetv1alpha1.PhaseRetired }, true},
		{"no longer live", func(w *fleetv1alpha1.WorkerRegistration) { w.Status.OwnershipState = fleetv1alpha1.OwnershipStale }, true},
		{"spec changed", func(w *fleetv1alpha1.WorkerRegistration) { w.Generation = 2 }, true},
		{"being deleted", func(w *fleetv1alpha1.WorkerRegistration) { w.DeletionTimestamp = ptr.To(metav1.Now()) }, true},
	}
	for _, tt := range tests {
		n := base()
		tt.mutate(n)
		if got := registrationChanged(base(), n); got != tt.want {
			t.Errorf("%s: registrationChanged = %v, want %v", tt.name, got, tt.want)
		}
	}
	if !registrationChanged(&fleetv1alpha1.TaskClaim{}, base()) {
		t.Error("an object of another kind must not be filtered out")
	}
}

func TestIsLock(t *testing.T) {
	lock := &fleetv1alpha1.TaskClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleetv1alpha1.ClaimLockLabel: "true"}}}
	if !isLock(lock) || isLock(&fleetv1alpha1.TaskClaim{}) {
		t.Fatal("isLock must pass exactly the labelled claim locks")
	}
}

func TestOwnMove(t *testing.T) {
	lock := func(holder string, owners ...string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleetv1alpha1.ClaimLockLabel: "true"}}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		for _, o := range owners {
			l.OwnerReferences = append(l.OwnerReferences, metav1.OwnerReference{Kind: "TaskClaim", Name: o, UID: types.UID(o)})
		}
		return l
	}
	tests := []struct {
		name     string
		old, cur *coordinationv1.Lease
		own      bool
	}{
		{"a claim takes the free lock", lock(""), lock("a", "a"), true},
		{"a claim takes over a lapsed lock", lock("b", "b"), lock("a", "a"), true},
		{"a claim frees its lock", lock("a", "a"), lock(""), true},
		{"someone else takes it", lock("a", "a"), lock("thief", "a"), false},
		{"the holder is erased, the claim still owning it", lock("a", "a"), lock("", "a"), false},
		{"bumped, holder unchanged", lock("a", "a"), lock("a", "a"), false},
	}
	for _, tt := range tests {
		if got := ownMove(tt.old, tt.cur); got != tt.own {
			t.Errorf("%s: ownMove = %v, want %v", tt.name, got, tt.own)
		}
		if got := lockChangeMatters().Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.cur}); got == tt.own {
			t.Errorf("%s: the watch passes it = %v", tt.name, got)
		}
	}
}
