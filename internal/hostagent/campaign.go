package hostagent

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Elections are one manager's candidacies: the fleet coordinator, and the agent of its
// own host (nil when the manager knows no host id, so it acts for no host's rows).
type Elections struct {
	// Instance identifies this manager in both Leases.
	Instance string
	// Coordinator is the fleet coordinator candidacy.
	Coordinator *Agent
	// Host is this host's agent candidacy, or nil.
	Host *Agent
}

// Held reports whether this manager holds every Lease it campaigns for.
func (e Elections) Held() bool {
	return e.Coordinator.Held() && (e.Host == nil || e.Host.Held())
}

// Campaign adds this manager's candidacies to mgr: always the fleet coordinator, and the
// agent of hostID when hostID is set. Both Leases live in namespace. Every manager
// campaigns whatever its leader-election setting, because the Leases elect one holder
// of each and the holder alone acts.
func Campaign(mgr manager.Manager, namespace, hostID string, t Timings) (Elections, error) {
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return Elections{}, fmt.Errorf("client for the host election: %w", err)
	}
	e := Elections{Instance: NewInstanceID()}
	e.Coordinator = NewCoordinator(cs, namespace, e.Instance, t)
	if err := mgr.Add(e.Coordinator); err != nil {
		return Elections{}, fmt.Errorf("fleet coordinator election: %w", err)
	}
	if hostID == "" {
		return e, nil
	}
	e.Host = NewHost(cs, namespace, hostID, e.Instance, t)
	if err := mgr.Add(e.Host); err != nil {
		return Elections{}, fmt.Errorf("host election: %w", err)
	}
	return e, nil
}
