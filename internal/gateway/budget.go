package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// The comment budget of a capability is counted in a Lease of the claim's namespace,
// "fleet-budget-<claim UID>", owned by the TaskClaim (so it goes with it), which only the
// gateway writes. Comments are reserved there with a compare-and-swap on the Lease's
// resourceVersion before they are forwarded, so the budget holds however many comments
// arrive at once and at however many replicas. The first reservation of a capability
// seeds the count from Gitea (the identity's comments on the target since the claim was
// created), once; Gitea is not listed again.
//
// A replica reserves comments in blocks (claim.CommentBudget.Block) while much of the budget is
// left, and hands them out from memory: most comments cost no write. What a replica
// holds and does not use goes back to the Lease after BudgetIdleReturn, and a comment
// Gitea did not store goes back to the replica's block. Near the end of the budget a
// block is one comment, so the count is exact there; a replica that still holds part of
// an earlier block can make another replica refuse a comment until it gives that back
// (at most BudgetIdleReturn later), and never lets the budget be exceeded.

// Annotations of a budget Lease.
const (
	budgetCommentsAnnotation = "fleet.giteatools.dev/comments"
	budgetBytesAnnotation    = "fleet.giteatools.dev/comment-bytes"
	budgetClaimAnnotation    = "fleet.giteatools.dev/claim-id"
	budgetLeasePrefix        = "fleet-budget-"
)

// budgetConflictRetries bounds the compare-and-swap retries of one reservation.
const budgetConflictRetries = 20

// BudgetIdleReturn is how long a replica keeps comments it reserved and did not use
// before it gives them back to the budget.
const BudgetIdleReturn = time.Second

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update

// budgetLedger reserves comments against capabilities' budgets.
type budgetLedger struct {
	client client.Client
	reader client.Reader
	// seed counts a capability's comments in Gitea (its first reservation only).
	seed func(ctx context.Context, tc *fleetv1alpha1.TaskClaim, identity string) (count, size int, err error)
	// idle is how long unused reserved comments are kept (BudgetIdleReturn when zero).
	idle time.Duration

	mu sync.Mutex
	// last is the Lease each claim's budget was last seen as (its resourceVersion is the
	// next compare-and-swap's expectation), so a reservation is one write when nothing
	// else wrote in between.
	last map[string]*coordinationv1.Lease
	// held is what this replica reserved in each budget and has not used yet.
	held map[string]*heldBlock
}

// heldBlock is the unused rest of the comments a replica reserved in one budget.
type heldBlock struct {
	mu sync.Mutex
	// comments and bytes are reserved in the Lease and not used yet.
	comments, bytes int
	// timer gives them back once the budget has been idle.
	timer *time.Timer
}

// reservation is one reserved comment; release gives it back.
type reservation struct {
	ledger *budgetLedger
	key    client.ObjectKey
	block  *heldBlock
	size   int
}

// heldFor returns the replica's block of the budget key, creating it.
func (l *budgetLedger) heldFor(key client.ObjectKey) *heldBlock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[string]*heldBlock{}
	}
	h := l.held[key.String()]
	if h == nil {
		h = &heldBlock{}
		l.held[key.String()] = h
	}
	return h
}

