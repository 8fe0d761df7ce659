package retirementplan

import (
	"sync"
	"time"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// viewMemo holds the newest view of a namespace's registrations a fan-out of this process
// read, for the dry run of this manager's own host plan, which plans at that view's
// resourceVersion: taken once, and dropped after viewMemoTTL if nobody takes it.
type viewMemo struct {
	mu            sync.Mutex
	namespace, rv string
	items         []fleetv1alpha1.WorkerRegistration
	generation    uint64
}

// viewMemoTTL is how long a remembered view waits for its host plan's dry run.
const viewMemoTTL = time.Minute

func (m *viewMemo) keep(namespace, rv string, items []fleetv1alpha1.WorkerRegistration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.namespace, m.rv, m.items = namespace, rv, items
	m.generation++
	gen := m.generation
	time.AfterFunc(viewMemoTTL, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.generation == gen {
			m.namespace, m.rv, m.items = "", "", nil
		}
	})
}

func (m *viewMemo) take(namespace, rv string) ([]fleetv1alpha1.WorkerRegistration, bool) {
	if rv == "" {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.items == nil || m.namespace != namespace || m.rv != rv {
		return nil, false
	}
	items := m.items
	m.namespace, m.rv, m.items = "", "", nil
	m.generation++
	return items, true
}
