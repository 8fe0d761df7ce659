// Package fleet_test drives retirement across several hosts from outside the Go code, as
// an operator would: it starts envtest's kube-apiserver, builds the manager and
// kubectl-fleet, runs two manager processes with different --host-id against that API
// server (KUBECONFIG, no embedded control plane), real worker processes that heartbeat
// through `kubectl fleet run`, and then creates, reads and approves RetirementPlans with
// /usr/bin/kubectl only.
package fleet_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

func TestFleet(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Multi-host retirement from outside (manager processes, kubectl-fleet workers, kubectl)")
}

var (
	env        *testenv.Env
	k8sClient  client.WithWatch // cacheless; used to observe (watches) and to seed many rows
	ctx        context.Context
	cancel     context.CancelFunc
	root       string // the module root
	binDir     string // the built manager and kubectl-fleet
	kubeconfig string // the envtest administrator's kubeconfig
	tmp        string
)

var _ = BeforeSuite(func() {
	testenv.SetLogger(GinkgoWriter)
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	root, err = testenv.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	tmp = GinkgoT().TempDir()
	binDir = filepath.Join(tmp, "bin")

	By("building the manager and kubectl-fleet")
	for out, pkg := range map[string]string{"manager": "./cmd", "kubectl-fleet": "./cmd/kubectl-fleet"} {
		build := exec.Command("go", "build", "-o", filepath.Join(binDir, out), pkg)
		build.Dir = root
		b, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(b))
	}
	_, err = os.Stat(kubectlPath)
	Expect(err).NotTo(HaveOccurred(), "this suite drives the cluster with %s", kubectlPath)

	By("starting envtest's kube-apiserver and etcd, with the project's CRDs, RBAC and admission policy")
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient = env.Client
	Expect(env.InstallManifests(ctx)).To(Succeed())
	kubeconfig = writeKubeconfig()
	// The controller honours only approvals of plans made a little after the guarding
	// admission policy was last written.
	time.Sleep(retirement.ApprovalGuardSettle + time.Second)
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// writeKubeconfig writes the envtest administrator's kubeconfig, which the managers, the
// workers and kubectl all use.
func writeKubeconfig() string {
	GinkgoHelper()
	path := filepath.Join(tmp, "kubeconfig")
	Expect(env.WriteKubeconfig(path)).To(Succeed())
	return path
}
