package controllers

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WorkflowFenceName is the per-namespace Lease whose resourceVersion fences retirement
// against task claims. Every claim acquisition bumps it before taking its per-target lock,
// so a retirement apply can tell, with one read per row, that no claim was acquired
// since it started. (A List of TaskClaims per row would also do, but a fresh List waits
// for the API server's watch cache to catch up, about 100 ms each time.)
const WorkflowFenceName = "fleet-workflow-fence"

// BumpWorkflowFence moves the namespace's workflow fence. It is called before a claim
// takes its per-target lock; any successful write moves the fence, so concurrent bumps
// need no ordering.
func BumpWorkflowFence(ctx context.Context, c client.Client, reader client.Reader, namespace string) error {
	key := client.ObjectKey{Namespace: namespace, Name: WorkflowFenceName}
	for attempt := 0; attempt < 5; attempt++ {
		now := metav1.NewMicroTime(time.Now())
		fence := &coordinationv1.Lease{}
		err := reader.Get(ctx, key, fence)
		switch {
		case apierrors.IsNotFound(err):
			fence = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: WorkflowFenceName,
				Labels: map[string]string{"fleet.giteatools.dev/workflow-fence": "true"}},
				Spec: coordinationv1.LeaseSpec{RenewTime: &now}}
			err = c.Create(ctx, fence)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
		case err != nil:
			return fmt.Errorf("reading the workflow fence: %w", err)
		default:
			fence.Spec.RenewTime = &now
			err = c.Update(ctx, fence)
			if apierrors.IsConflict(err) {
				return nil // someone else moved it: moved is all that matters
			}
		}
		if err != nil {
			return fmt.Errorf("moving the workflow fence: %w", err)
		}
		return nil
	}
	return fmt.Errorf("moving the workflow fence: gave up after repeated create races")
}

// readWorkflowFence returns the fence's resourceVersion ("" when it does not exist yet).
// It is a single-object read, answered from etcd.
func readWorkflowFence(ctx context.Context, reader client.Reader, namespace string) (string, error) {
	fence := &coordinationv1.Lease{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: WorkflowFenceName}, fence)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the workflow fence: %w", err)
	}
	return fence.ResourceVersion, nil
}
