package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

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
// gateway writes. A comment is reserved there with a compare-and-swap on the Lease's
// resourceVersion before it is forwarded, and given back when Gitea does not store it.
// Every replica of the gateway counts in the same object, so the budget is exact however
// many comments arrive at once and wherever they arrive. The first comment of a
// capability seeds the count from Gitea (the identity's comments on the target since the
// claim was created), once; Gitea is not listed again.

// Annotations of a budget Lease.
const (
	budgetCommentsAnnotation = "fleet.giteatools.dev/comments"
	budgetBytesAnnotation    = "fleet.giteatools.dev/comment-bytes"
	budgetClaimAnnotation    = "fleet.giteatools.dev/claim-id"
	budgetLeasePrefix        = "fleet-budget-"
)

// budgetConflictRetries bounds the compare-and-swap retries of one reservation.
const budgetConflictRetries = 20

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update

// budgetLedger reserves comments against capabilities' budgets.
type budgetLedger struct {
	client client.Client
	reader client.Reader
	// seed counts a capability's comments in Gitea (its first reservation only).
	seed func(ctx context.Context, tc *fleetv1alpha1.TaskClaim, identity string) (count, size int, err error)

	mu sync.Mutex
	// last is the Lease each claim's budget was last seen as (its resourceVersion is the
	// next compare-and-swap's expectation), so a reservation is one write when nothing
	// else wrote in between.
	last map[string]*coordinationv1.Lease
}

// reservation is one reserved comment; release gives it back.
type reservation struct {
	ledger *budgetLedger
	key    client.ObjectKey
	size   int
}

// reserve counts one comment of size bytes against tc's budget and reports whether it
// fits; when it does, the returned reservation must be released if the comment is not
// stored.
func (l *budgetLedger) reserve(ctx context.Context, tc *fleetv1alpha1.TaskClaim, identity string, budget claim.CommentBudget, size int) (*reservation, bool, error) {
	c := apiconv.Capability(tc)
	if c == nil {
		return nil, false, errors.New("a comment without its capability")
	}
	key := client.ObjectKey{Namespace: tc.Namespace, Name: budgetLeasePrefix + string(tc.UID)}
	for range budgetConflictRetries {
		lease, err := l.current(ctx, key)
		if err != nil {
			return nil, false, err
		}
		if lease == nil {
			count, bytes, err := l.seed(ctx, tc, identity)
			if err != nil {
				return nil, false, err
			}
			if !budget.Allows(count, bytes, size) {
				return nil, false, nil
			}
			lease = newBudgetLease(key, tc, c.ClaimID, count+1, bytes+size)
			if err := l.client.Create(ctx, lease); apierrors.IsAlreadyExists(err) {
				l.forget(key)
				continue // another replica seeded it first: count on its object
			} else if err != nil {
				return nil, false, fmt.Errorf("creating the comment budget %s: %w", key, err)
			}
			l.remember(key, lease)
			return &reservation{ledger: l, key: key, size: size}, true, nil
		}
		if lease.Annotations[budgetClaimAnnotation] != c.ClaimID {
			return nil, false, fmt.Errorf("the comment budget %s belongs to another capability", key)
		}
		count, bytes, err := budgetCounts(lease)
		if err != nil {
			return nil, false, err
		}
		if !budget.Allows(count, bytes, size) {
			return nil, false, nil
		}
		next := lease.DeepCopy()
		setBudgetCounts(next, count+1, bytes+size)
		if err := l.client.Update(ctx, next); apierrors.IsConflict(err) {
			l.forget(key)
			continue
		} else if err != nil {
			return nil, false, fmt.Errorf("reserving a comment in %s: %w", key, err)
		}
		l.remember(key, next)
		return &reservation{ledger: l, key: key, size: size}, true, nil
	}
	return nil, false, fmt.Errorf("the comment budget %s kept changing; gave up after %d attempts", key, budgetConflictRetries)
}

// release gives a reserved comment back (Gitea did not store it). A release that fails
// leaves the budget counted lower than it could be, never higher.
func (r *reservation) release(ctx context.Context) error {
	l := r.ledger
	for range budgetConflictRetries {
		lease, err := l.current(ctx, r.key)
		if err != nil || lease == nil {
			return err
		}
		count, bytes, err := budgetCounts(lease)
		if err != nil {
			return err
		}
		next := lease.DeepCopy()
		setBudgetCounts(next, max(count-1, 0), max(bytes-r.size, 0))
		if err := l.client.Update(ctx, next); apierrors.IsConflict(err) {
			l.forget(r.key)
			continue
		} else if err != nil {
			return err
		}
		l.remember(r.key, next)
		return nil
	}
	return fmt.Errorf("the comment budget %s kept changing", r.key)
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

// claimsRead is a read of a namespace's TaskClaims from the API server, in flight.
type claimsRead struct {
	done chan struct{}
	list *fleetv1alpha1.TaskClaimList
	err  error
}

// readClaims starts reading the caller's TaskClaims (those of namespace whose spec.worker
// is worker) from the API server, which selects them (the CRD's selectable field): a
// namespace of many workers' claims costs one worker's.
func (g *Gateway) readClaims(ctx context.Context, namespace, worker string) *claimsRead {
	cr := &claimsRead{done: make(chan struct{}), list: &fleetv1alpha1.TaskClaimList{}}
	go func() {
		defer close(cr.done)
		cr.err = g.Reader.List(ctx, cr.list, client.InNamespace(namespace),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(fieldWorker, worker)})
	}()
	return cr
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
// the cache has it (nil when the cache names none).
func (g *Gateway) speculate(ctx context.Context, wr *fleetv1alpha1.WorkerRegistration, rt claim.Route, w claim.Write) *speculativeReservation {
	list := &fleetv1alpha1.TaskClaimList{}
	// Read only: the cache's objects are not copied.
	if err := g.Cache.List(ctx, list, client.InNamespace(wr.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	for i := range list.Items {
		tc := &list.Items[i]
		c := tc.Status.Capability
		if tc.Spec.Worker != wr.Name || tc.Status.Phase != fleetv1alpha1.ClaimPhaseActive || c == nil || c.Target.Number != rt.Number {
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
func (s *speculativeReservation) discard(ctx context.Context) {
	if s == nil || s.taken {
		return
	}
	go func() {
		<-s.done
		if s.res != nil {
			if err := s.res.release(context.WithoutCancel(ctx)); err != nil {
				logf.FromContext(ctx).Error(err, "Cannot give back a comment reserved for a write that was not forwarded")
			}
		}
	}()
}
