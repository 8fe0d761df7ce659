package cli_test

import (
	"os/exec"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/cli"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testfleet"
)

// child is a real process on this host.
type child struct {
	pid   int64
	start int64
	cmd   *exec.Cmd
}

// startChild starts `sleep 600`, killed when the spec ends.
func startChild() *child {
	GinkgoHelper()
	cmd := exec.Command("sleep", "600")
	Expect(cmd.Start()).To(Succeed())
	c := &child{pid: int64(cmd.Process.Pid), cmd: cmd}
	var err error
	c.start, err = liveness.ProcessStartTime("", c.pid)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.kill)
	return c
}

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	}
}

func newNamespace() string {
	GinkgoHelper()
	ns, err := env.NewNamespace(ctx, "cli")
	Expect(err).NotTo(HaveOccurred())
	return ns
}

// newLogin creates a Gitea account with write access to the repository.
func newLogin(prefix string) string {
	GinkgoHelper()
	login := testenv.Uniq(prefix) + "-" + suffix
	_, err := srv.CreateUser(ctx, login)
	Expect(err).NotTo(HaveOccurred())
	Expect(srv.AddCollaborator(ctx, repo, login)).To(Succeed())
	return login
}

// register registers process p as a worker acting as login and returns the name.
func register(ns, login string, p *child, extra ...string) string {
	GinkgoHelper()
	name := registerOnly(ns, login, p, extra...)
	waitOwnership(ns, name, fleetv1alpha1.OwnershipLive)
	return name
}

// registerOnly registers p without waiting for the controller (a row with a TTL of a
// second may be live too briefly to be seen so).
func registerOnly(ns, login string, p *child, extra ...string) string {
	GinkgoHelper()
	args := append([]string{"register", "--identity", login, "--repository", repo, "--host-id", testHostID,
		"--pid", strconv.FormatInt(p.pid, 10), "--ttl", "1h"}, extra...)
	r := fleet(ns, args...)
	name := strings.TrimSpace(r.stdout)
	Expect(name).NotTo(BeEmpty())
	return name
}

func getWR(ns, name string) *fleetv1alpha1.WorkerRegistration {
	GinkgoHelper()
	wr := &fleetv1alpha1.WorkerRegistration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wr)).To(Succeed())
	return wr
}

// waitLapsed waits until the registration is stale and its heartbeat has expired (a
// probe that shows the process gone makes it stale sooner; a plan also needs the expiry).
func waitLapsed(ns, name string) {
	GinkgoHelper()
	waitOwnership(ns, name, fleetv1alpha1.OwnershipStale)
	Eventually(func() bool {
		wr := getWR(ns, name)
		ttl := time.Duration(wr.Spec.HeartbeatTTLSeconds) * time.Second
		return wr.Status.LastHeartbeatAt != nil && time.Now().After(wr.Status.LastHeartbeatAt.Add(ttl))
	}).Should(BeTrue(), "the heartbeat of %s/%s never expired", ns, name)
}

func waitOwnership(ns, name, state string) {
	GinkgoHelper()
	Eventually(func() string { return getWR(ns, name).Status.OwnershipState }).Should(Equal(state), "registration %s/%s", ns, name)
}

// asWorker are the flags that make a command act as the worker's ServiceAccount.
func asWorker(ns, name string) []string {
	return []string{"--as", "system:serviceaccount:" + ns + ":" + name}
}

// workerEnv is what a worker's own commands see.
func workerEnv(name string) map[string]string {
	return map[string]string{cli.EnvWorker: name, cli.EnvGiteaURL: srv.URL, cli.EnvGiteaToken: srv.Token}
}

func claimsOf(ns string) []fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	list := &fleetv1alpha1.TaskClaimList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// newIssue opens an issue in the controller's repository as the repository owner.
func newIssue(title string) int64 {
	GinkgoHelper()
	return testfleet.NewIssue(ctx, srv, ownerToken, repo, title)
}
