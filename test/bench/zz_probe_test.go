package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

type opStats struct {
	mu sync.Mutex
	d  map[string]time.Duration
	n  map[string]int
}

func (s *opStats) add(op string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d[op] += time.Since(t)
	s.n[op]++
}

func (s *opStats) String() string {
	out := ""
	for k, v := range s.d {
		out += fmt.Sprintf("%s: n=%d total=%v avg=%v\n", k, s.n[k], v, v/time.Duration(s.n[k]))
	}
	return out
}

func instrument(c client.WithWatch) (client.WithWatch, *opStats) {
	s := &opStats{d: map[string]time.Duration{}, n: map[string]int{}}
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			defer s.add(fmt.Sprintf("get %T", obj), time.Now())
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			defer s.add(fmt.Sprintf("list %T", list), time.Now())
			return c.List(ctx, list, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			defer s.add(fmt.Sprintf("status update %T", obj), time.Now())
			return c.Status().Update(ctx, obj, opts...)
		},
	}), s
}
