// Package workflowfence keeps the per-namespace workflow fence: a Lease whose
// resourceVersion moves every time a task claim is acquired. A retirement apply reads it
// before its authoritative read and again before every row it writes, so one single-object
// read per row tells it that no claim was acquired meanwhile. (A List of TaskClaims per row
// would answer too, but a fresh List waits for the API server's watch cache, about 100 ms.)
package workflowfence

import (
	"context"
	"encoding/json"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// Name is the Lease that fences retirement against task claims in each namespace.
const Name = "fleet-workflow-fence"

// Label marks the fence Lease.
const Label = fleetv1alpha1.WorkflowFenceLabel

// Fence moves and reads the workflow fence.
type Fence struct {
	Client client.Client
	// Reader reads straight from the API server (never a cache).
	Reader client.Reader
	Clock  clock.PassiveClock
}

// Bump moves the namespace's fence. A claim calls it before it takes its per-target lock;
// any successful write moves the fence, so concurrent bumps need no ordering, and one
// unconditional patch of the renew time is the whole move (the fence is created the first
// time).
func (f Fence) Bump(ctx context.Context, namespace string) error {
	for range 5 {
		now := metav1.NewMicroTime(f.Clock.Now())
		fence := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name}}
		move, err := json.Marshal(map[string]any{"spec": map[string]any{"renewTime": now}})
		if err != nil {
			return fmt.Errorf("moving the workflow fence: %w", err)
		}
		err = f.Client.Patch(ctx, fence, client.RawPatch(types.MergePatchType, move))
		if apierrors.IsNotFound(err) {
			fence = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name, Labels: map[string]string{Label: "true"}},
				Spec:       coordinationv1.LeaseSpec{RenewTime: &now},
			}
			err = f.Client.Create(ctx, fence)
			if apierrors.IsAlreadyExists(err) {
				continue // created meanwhile: patch it
			}
		}
		if err != nil {
			return fmt.Errorf("moving the workflow fence: %w", err)
		}
		return nil
	}
	return fmt.Errorf("moving the workflow fence: gave up after repeated create races")
}

// Read returns the fence's resourceVersion ("" when it does not exist yet). It is a
// single-object read, answered from etcd.
func (f Fence) Read(ctx context.Context, namespace string) (string, error) {
	fence := &coordinationv1.Lease{}
	err := f.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: Name}, fence)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the workflow fence: %w", err)
	}
	return fence.ResourceVersion, nil
}

// Moved re-reads the fence and compares it with the version an apply started from. An
// unreadable fence counts as moved: unreadable never equals unchanged.
func (f Fence) Moved(ctx context.Context, namespace, since string) (bool, error) {
	now, err := f.Read(ctx, namespace)
	if err != nil {
		return true, err
	}
	return now != since, nil
}
