package taskclaim

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// A repository whose GiteaRepository sets spec.maxActiveClaims to N has N slots:
// coordination Leases in the claim's namespace, named claim.SlotName(repository, i). A
// claim publishes only while it holds one: it takes a free slot (or creates a missing
// one) by compare-and-swap after it won its target's lock, and gives it back when it ends,
// with the lock (finish). So at most N claims of the repository are published or active
// at once, and two claims never hold one slot. Slots carry the claim locks' label and
// their holder's ownerReference: the sweep removes those of claims that are gone, as it
// removes their locks.

// slotsLabel groups the slots of one repository (claim.SlotsOf).
const slotsLabel = "fleet.giteatools.dev/claim-slots"

// takeSlot makes tc hold one of its repository's limit slots: the one it holds already,
// else a free one, else a new one. full is true when every slot below the limit is held
// by another claim. A slot lost to a concurrent claim (a conflict) is looked for again.
func (r *Reconciler) takeSlot(ctx context.Context, tc *fleetv1alpha1.TaskClaim, limit int) (full bool, err error) {
	key := keyOf(repositoryOf(tc))
	for range limit + 1 {
		slots, err := r.readSlots(ctx, tc.Namespace, key)
		if err != nil {
			return false, err
		}
		view := make([]claim.Slot, 0, len(slots))
		for i := range slots {
			view = append(view, slotOf(&slots[i]))
		}
		choice := claim.ChooseSlot(view, string(tc.UID), limit)
		switch {
		case choice.Held:
			return false, nil
		case choice.Full:
			return true, nil
		}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: claim.SlotName(key, choice.Index)}}
		if !choice.Create {
			for i := range slots {
				if slots[i].Name == lease.Name {
					lease = &slots[i]
				}
			}
		}
		lease.Labels = maps.Clone(lockLabels())
		lease.Labels[slotsLabel] = claim.SlotsOf(key)
		lease.OwnerReferences = ownedBy(tc)
		now := metav1.NewMicroTime(r.Clock.Now())
		lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(string(tc.UID)), LeaseDurationSeconds: ptr.To(int32(r.TTL / time.Second)),
			AcquireTime: &now, RenewTime: &now}
		if choice.Create {
			err = r.Create(ctx, lease)
		} else {
			err = r.Update(ctx, lease) // guarded by the resourceVersion the slot was read at
		}
		switch {
		case err == nil:
			return false, nil
		case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err), apierrors.IsNotFound(err):
			continue // another claim took it first: look again
		default:
			return false, fmt.Errorf("taking claim slot %s: %w", lease.Name, err)
		}
	}
	return false, fmt.Errorf("the slots of the claim's repository kept changing under it")
}

// releaseSlot gives back the slot tc holds, if any, guarded by the resourceVersion it
// was read at (a conflict means it changed hands already).
func (r *Reconciler) releaseSlot(ctx context.Context, tc *fleetv1alpha1.TaskClaim) error {
	rec := repositoryOf(tc)
	if rec.Server == "" {
		return nil // the flags' repository has no cap, so no slots
	}
	slots, err := r.readSlots(ctx, tc.Namespace, keyOf(rec))
	if err != nil {
		return err
	}
	for i := range slots {
		s := &slots[i]
		if ptr.Deref(s.Spec.HolderIdentity, "") != string(tc.UID) {
			continue
		}
		now := metav1.NewMicroTime(r.Clock.Now())
		s.Spec.HolderIdentity, s.Spec.AcquireTime, s.Spec.RenewTime = nil, nil, &now
		s.OwnerReferences = nil
		if err := r.Update(ctx, s); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing claim slot %s: %w", s.Name, err)
		}
	}
	return nil
}

// readSlots reads the slots of repository key in namespace straight from the API server.
func (r *Reconciler) readSlots(ctx context.Context, namespace string, key claim.RepositoryKey) ([]coordinationv1.Lease, error) {
	list := &coordinationv1.LeaseList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{slotsLabel: claim.SlotsOf(key)}); err != nil {
		return nil, fmt.Errorf("reading the claim slots of the repository: %w", err)
	}
	return list.Items, nil
}

// slotOf is what choosing a slot reads of one: its number (the end of its name) and its
// holder. A name that ends in no number is no slot any limit counts.
func slotOf(l *coordinationv1.Lease) claim.Slot {
	i, err := strconv.Atoi(l.Name[strings.LastIndex(l.Name, "-")+1:])
	if err != nil {
		i = -1
	}
	return claim.Slot{Index: i, Holder: ptr.Deref(l.Spec.HolderIdentity, "")}
}
