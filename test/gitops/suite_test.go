package gitops_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/giteatools/fleet-controller/test/support/testenv"
)

// The GitOps suite checks the ready-made Flux and Argo CD manifests in
// config/samples/gitops against a real kube-apiserver with the project's CRDs, RBAC and
// admission policies, and with Flux's and Argo CD's own CRDs, taken from their published
// Go modules.
var (
	env *testenv.Env
	ctx context.Context
)

func TestGitOpsSamples(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "GitOps samples suite (envtest)")
}

var _ = BeforeSuite(func() {
	testenv.SetLogger(GinkgoWriter)
	var cancel context.CancelFunc
	ctx, cancel = context.WithCancel(context.Background())
	DeferCleanup(cancel)
	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(env.Stop)
	Expect(env.InstallManifests(ctx)).To(Succeed())
})