// reserve counts one comment of size bytes against tc's budget and reports whether it
// fits; when it does, the returned reservation must be released if the comment is not
// stored. Comments of one budget are reserved one at a time in a replica.
func (l *budgetLedger) reserve(ctx context.Context, tc *fleetv1alpha1.TaskClaim, identity string, budget claim.CommentBudget, size int) (*reservation, bool, error) {
	c := apiconv.Capability(tc)
	if c == nil {
		return nil, false, errors.New("a comment without its capability")
	}
	key := client.ObjectKey{Namespace: tc.Namespace, Name: budgetLeasePrefix + string(tc.UID)}
	h := l.heldFor(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	defer l.idleReturn(key, h)
	if h.comments >= 1 && h.bytes >= size {
		h.comments, h.bytes = h.comments-1, h.bytes-size
		return &reservation{ledger: l, key: key, block: h, size: size}, true, nil
	}
	for range budgetConflictRetries {
		lease, err := l.current(ctx, key)
		if err != nil {
			return nil, false, err
		}
		var count, bytes int
		if lease == nil {
			if count, bytes, err = l.seed(ctx, tc, identity); err != nil {
				return nil, false, err
			}
		} else {
			if lease.Annotations[budgetClaimAnnotation] != c.ClaimID {
				return nil, false, fmt.Errorf("the comment budget %s belongs to another capability", key)
			}
			if count, bytes, err = budgetCounts(lease); err != nil {
				return nil, false, err
			}
			// What this replica holds goes back in the same write that takes the new block.
			count, bytes = max(count-h.comments, 0), max(bytes-h.bytes, 0)
		}
		comments, blockBytes, ok := budget.Block(count, bytes, size)
		if !ok {
			return nil, false, nil
		}
		if lease == nil {
			lease = newBudgetLease(key, tc, c.ClaimID, count+comments, bytes+blockBytes)
			if err := l.client.Create(ctx, lease); apierrors.IsAlreadyExists(err) {
				l.forget(key)
				continue // another replica seeded it first: count on its object
			} else if err != nil {
				return nil, false, fmt.Errorf("creating the comment budget %s: %w", key, err)
			}
		} else {
			next := lease.DeepCopy()
			setBudgetCounts(next, count+comments, bytes+blockBytes)
			if err := l.client.Update(ctx, next); apierrors.IsConflict(err) {
				l.forget(key)
				continue
			} else if err != nil {
				return nil, false, fmt.Errorf("reserving a comment in %s: %w", key, err)
			}
			lease = next
		}
		l.remember(key, lease)
		h.comments, h.bytes = comments-1, blockBytes-size
		return &reservation{ledger: l, key: key, block: h, size: size}, true, nil
	}
	return nil, false, fmt.Errorf("the comment budget %s kept changing; gave up after %d attempts", key, budgetConflictRetries)
}

// release gives a reserved comment back (Gitea did not store it): to the replica's
// block, which returns to the budget with the rest of it.
func (r *reservation) release() {
	h := r.block
	h.mu.Lock()
	defer h.mu.Unlock()
	h.comments, h.bytes = h.comments+1, h.bytes+r.size
	r.ledger.idleReturn(r.key, h)
}

// idleReturn (re)arms h's timer: once the budget has been idle for the ledger's idle
// time, what h holds goes back to the Lease. h.mu is held.
func (l *budgetLedger) idleReturn(key client.ObjectKey, h *heldBlock) {
	if h.comments == 0 && h.bytes == 0 {
		return
	}
	idle := l.idle
	if idle <= 0 {
		idle = BudgetIdleReturn
	}
	if h.timer != nil {
		h.timer.Stop()
	}
	h.timer = time.AfterFunc(idle, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := l.giveBack(ctx, key, h); err != nil {
			// Kept counted: the budget is lower than it could be, never higher.
			logf.Log.WithName("gateway").Error(err, "Cannot give unused comments back to their budget", "budget", key.String())
		}
	})
}

// giveBack returns what h holds to the Lease. h.mu is held.
func (l *budgetLedger) giveBack(ctx context.Context, key client.ObjectKey, h *heldBlock) error {
	if h.comments == 0 && h.bytes == 0 {
		return nil
	}
	for range budgetConflictRetries {
		lease, err := l.current(ctx, key)
		if err != nil {
			return err
		}
		if lease == nil { // gone with its claim
			h.comments, h.bytes = 0, 0
			return nil
		}
		count, bytes, err := budgetCounts(lease)
		if err != nil {
			return err
		}
		next := lease.DeepCopy()
		setBudgetCounts(next, max(count-h.comments, 0), max(bytes-h.bytes, 0))
		switch err := l.client.Update(ctx, next); {
		case apierrors.IsConflict(err):
			l.forget(key)
			continue
		case apierrors.IsNotFound(err):
			l.forget(key)
			h.comments, h.bytes = 0, 0
			return nil
		case err != nil:
			return err
		}
		l.remember(key, next)
		h.comments, h.bytes = 0, 0
		return nil
	}
	return fmt.Errorf("the comment budget %s kept changing", key)
}

