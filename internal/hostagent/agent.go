// Package hostagent is the adapter that makes one manager the agent of its host: it
// campaigns, through client-go leader election on a coordination.k8s.io Lease named
// after the host, for the right to write that host's registrations and plans, and says
// at any moment whether it holds that right. It also lists which hosts have an agent
// now, from the same Leases.
//
// Liveness can only be proven on a worker's own host, so each host runs the retirement
// of its own rows. Two managers with the same host id elect one: the other stands by and
// writes nothing for that host until the Lease is free again.
package hostagent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// Labels and annotations of the coordination Leases.
const (
	// LabelRole marks the Leases of this package: RoleHost for a host's Lease,
	// RoleCoordinator for the fleet coordinator's.
	LabelRole = fleetv1alpha1.AgentLeaseLabel
	// RoleHost is the LabelRole value of a host's Lease.
	RoleHost = "host"
	// RoleCoordinator is the LabelRole value of the fleet coordinator's Lease.
	RoleCoordinator = "coordinator"
	// AnnotationHostID carries the full host id on a host's Lease (its name holds only a
	// hash of it).
	AnnotationHostID = fleetv1alpha1.HostIDAnnotation
	// CoordinatorLeaseName is the Lease the agents elect the fleet coordinator with: the
	// one agent that writes the ownership state of rows whose host has no agent.
	CoordinatorLeaseName = "fleet-coordinator"
)

// Default election timings (those of controller-runtime's leader election).
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// LeaseName is the name of host hostID's coordination Lease: "fleet-host-" and the
// first 16 hex digits of the SHA-256 of the host id (machine ids are 32 hex digits, but
// a host id may be anything, so its hash keeps the name valid and short).
func LeaseName(hostID string) string {
	sum := sha256.Sum256([]byte(hostID))
	return "fleet-host-" + hex.EncodeToString(sum[:])[:16]
}

// NewInstanceID mints the identity of one agent process: "agent-" and 16 random hex
// digits. A restarted process is a new instance.
func NewInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return "agent-" + hex.EncodeToString(b[:])
}

// Timings are the leader-election durations.
type Timings struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

func (t Timings) orDefault() Timings {
	if t.LeaseDuration == 0 {
		t.LeaseDuration = DefaultLeaseDuration
	}
	if t.RenewDeadline == 0 {
		t.RenewDeadline = DefaultRenewDeadline
	}
	if t.RetryPeriod == 0 {
		t.RetryPeriod = DefaultRetryPeriod
	}
	return t
}

// Agent campaigns for one Lease and reports whether it holds it. It is a
// controller-runtime Runnable that runs on every manager (NeedLeaderElection false).
type Agent struct {
	// Client reaches the API server (Leases and, when missing, the namespace).
	Client kubernetes.Interface
	// Namespace holds the Leases.
	Namespace string
	// HostID is the host this agent speaks for; empty for the fleet coordinator.
	HostID string
	// Identity is this process's agent instance id (NewInstanceID).
	Identity string
	// Lease is the Lease's name: LeaseName(HostID), or CoordinatorLeaseName.
	Lease string
	// Timings are the election durations (zero: the defaults).
	Timings Timings

	held atomic.Bool
	mu   sync.Mutex
	subs []chan event.GenericEvent
}

// NewHost returns the agent of host hostID.
func NewHost(c kubernetes.Interface, namespace, hostID, identity string, t Timings) *Agent {
	return &Agent{Client: c, Namespace: namespace, HostID: hostID, Identity: identity, Lease: LeaseName(hostID), Timings: t}
}

// NewCoordinator returns the agent that campaigns to be the fleet coordinator.
func NewCoordinator(c kubernetes.Interface, namespace, identity string, t Timings) *Agent {
	return &Agent{Client: c, Namespace: namespace, Identity: identity, Lease: CoordinatorLeaseName, Timings: t}
}

// Held says whether this agent holds its Lease right now. A host agent writes its
// host's registrations and plans only while it does.
func (a *Agent) Held() bool { return a != nil && a.held.Load() }

