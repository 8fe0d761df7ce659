package reglist_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/reglist"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "reglist: KUBEBUILDER_ASSETS is not set (hack/envtest.sh prints it); these tests need envtest")
		os.Exit(1)
	}
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func registration(ns, name string) *fleetv1alpha1.WorkerRegistration {
	return &fleetv1alpha1.WorkerRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1alpha1.WorkerRegistrationSpec{ClientInstanceID: "inst-" + name, WorkerNamespace: "slot-" + name,
			Identity: "bot-" + name, Remote: "origin", Repository: "acme/widgets", HeartbeatTTLSeconds: 60,
			Process: fleetv1alpha1.ProcessIdentity{HostID: "host-a", BootID: "boot-a", PID: 4242}},
	}
}

// hook runs before each request the lister makes for worker registrations.
type hook struct {
	base   http.RoundTripper
	before func(n int64, req *http.Request) error
	n      atomic.Int64
}

func (h *hook) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/workerregistrations") {
		if err := h.before(h.n.Add(1), req); err != nil {
			return nil, err
		}
	}
	return h.base.RoundTrip(req)
}

func newLister(t *testing.T, chunk int64, before func(n int64, req *http.Request) error) (*reglist.Lister, *hook) {
	t.Helper()
	base, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	h := &hook{base: base.Transport, before: before}
	l, err := reglist.New(env.Config, &http.Client{Transport: h}, env.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	l.Chunk = chunk
	return l, h
}

// namespaceWithRows is a new namespace holding n registrations, w-00 on.
func namespaceWithRows(t *testing.T, n int) string {
	t.Helper()
	ctx := context.Background()
	ns, err := env.NewNamespace(ctx, "reglist")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := env.Client.Create(ctx, registration(ns, fmt.Sprintf("w-%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

func names(items []fleetv1alpha1.WorkerRegistration) []string {
	var out []string
	for _, wr := range items {
		out = append(out, wr.Name)
	}
	slices.Sort(out)
	return out
}

func TestListReadsEveryChunkAsOneView(t *testing.T) {
	ctx := context.Background()
	ns := namespaceWithRows(t, 23)
	want := &fleetv1alpha1.WorkerRegistrationList{}
	if err := env.Client.List(ctx, want, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}

	// A row created after the first chunk was read sorts last, so it would be in the last
	// chunk if the chunks were not all read at the first one's resourceVersion.
	l, h := newLister(t, 5, func(n int64, req *http.Request) error {
		if n == 2 {
			return env.Client.Create(req.Context(), registration(ns, "z-late"))
		}
		return nil
	})
	got, err := l.List(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if h.n.Load() != 5 {
		t.Errorf("%d requests for 23 rows in chunks of 5, want 5", h.n.Load())
	}
	if !slices.Equal(names(got), names(want.Items)) {
		t.Errorf("listed %v, want %v (the row created mid-list must not appear)", names(got), names(want.Items))
	}
	for _, wr := range got {
		if wr.ManagedFields != nil {
			t.Errorf("%s keeps its managedFields", wr.Name)
		}
		if wr.Spec.Identity != "bot-"+wr.Name || wr.Spec.Process.PID != 4242 || wr.ResourceVersion == "" {
			t.Errorf("%s is not decoded in full: %+v", wr.Name, wr)
		}
	}
	again, err := l.List(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names(again), "z-late") || len(again) != 24 {
		t.Errorf("a new list does not see the late row: %v", names(again))
	}
}

func TestListAtReadsTheViewOfAnExactResourceVersion(t *testing.T) {
	ctx := context.Background()
	ns := namespaceWithRows(t, 12)
	l, _ := newLister(t, 5, func(int64, *http.Request) error { return nil })
	before, rv, err := l.ListAt(ctx, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	if rv == "" || len(before) != 12 {
		t.Fatalf("the newest view has resourceVersion %q and %d rows, want one and 12", rv, len(before))
	}
	if err := env.Client.Create(ctx, registration(ns, "z-late")); err != nil {
		t.Fatal(err)
	}
	// Read again at the first view's resourceVersion, in three chunks: the late row is
	// not in it, and every chunk reports the same view.
	at, atRV, err := l.ListAt(ctx, ns, rv)
	if err != nil {
		t.Fatal(err)
	}
	if atRV != rv || !slices.Equal(names(at), names(before)) {
		t.Errorf("at %s: view %s with %v, want %v", rv, atRV, names(at), names(before))
	}
	now, nowRV, err := l.ListAt(ctx, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	if nowRV == rv || len(now) != 13 {
		t.Errorf("the newest view is %s with %d rows, want a later one with 13", nowRV, len(now))
	}
}

func TestListFailsWholeWhenAChunkFails(t *testing.T) {
	ctx := context.Background()
	ns := namespaceWithRows(t, 12)
	broken := errors.New("connection reset")
	l, _ := newLister(t, 5, func(n int64, _ *http.Request) error {
		if n == 3 {
			return broken
		}
		return nil
	})
	got, err := l.List(ctx, ns)
	if err == nil || !errors.Is(err, broken) && !strings.Contains(err.Error(), broken.Error()) {
		t.Fatalf("a failed last chunk gave %d rows and error %v, want an error and no rows", len(got), err)
	}
	if got != nil {
		t.Errorf("a failed list returned %d rows", len(got))
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if got, err := l.List(canceled, ns); err == nil || got != nil {
		t.Errorf("a canceled list gave %d rows and error %v", len(got), err)
	}
}