// current returns the Lease as last seen, or reads it (nil when it does not exist).
func (l *budgetLedger) current(ctx context.Context, key client.ObjectKey) (*coordinationv1.Lease, error) {
	l.mu.Lock()
	lease := l.last[key.String()]
	l.mu.Unlock()
	if lease != nil {
		return lease, nil
	}
	lease = &coordinationv1.Lease{}
	if err := l.reader.Get(ctx, key, lease); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading the comment budget %s: %w", key, err)
	}
	return lease, nil
}

func (l *budgetLedger) remember(key client.ObjectKey, lease *coordinationv1.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]*coordinationv1.Lease{}
	}
	// Bounded: a long-running gateway forgets everything once it has seen many budgets
	// (the next reservation of each reads its Lease again).
	if len(l.last) >= 4096 {
		clear(l.last)
	}
	l.last[key.String()] = lease
}

func (l *budgetLedger) forget(key client.ObjectKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.last, key.String())
}

func newBudgetLease(key client.ObjectKey, tc *fleetv1alpha1.TaskClaim, claimID string, count, size int) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: key.Name,
			Labels:      map[string]string{fleetv1alpha1.GroupVersion.Group + "/budget-of": tc.Name},
			Annotations: map[string]string{budgetClaimAnnotation: claimID},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: fleetv1alpha1.GroupVersion.String(), Kind: "TaskClaim", Name: tc.Name, UID: tc.UID,
			}},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("fleet-gateway")},
	}
	setBudgetCounts(lease, count, size)
	return lease
}

func budgetCounts(lease *coordinationv1.Lease) (count, size int, err error) {
	count, err1 := strconv.Atoi(lease.Annotations[budgetCommentsAnnotation])
	size, err2 := strconv.Atoi(lease.Annotations[budgetBytesAnnotation])
	if err := errors.Join(err1, err2); err != nil || count < 0 || size < 0 {
		return 0, 0, fmt.Errorf("the comment budget %s/%s is unreadable", lease.Namespace, lease.Name)
	}
	return count, size, nil
}

func setBudgetCounts(lease *coordinationv1.Lease, count, size int) {
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[budgetCommentsAnnotation] = strconv.Itoa(count)
	lease.Annotations[budgetBytesAnnotation] = strconv.Itoa(size)
}

// claimsRead is a read of a worker's TaskClaims, in flight.
type claimsRead struct {
	done chan struct{}
	list *fleetv1alpha1.TaskClaimList
	err  error
}

// readClaims starts reading the caller's TaskClaims (those of namespace whose spec.worker
// is worker) as the API server holds them now. With an informer cache, the cache names
// the worker's claims that are not final and each is read back from the API server by
// name, at once: a read by name is answered from etcd, where a list waits for the API
// server's watch cache to catch up, which took most of a comment's overhead. Only an
// Active claim grants a write and a claim is final for good, so a claim the cache has
// not seen yet (created a moment ago) can only make the write refused, never allowed.
// Without a cache the claims are listed, selected by the API server (the CRD's
// selectable field).
func (g *Gateway) readClaims(ctx context.Context, namespace, worker string) *claimsRead {
	cr := &claimsRead{done: make(chan struct{}), list: &fleetv1alpha1.TaskClaimList{}}
	go func() {
		defer close(cr.done)
		if g.cached {
			var listed bool
			if cr.list.Items, listed, cr.err = g.readOpenClaims(ctx, namespace, worker); listed {
				return
			}
			// A namespace the cache does not hold: list from the API server.
		}
		cr.err = g.Reader.List(ctx, cr.list, client.InNamespace(namespace),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(fieldWorker, worker)})
	}()
	return cr
}

