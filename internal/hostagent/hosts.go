package hostagent

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Holder is the agent that holds a host's Lease, and until when the Lease is valid
// without a renewal.
type Holder struct {
	// Agent is the holder's instance id.
	Agent string
	// Expires is renewTime + leaseDurationSeconds.
	Expires time.Time
}

// HolderOf reads who holds a Lease at now. ok is false when nobody does: no holder, no
// renew time or duration, or a renewal older than the Lease's duration (the agent is
// gone or cut off).
func HolderOf(l *coordinationv1.Lease, now time.Time) (h Holder, ok bool) {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil || *s.LeaseDurationSeconds <= 0 {
		return Holder{}, false
	}
	h = Holder{Agent: *s.HolderIdentity, Expires: s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)}
	return h, now.Before(h.Expires)
}

// Hosts is every host Lease in the agent namespace, by host id, with its holder.
type Hosts struct {
	// Held maps the host ids whose Lease is held at the time of the read to the holder.
	Held map[string]Holder
	// Unheld maps the host ids whose Lease exists but is held by nobody at the time of
	// the read to when it stopped being held: its last holder's renew time plus the
	// Lease's duration, or, for a Lease never held, its creation.
	Unheld map[string]time.Time
	// NextChange is the earliest expiry of a held Lease: when this view may change
	// without any write (zero when nothing is held).
	NextChange time.Time
}

// Agent returns the holder of hostID's Lease, if any.
func (h Hosts) Agent(hostID string) (Holder, bool) {
	x, ok := h.Held[hostID]
	return x, ok
}

// ListHosts reads the host Leases of namespace through r and says which hosts have an
// agent at now. A Lease without the host id annotation, or whose name is not the one
// its host id gives, is ignored.
func ListHosts(ctx context.Context, r client.Reader, namespace string, now time.Time) (Hosts, error) {
	leases := &coordinationv1.LeaseList{}
	if err := r.List(ctx, leases, client.InNamespace(namespace), client.MatchingLabels{LabelRole: RoleHost}); err != nil {
		return Hosts{}, fmt.Errorf("listing host Leases in %s: %w", namespace, err)
	}
	out := Hosts{Held: map[string]Holder{}, Unheld: map[string]time.Time{}}
	for i := range leases.Items {
		l := &leases.Items[i]
		id := l.Annotations[AnnotationHostID]
		if id == "" || LeaseName(id) != l.Name {
			continue
		}
		h, ok := HolderOf(l, now)
		if !ok {
			out.Unheld[id] = unheldSince(l)
			continue
		}
		out.Held[id] = h
		if out.NextChange.IsZero() || h.Expires.Before(out.NextChange) {
			out.NextChange = h.Expires
		}
	}
	return out, nil
}

// unheldSince is when a Lease nobody holds stopped being held: the end of its last
// renewal's term, or its creation when it was never renewed.
func unheldSince(l *coordinationv1.Lease) time.Time {
	s := l.Spec
	if s.RenewTime == nil {
		return l.CreationTimestamp.Time
	}
	d := time.Duration(0)
	if s.LeaseDurationSeconds != nil && *s.LeaseDurationSeconds > 0 {
		d = time.Duration(*s.LeaseDurationSeconds) * time.Second
	}
	return s.RenewTime.Add(d)
}
