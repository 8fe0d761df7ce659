package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/managercache"
)

const (
	// cacheRows is how many registrations the memory benchmark caches.
	cacheRows = 5000
	// cacheGoalBytes is the goal for the manager's memory per cached registration.
	cacheGoalBytes = 2048
)

// BenchmarkRegistrationCacheMemory measures what one cached WorkerRegistration costs the
// manager: the heap an informer cache holds for cacheRows registrations, divided by
// cacheRows, with the manager's cache options (internal/managercache) and, as the
// same-run baseline, with controller-runtime's defaults. Each row is written the way a
// fleet writes it (created by its launcher, status written), so it carries the
// managedFields a real row carries.
func BenchmarkRegistrationCacheMemory(b *testing.B) {
	c := startEnv(b)
	ctx := context.Background()
	ns := newNamespace(ctx, b, "cache-mem")
	createEligibleRows(ctx, b, c, ns, cacheRows, []deadProcess{{pid: 4_000_000, startTime: 1}})

	measure := func(opts cache.Options) float64 {
		opts.Scheme = env.Scheme
		opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
		before := heapAfterGC()
		informers, err := cache.New(env.Config, opts)
		if err != nil {
			b.Fatal(err)
		}
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		if _, err := informers.GetInformer(cctx, &fleetv1alpha1.WorkerRegistration{}); err != nil {
			b.Fatal(err)
		}
		go func() { _ = informers.Start(cctx) }()
		syncCtx, cancel := context.WithTimeout(cctx, 2*time.Minute)
		defer cancel()
		if !informers.WaitForCacheSync(syncCtx) {
			b.Fatal("the cache did not sync")
		}
		var list fleetv1alpha1.WorkerRegistrationList
		if err := informers.List(cctx, &list); err != nil {
			b.Fatal(err)
		}
		if len(list.Items) != cacheRows {
			b.Fatalf("the cache holds %d registrations, want %d", len(list.Items), cacheRows)
		}
		list = fleetv1alpha1.WorkerRegistrationList{} // the copy List made is not the cache
		perRow := float64(heapAfterGC()-before) / cacheRows
		runtime.KeepAlive(informers)
		return perRow
	}

	var shipped, defaults float64
	for b.Loop() {
		defaults = measure(cache.Options{})
		shipped = measure(managercache.Options(nil))
	}
	b.ReportMetric(shipped, "B/registration")
	b.ReportMetric(defaults, "default-B/registration")
	b.ReportMetric(shipped/defaults, "shipped/default")
	verdict := "within"
	if shipped > cacheGoalBytes {
		verdict = "ABOVE"
	}
	fmt.Printf("bench cache: %d registrations cached: %.0f B/registration with the manager's options, %.0f B with defaults (ratio %.2f); %s the %d B goal\n",
		cacheRows, shipped, defaults, shipped/defaults, verdict, cacheGoalBytes)
}

// heapAfterGC returns the live heap after two collections (the second frees what the
// first only finalised).
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
