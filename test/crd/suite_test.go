package crd_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/giteatools/fleet-controller/test/support/testenv"
)

// The CRD suite checks the assembled API: every schema and CEL rule of the CRDs against a
// real kube-apiserver, and what kubectl shows. Only the CRDs are installed (no RBAC, no
// admission policies, no controllers): what is refused here, the API server's schema
// refuses on its own.
var (
	env       *testenv.Env
	k8sClient client.Client
	ctx       context.Context
	cancel    context.CancelFunc
)

func TestCRDValidation(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CRD validation suite (envtest)")
}

var _ = BeforeSuite(func() {
	testenv.SetLogger(GinkgoWriter)
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient = env.Client
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	Expect(env.Stop()).To(Succeed())
})
