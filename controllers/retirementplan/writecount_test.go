package retirementplan_test

import (
	"context"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Write verbs a writeCounter tells its predicate.
const (
	verbCreate       = "create"
	verbUpdate       = "update"
	verbPatch        = "patch"
	verbStatusUpdate = "status-update"
	verbStatusPatch  = "status-patch"
)

// writeCounter is a client that counts, in n, the writes made through it that counts
// accepts (by verb and object), and passes every call on.
type writeCounter struct {
	client.Client
	n      *atomic.Int64
	counts func(verb string, obj client.Object) bool
}

func (c writeCounter) count(verb string, obj client.Object) {
	if c.counts(verb, obj) {
		c.n.Add(1)
	}
}

func (c writeCounter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.count(verbCreate, obj)
	return c.Client.Create(ctx, obj, opts...)
}

func (c writeCounter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.count(verbUpdate, obj)
	return c.Client.Update(ctx, obj, opts...)
}

func (c writeCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.count(verbPatch, obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c writeCounter) Status() client.SubResourceWriter {
	return statusCounter{SubResourceWriter: c.Client.Status(), c: c}
}

type statusCounter struct {
	client.SubResourceWriter
	c writeCounter
}

func (w statusCounter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	w.c.count(verbStatusUpdate, obj)
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

func (w statusCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	w.c.count(verbStatusPatch, obj)
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}
