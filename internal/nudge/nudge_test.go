package nudge

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func newQueue(t *testing.T) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	t.Helper()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	return q
}

func TestNudgeWithoutController(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	var none *Hub
	if !closed(none.Nudge(key)) {
		t.Error("a nil hub made the gateway wait")
	}
	none.Look(key)() // a nil hub's look is a no-op
	if !closed((&Hub{}).Nudge(key)) {
		t.Error("a hub whose controller never started made the gateway wait")
	}
}

func TestNudgeWaitsForALookThatBeganAfterIt(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	q := newQueue(t)
	h := &Hub{}
	if err := h.Start(t.Context(), q); err != nil {
		t.Fatal(err)
	}

	// A look already under way when the nudge comes does not release it.
	early := h.Look(key)
	first := h.Nudge(key)
	if q.Len() != 1 {
		t.Fatalf("the nudge queued %d requests, want 1", q.Len())
	}
	if req, _ := q.Get(); req.NamespacedName != key {
		t.Fatalf("queued %v, want %v", req.NamespacedName, key)
	} else {
		q.Done(req)
	}
	early()
	if closed(first) {
		t.Fatal("a look that began before the nudge released it")
	}

	// A look of another claim does not release it either.
	h.Look(other)()
	if closed(first) {
		t.Fatal("a look at another claim released the nudge")
	}

	// The next look of the claim does, once it has ended, and every nudge before it.
	second := h.Nudge(key)
	done := h.Look(key)
	third := h.Nudge(key) // arrives during the look: waits for the next one
	if closed(first) || closed(second) {
		t.Fatal("a nudge was released before the look ended")
	}
	done()
	if !closed(first) || !closed(second) {
		t.Fatal("the look's end did not release the nudges made before it began")
	}
	if closed(third) {
		t.Fatal("a nudge made during the look was released by it")
	}
	h.Look(key)()
	if !closed(third) {
		t.Fatal("the next look did not release the nudge made during the previous one")
	}
}

func TestNudgeAfterTheControllerStopped(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	h := &Hub{}
	ctx, cancel := context.WithCancel(t.Context())
	if err := h.Start(ctx, newQueue(t)); err != nil {
		t.Fatal(err)
	}
	pending := h.Nudge(key)
	cancel()
	<-pending // the stop releases whoever still waits
	if !closed(h.Nudge(key)) {
		t.Error("a hub whose controller stopped made the gateway wait")
	}
}
