package retirementplan_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/test/support/testworker"
)

// newNamespace creates a namespace of its own for one test: plans cover a namespace.
func newNamespace() string {
	GinkgoHelper()
	ns, err := env.NewNamespace(ctx, "fleet-test")
	Expect(err).NotTo(HaveOccurred())
	return ns
}

// startChild starts a real process that runs until the spec ends.
func startChild() *testworker.Process {
	GinkgoHelper()
	return testworker.Start()
}

// deadChild returns the pid and start time of a process that has exited.
func deadChild() *testworker.Process {
	GinkgoHelper()
	return testworker.Exited()
}

// register creates a registration for process c on this host, sets its heartbeat to
// heartbeatAge ago, and waits until the controller has classified it as want.
func register(ns, name string, c *testworker.Process, heartbeatAge time.Duration, want string, opts ...testworker.Option) *fleetv1alpha1.WorkerRegistration {
	GinkgoHelper()
	return fleet.Register(ctx, ns, name, c, heartbeatAge, want, opts...)
}

// heartbeat renews the registration's heartbeat (as the worker would), age ago.
func heartbeat(wr *fleetv1alpha1.WorkerRegistration, age time.Duration) {
	GinkgoHelper()
	fleet.Heartbeat(ctx, wr, age)
}

func get(wr *fleetv1alpha1.WorkerRegistration) *fleetv1alpha1.WorkerRegistration {
	GinkgoHelper()
	return fleet.Get(ctx, wr)
}
