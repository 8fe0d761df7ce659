// Package nudge lets the gateway have the TaskClaim controller look at a claim again at
// once, and wait until it has.
//
// The controller re-reads an active claim's target in Gitea on a timer (the recheck), which
// is how it notices that the claim's own work landed and ends it. The gateway sees that
// work as it happens: it forwards the pull request, review or merge that completes the
// claim. After such a write succeeds it nudges the claim and holds Gitea's answer until a
// reconcile that began after the write has finished, so the worker reads the answer with
// its claim already ended and the item free for the next role. The timer stays as the
// backstop: a nudge that is lost (another replica runs the controller, the wait times out)
// only delays the end until the next recheck.
package nudge

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Hub connects the gateway to the TaskClaim controller of the same process. It is the
// controller's source of nudged requests (Start) and the gateway's way to ask (Nudge).
// The zero value is ready; a nil *Hub nudges nothing.
type Hub struct {
	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	waiting map[types.NamespacedName][]chan struct{}
}

var _ source.Source = (*Hub)(nil)

// Start is called by the controller when it starts (the Hub is one of its sources). Until
// then, and after ctx ends, Nudge waits for nothing: no reconcile would come.
func (h *Hub) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	h.mu.Lock()
	h.queue = queue
	h.mu.Unlock()
	go func() {
		<-ctx.Done()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.queue = nil
		for key, ws := range h.waiting {
			release(ws)
			delete(h.waiting, key)
		}
	}()
	return nil
}

// Nudge queues the claim key for a reconcile. The channel it returns is closed once a
// reconcile of key that began after this call has finished, or at once when no controller
// runs in this process.
func (h *Hub) Nudge(key types.NamespacedName) <-chan struct{} {
	done := make(chan struct{})
	if h == nil {
		close(done)
		return done
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queue == nil {
		close(done)
		return done
	}
	if h.waiting == nil {
		h.waiting = map[types.NamespacedName][]chan struct{}{}
	}
	h.waiting[key] = append(h.waiting[key], done)
	h.queue.Add(reconcile.Request{NamespacedName: key})
	return done
}

// Look is called as a reconcile of key begins; the function it returns is called when
// that reconcile ends, and releases everyone who nudged key before it began. A nudge that
// arrives during the reconcile waits for the next one, which the nudge itself queued.
func (h *Hub) Look(key types.NamespacedName) (done func()) {
	if h == nil {
		return func() {}
	}
	h.mu.Lock()
	ws := h.waiting[key]
	delete(h.waiting, key)
	h.mu.Unlock()
	return func() { release(ws) }
}

func release(ws []chan struct{}) {
	for _, w := range ws {
		close(w)
	}
}
