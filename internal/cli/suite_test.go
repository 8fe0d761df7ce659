// The kubectl-fleet suite drives the commands as a user would, against a real
// kube-apiserver (envtest) with the project's CRDs, RBAC and admission policies, a real
// Gitea, and the manager's WorkerRegistration, RetirementPlan and TaskClaim reconcilers
// wired as cmd/setup.go wires them. Worker processes are real children of this binary.
package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/giteatools/fleet-controller/controllers/retirementplan"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/cli"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/reglist"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testfleet"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// testHostID stands in for /etc/machine-id; boot id and /proc are the machine's own.
const testHostID = "kubectl-fleet-test-host"

// gitopsUser applies approvals: bound to the (shipped unbound) approver role.
const gitopsUser = "gitops"

var (
	env        *testenv.Env
	k8s        client.WithWatch
	ctx        context.Context // the manager's; env.Stop cancels it
	kubeconfig string
	srv        *testgitea.Server
	repo       string
	ownerToken string
	suffix     string
)

// TestMain lets this binary double as the helper `kubectl fleet run` starts.
// asKubectlFleet makes this test binary run as kubectl-fleet (TestMain): a test starts it
// as an MCP host starts the plugin.
const asKubectlFleet = "FLEET_CLI_TEST_AS_KUBECTL_FLEET"

func TestMain(m *testing.M) {
	if code, ok := cli.RunExecShim(); ok {
		os.Exit(code)
	}
	if os.Getenv(asKubectlFleet) == "1" {
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func TestKubectlFleet(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl-fleet suite (envtest kube-apiserver + real Gitea)")
}

// giteaDown makes every Gitea request of the suite's controller fail.
var giteaDown atomic.Bool

// giteaSwitch is the controller's way to Gitea: refused while giteaDown is set.
type giteaSwitch struct{ base http.RoundTripper }

func (g giteaSwitch) RoundTrip(req *http.Request) (*http.Response, error) {
	if giteaDown.Load() {
		return nil, errors.New("gitea is down (test switch)")
	}
	base := g.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}

// selfBinary is a copy of this test binary in a folder every user may enter: run starts
// it as its helper, which becomes the worker's command, possibly as another OS user
// (go test builds into a folder only its user may enter).
var selfBinary string

func copySelf() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "fleet-cli-self-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, filepath.Base(self))
	return out, os.WriteFile(out, b, 0o755)
}

var _ = BeforeSuite(func() {
	var copyErr error
	selfBinary, copyErr = copySelf()
	Expect(copyErr).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = os.RemoveAll(filepath.Dir(selfBinary)) })
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)

	By("starting envtest with the CRDs, RBAC and admission policies")
	var err error
	env, ctx, err = testenv.StartSuite(GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	k8s = env.Client
	// gitopsUser, once the controller honours approvals of new plans.
	Expect(env.AllowApprovals(ctx, gitopsUser)).To(Succeed())
	kubeconfig = writeKubeconfig()

	By("starting Gitea")
	srv, err = testgitea.Start(ctx)
	DeferCleanup(stopGitea) // also stops a half-started server
	Expect(err).NotTo(HaveOccurred(), "the kubectl-fleet suite needs a real Gitea; it does not skip without one")
	suffix = testgitea.RandomHex(3)
	ownerToken, err = srv.CreateUser(ctx, "owner-"+suffix)
	Expect(err).NotTo(HaveOccurred())
	repo, err = srv.CreateRepo(ctx, ownerToken, "fleet-"+suffix)
	Expect(err).NotTo(HaveOccurred())

	By("starting the manager as cmd/setup.go wires it")
	facts, err := testenv.HostFacts(testHostID)
	Expect(err).NotTo(HaveOccurred())
	prober := &liveness.ProcProber{Facts: facts}
	mgr, err := env.NewManager(ctrl.Options{Controller: config.Controller{MaxConcurrentReconciles: 4}})
	Expect(err).NotTo(HaveOccurred())
	clk := clock.RealClock{}
	reviewer := authz.Reviewer{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}
	fence := workflowfence.Fence{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Clock: clk}
	// The controller reaches Gitea through a switch a spec can turn off, to see what the
	// CLI does while the controller cannot clear a record.
	gc, err := giteaclaim.New(srv.URL, srv.Token, giteaclaim.WithHTTPClient(&http.Client{
		Transport: giteaSwitch{base: srv.HTTP.Transport}, Timeout: srv.HTTP.Timeout}))
	Expect(err).NotTo(HaveOccurred())
	// This host's agent and the fleet coordinator, the WorkerRegistration and TaskClaim
	// reconcilers, as cmd/setup.go runs them: only the holder of a host's Lease writes its
	// rows' ownership and plans its rows.
	elections, err := testfleet.Wire(mgr, testfleet.Wiring{Host: facts, AgentNamespace: agentNamespace, Gitea: gc, Repository: repo})
	Expect(err).NotTo(HaveOccurred())
	registrations, err := reglist.New(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetScheme()) // as cmd/ wires it
	Expect(err).NotTo(HaveOccurred())
	deps := &retirementplan.Deps{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Registrations: registrations,
		Host:       retirement.Host{HostID: facts.HostID, BootID: facts.BootID, BootTime: facts.BootTime},
		Repository: repo, Approvers: reviewer, Fence: fence, Clock: clk,
		Recorder: mgr.GetEventRecorder("retirementplan-controller"),
	}
	hostPlans := &retirementplan.HostPlanReconciler{Deps: deps, Prober: prober, Reprober: prober, Agent: elections.Host,
		Coordinator: elections.Coordinator, AgentNamespace: agentNamespace}
	Expect(hostPlans.SetupWithManager(mgr)).To(Succeed())
	Expect((&retirementplan.FleetPlanReconciler{Deps: deps, Coordinator: elections.Coordinator,
		AgentNamespace: agentNamespace}).SetupWithManager(mgr)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(elections.Held, time.Minute).Should(BeTrue(), "the manager is its host's agent and the fleet coordinator")
})

