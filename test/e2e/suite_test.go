//go:build e2e

// Package e2e_test runs fleet-controller as shipped on a real Kubernetes: the
// DaemonSet of config/default, with the images hack/images.sh builds, on the two nodes
// of hack/cluster.sh (kubelet, containerd, runc), against the Gitea hack/e2e.sh starts.
// It looks at the deployment from outside, as an operator would: kubectl, the API
// server, and the endpoints the pods serve. hack/e2e.sh (make test-e2e) prepares all of
// it and runs this suite with the e2e build tag; KUBECONFIG names the cluster.
package e2e_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// namespace is where config/default installs the manager.
const namespace = "fleet-system"

var (
	ctx    context.Context
	cancel context.CancelFunc
	cfg    *rest.Config
	cs     *kubernetes.Clientset
	k8s    client.Client
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "fleet-controller on a real cluster (kubelet, containerd, the shipped manifests)")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(3 * time.Minute)
	SetDefaultEventuallyPollingInterval(time.Second)
	ctx, cancel = context.WithCancel(context.Background())
	Expect(os.Getenv("KUBECONFIG")).NotTo(BeEmpty(), "run through hack/e2e.sh (make test-e2e), which brings the cluster up")
	var err error
	cfg, err = clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS, cfg.Burst = 200, 400 // seeding a thousand rows, not client-side throttling
	cs, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(fleetv1alpha1.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
})