// ID is the host id the agent speaks for.
func (a *Agent) ID() string { return a.HostID }

// Instance is the agent's instance id.
func (a *Agent) Instance() string { return a.Identity }

// Changes returns a channel that receives an event each time the agent gains or loses
// its Lease, for a controller to requeue what it left alone (source.Channel). Call it
// before the manager starts.
func (a *Agent) Changes() <-chan event.GenericEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan event.GenericEvent, 1)
	a.subs = append(a.subs, ch)
	return ch
}

func (a *Agent) set(held bool) {
	if a.held.Swap(held) == held {
		return
	}
	heldGauge.WithLabelValues(a.Lease).Set(boolFloat(held))
	transitions.WithLabelValues(a.Lease, map[bool]string{true: "acquired", false: "lost"}[held]).Inc()
	a.mu.Lock()
	defer a.mu.Unlock()
	ev := event.GenericEvent{Object: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: a.Lease, Namespace: a.Namespace}}}
	for _, ch := range a.subs {
		select { // a pending event already makes the controller look again
		case ch <- ev:
		default:
		}
	}
}

// NeedLeaderElection is false: every manager runs its agent, elected or not.
func (a *Agent) NeedLeaderElection() bool { return false }

// Start campaigns until ctx ends: it creates the namespace and the Lease (with the host
// id annotation) when missing, then runs client-go leader election on it, over and over,
// releasing the Lease when ctx ends.
func (a *Agent) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("Lease", a.Namespace+"/"+a.Lease, "agent", a.Identity)
	t := a.Timings.orDefault()
	for ctx.Err() == nil {
		if err := a.ensureLease(ctx); err != nil {
			logger.Error(err, "Preparing the coordination Lease; retrying")
			if !sleep(ctx, t.RetryPeriod) {
				break
			}
			continue
		}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Name: a.Lease, Namespace: a.Namespace},
				Client:     a.Client.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: a.Identity},
				Labels:     a.labels(),
			},
			LeaseDuration:   t.LeaseDuration,
			RenewDeadline:   t.RenewDeadline,
			RetryPeriod:     t.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            a.Lease,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					logger.Info("Holding the coordination Lease")
					a.set(true)
				},
				OnStoppedLeading: func() {
					logger.Info("No longer holding the coordination Lease")
					a.set(false)
				},
			},
		})
		if err != nil {
			return fmt.Errorf("host agent %s: %w", a.Lease, err)
		}
		le.Run(ctx) // returns when leadership is lost or ctx ends
		a.set(false)
	}
	return nil
}

func (a *Agent) labels() map[string]string {
	if a.HostID == "" {
		return map[string]string{LabelRole: RoleCoordinator}
	}
	return map[string]string{LabelRole: RoleHost}
}

// ensureLease creates the agent namespace and the Lease, annotated with the host id, if
// they do not exist yet; the election then only updates the Lease's spec.
func (a *Agent) ensureLease(ctx context.Context) error {
	if cur, err := a.Client.CoordinationV1().Leases(a.Namespace).Get(ctx, a.Lease, metav1.GetOptions{}); err == nil {
		if a.HostID == "" || cur.Annotations[AnnotationHostID] == a.HostID {
			return nil
		}
		// A Lease made without the annotation (by hand, or by another tool): the hosts'
		// listing ignores it until it names its host.
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[AnnotationHostID] = a.HostID
		_, err := a.Client.CoordinationV1().Leases(a.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.Namespace}}
	if _, err := a.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil &&
		!apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("creating the agent namespace %s: %w", a.Namespace, err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: a.Lease, Namespace: a.Namespace, Labels: a.labels()}}
	if a.HostID != "" {
		lease.Annotations = map[string]string{AnnotationHostID: a.HostID}
	}
	if _, err := a.Client.CoordinationV1().Leases(a.Namespace).Create(ctx, lease, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the coordination Lease: %w", err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