// agentNamespace holds the hosts' coordination Leases in this suite.
const agentNamespace = "fleet-system"

// failures: the pull requests a spec left open are closed after it (testfleet.SpecHooks).
var failures = testfleet.SpecHooks(func() (*testgitea.Server, string) { return srv, repo })

var _ = AfterSuite(func() {
	Expect(env.Stop()).To(Succeed()) // also stops the manager
})

// stopGitea stops the suite's Gitea (keeping its run directory after failures).
func stopGitea() { testfleet.StopGitea(srv, failures.Any(), "kubectl-fleet") }

// writeKubeconfig writes the administrator's kubeconfig for the commands.
func writeKubeconfig() string {
	GinkgoHelper()
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(env.WriteKubeconfig(path)).To(Succeed())
	return path
}

// result is one command's outcome.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// fleetCmd runs `kubectl fleet args...` in namespace ns with the given environment.
func fleetCmd(ctx context.Context, ns string, environ map[string]string, args ...string) result {
	return fleetVia(ctx, kubeconfig, ns, environ, args...)
}

// fleetVia runs `kubectl fleet args...` with the given kubeconfig.
func fleetVia(ctx context.Context, kubeconfig, ns string, environ map[string]string, args ...string) result {
	return fleetPolling(ctx, kubeconfig, ns, environ, 100*time.Millisecond, args...)
}

// fleetPolling runs `kubectl fleet args...` whose waits re-read every poll when they
// cannot watch.
func fleetPolling(ctx context.Context, kubeconfig, ns string, environ map[string]string, poll time.Duration, args ...string) result {
	var out, errOut bytes.Buffer
	o := cli.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.Getenv = func(k string) string { return environ[k] }
	o.Poll = poll
	o.Self = selfBinary
	code := cli.Execute(ctx, o, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...))
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// fleet runs a command and expects exit code 0.
func fleet(ns string, args ...string) result {
	GinkgoHelper()
	r := fleetCmd(ctx, ns, nil, args...)
	Expect(r.code).To(Equal(cli.ExitOK), "kubectl fleet %s\n%s", strings.Join(args, " "), r)
	return r
}
