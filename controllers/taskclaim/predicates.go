package taskclaim

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// registrationChangeMatters passes the registration events a claim decision depends on:
// creation, deletion, and updates that change the spec (generation), the phase, the
// ownership state or the deletion timestamp. A heartbeat renews status.lastHeartbeatAt
// only; the WorkerRegistration reconciler turns a lapsed heartbeat into an ownership
// state change, and that change is what reaches the claims. So a heartbeat alone makes
// no claim re-read Gitea.
func registrationChangeMatters() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return registrationChanged(e.ObjectOld, e.ObjectNew)
		},
	}
}

// registrationChanged reports whether the update from old to cur matters to claims.
func registrationChanged(old, cur client.Object) bool {
	o, ok1 := old.(*fleetv1alpha1.WorkerRegistration)
	n, ok2 := cur.(*fleetv1alpha1.WorkerRegistration)
	if !ok1 || !ok2 {
		return true // not what it should be: let the claims look
	}
	return o.Generation != n.Generation ||
		o.Status.Phase != n.Status.Phase ||
		o.Status.OwnershipState != n.Status.OwnershipState ||
		!o.DeletionTimestamp.Equal(n.DeletionTimestamp)
}

// isLock reports whether a Lease is a per-target claim lock (not, for example, the
// workflow fence or a leader-election lease).
func isLock(o client.Object) bool {
	return o.GetLabels()[fleetv1alpha1.ClaimLockLabel] == lockLabels()[fleetv1alpha1.ClaimLockLabel]
}

// lockChangeMatters passes the lock events an active claim must see: a lock deleted, or
// changed by anyone but its holder taking or freeing it (taken by someone else, bumped, its
// holder erased). A claim's own acquisition and release are its own doing and would only
// cost a needless re-check in Gitea; creations are the controller's free locks.
func lockChangeMatters() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return isLock(e.ObjectNew) && !ownMove(e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc:  func(e event.DeleteEvent) bool { return isLock(e.Object) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// ownMove reports whether the update from old to cur is a claim taking the lock for
// itself (the new holder is a claim that owns it) or freeing it (the holder was a claim
// owning it before, and nobody holds it now).
func ownMove(old, cur client.Object) bool {
	o, ok1 := old.(*coordinationv1.Lease)
	n, ok2 := cur.(*coordinationv1.Lease)
	if !ok1 || !ok2 {
		return false
	}
	before, after := ptr.Deref(o.Spec.HolderIdentity, ""), ptr.Deref(n.Spec.HolderIdentity, "")
	owns := func(l *coordinationv1.Lease, uid string) bool {
		for _, ref := range l.OwnerReferences {
			if string(ref.UID) == uid {
				return true
			}
		}
		return false
	}
	switch {
	case after != "" && after != before:
		return owns(n, after)
	case after == "" && before != "":
		return owns(o, before) && !owns(n, before)
	}
	return false
}
