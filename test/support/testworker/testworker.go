// Package testworker gives Ginkgo suites real worker processes on this host and
// WorkerRegistrations that point at them, so the controllers' liveness probes see real
// /proc entries: a running child, or one that has exited. Only tests import it.
package testworker

import (
	"context"
	"os/exec"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// Process is a real child process and its start time.
type Process struct {
	PID       int64
	StartTime int64
	cmd       *exec.Cmd
}

// Start starts a child (sleep 600) that is killed when the spec ends.
func Start() *Process {
	ginkgo.GinkgoHelper()
	cmd := exec.Command("sleep", "600")
	gomega.Expect(cmd.Start()).To(gomega.Succeed())
	pid := int64(cmd.Process.Pid)
	st, err := liveness.ProcessStartTime("", pid)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	p := &Process{cmd: cmd, PID: pid, StartTime: st}
	ginkgo.DeferCleanup(p.Kill)
	return p
}

// Exited returns the pid and start time of a child that has exited.
func Exited() *Process {
	ginkgo.GinkgoHelper()
	p := Start()
	p.Kill()
	return p
}

// Kill kills and reaps the child (once).
func (p *Process) Kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// Option changes a registration before it is created.
type Option func(*fleetv1alpha1.WorkerRegistration)

// Fleet makes registrations through one client for processes of one host.
type Fleet struct {
	Client     client.Client
	Host       retirement.Host
	Repository string
}

// Registration is the registration name in ns for process p: trusted instance id, this
// host and boot, the fleet's repository, a 60 s heartbeat TTL.
func (f Fleet) Registration(ns, name string, p *Process, opts ...Option) *fleetv1alpha1.WorkerRegistration {
	st := p.StartTime
	wr := &fleetv1alpha1.WorkerRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1alpha1.WorkerRegistrationSpec{
			ClientInstanceID:    "inst-" + name,
			WorkerNamespace:     "slot-" + name,
			Identity:            "bot-" + name,
			Remote:              "origin",
			Repository:          f.Repository,
			HeartbeatTTLSeconds: 60,
			Process:             fleetv1alpha1.ProcessIdentity{HostID: f.Host.HostID, BootID: f.Host.BootID, PID: p.PID, StartTime: &st},
			GenerationID:        "gen-" + name,
			SessionID:           "sess-" + name,
		},
	}
	for _, o := range opts {
		o(wr)
	}
	return wr
}

// Register creates the registration of p, sets its heartbeat heartbeatAge ago, and
// waits until the WorkerRegistration controller has classified it as want.
func (f Fleet) Register(ctx context.Context, ns, name string, p *Process, heartbeatAge time.Duration, want string, opts ...Option) *fleetv1alpha1.WorkerRegistration {
	ginkgo.GinkgoHelper()
	wr := f.Registration(ns, name, p, opts...)
	gomega.Expect(f.Client.Create(ctx, wr)).To(gomega.Succeed())
	f.Heartbeat(ctx, wr, heartbeatAge)
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(f.Client.Get(ctx, client.ObjectKeyFromObject(wr), wr)).To(gomega.Succeed())
		g.Expect(wr.Status.ObservedGeneration).To(gomega.Equal(wr.Generation))
		g.Expect(wr.Status.Phase).To(gomega.Equal(fleetv1alpha1.PhaseActive))
		g.Expect(wr.Status.OwnershipState).To(gomega.Equal(want))
	}).Should(gomega.Succeed(), "registration %s/%s never became %s", ns, name, want)
	return wr
}

// Heartbeat renews the registration's heartbeat (as the worker would), age ago.
func (f Fleet) Heartbeat(ctx context.Context, wr *fleetv1alpha1.WorkerRegistration, age time.Duration) {
	ginkgo.GinkgoHelper()
	hb := metav1.NewTime(time.Now().Add(-age).Truncate(time.Second))
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(f.Client.Get(ctx, client.ObjectKeyFromObject(wr), wr)).To(gomega.Succeed())
		if old := wr.Status.LastHeartbeatAt; old != nil && !hb.After(old.Time) && age == 0 {
			hb = metav1.NewTime(old.Add(time.Second)) // a renewal always moves the stamp
		}
		wr.Status.LastHeartbeatAt = &hb
		g.Expect(f.Client.Status().Update(ctx, wr)).To(gomega.Succeed())
	}).Should(gomega.Succeed())
}

// Get reads the registration afresh.
func (f Fleet) Get(ctx context.Context, wr *fleetv1alpha1.WorkerRegistration) *fleetv1alpha1.WorkerRegistration {
	ginkgo.GinkgoHelper()
	out := &fleetv1alpha1.WorkerRegistration{}
	gomega.Expect(f.Client.Get(ctx, client.ObjectKeyFromObject(wr), out)).To(gomega.Succeed())
	return out
}