// readOpenClaims reads back from the API server each of worker's claims that the cache
// holds as not final; a claim gone meanwhile is left out. listed is false when the cache
// cannot list the namespace (one it does not hold, say); nothing was read then.
func (g *Gateway) readOpenClaims(ctx context.Context, namespace, worker string) (claims []fleetv1alpha1.TaskClaim, listed bool, err error) {
	cached := &fleetv1alpha1.TaskClaimList{}
	if err := g.Cache.List(ctx, cached, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, false, nil
	}
	var names []string
	for i := range cached.Items {
		if tc := &cached.Items[i]; tc.Spec.Worker == worker && !claim.FinalPhase(tc.Status.Phase) {
			names = append(names, tc.Name)
		}
	}
	fresh := make([]fleetv1alpha1.TaskClaim, len(names))
	found := make([]bool, len(names))
	g2, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g2.Go(func() error {
			err := g.Reader.Get(gctx, client.ObjectKey{Namespace: namespace, Name: name}, &fresh[i])
			if apierrors.IsNotFound(err) {
				return nil
			}
			found[i] = err == nil
			return err
		})
	}
	if err := g2.Wait(); err != nil {
		return nil, true, err
	}
	out := fresh[:0]
	for i := range fresh {
		if found[i] {
			out = append(out, fresh[i])
		}
	}
	return out, true, nil
}

// fieldWorker is the TaskClaim's selectable spec.worker field.
const fieldWorker = "spec.worker"

func (cr *claimsRead) wait() (*fleetv1alpha1.TaskClaimList, error) {
	<-cr.done
	return cr.list, cr.err
}

// speculativeReservation is a comment reserved on the claim the cache names while the
// authoritative claims are still being read.
type speculativeReservation struct {
	uid   types.UID
	done  chan struct{}
	res   *reservation
	ok    bool
	err   error
	taken bool
}

// speculate reserves the comment on the caller's Active claim of the route's number as
// the cache has it, under the identity the cache gives its registration (nil when the
// cache names no such claim). The write is decided later on fresh reads; a reservation
// the decision does not take is given back (discard).
func (g *Gateway) speculate(ctx context.Context, caller Caller, rt claim.Route, w claim.Write) *speculativeReservation {
	wr := &fleetv1alpha1.WorkerRegistration{}
	if err := g.Cache.Get(ctx, client.ObjectKey{Namespace: caller.Namespace, Name: caller.Name}, wr); err != nil {
		return nil
	}
	list := &fleetv1alpha1.TaskClaimList{}
	// Read only: the cache's objects are not copied.
	if err := g.Cache.List(ctx, list, client.InNamespace(caller.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	for i := range list.Items {
		tc := &list.Items[i]
		c := tc.Status.Capability
		if tc.Spec.Worker != caller.Name || tc.Status.Phase != fleetv1alpha1.ClaimPhaseActive || c == nil || c.Target.Number != rt.Number {
			continue
		}
		s := &speculativeReservation{uid: tc.UID, done: make(chan struct{})}
		go func() {
			defer close(s.done)
			s.res, s.ok, s.err = g.budgets.reserve(context.WithoutCancel(ctx), tc, wr.Spec.Identity, g.CommentBudget, commentSize(w))
		}()
		return s
	}
	return nil
}

// take reports whether the reservation was made on tc, and then hands it over: its
// outcome is in res, ok and err.
func (s *speculativeReservation) take(tc *fleetv1alpha1.TaskClaim) bool {
	if s == nil || tc == nil || s.uid != tc.UID {
		return false
	}
	<-s.done
	s.taken = true
	return true
}

// discard gives back a reservation nobody took (the write was refused, or decided on
// another claim).
func (s *speculativeReservation) discard() {
	if s == nil || s.taken {
		return
	}
	go func() {
		<-s.done
		if s.res != nil {
			s.res.release()
		}
	}()
}
