package localcp

import (
	"context"
	"errors"
	"os"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestStartWithoutAssetsIsAClearError(t *testing.T) {
	if _, err := Start("", "../../config/crd/bases"); !errors.Is(err, ErrNoAssets) {
		t.Fatalf("want ErrNoAssets, got %v", err)
	}
	if _, err := Start(t.TempDir(), "../../config/crd/bases"); !errors.Is(err, ErrNoAssets) {
		t.Fatalf("want ErrNoAssets for a folder without kube-apiserver, got %v", err)
	}
}

func TestEmbeddedControlPlane(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`")
	}
	cp, err := Start(assets, "../../config/crd/bases", "../../config/rbac", "../../config/admission")
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = cp.Stop()
		}
	}()

	// The kubeconfig written for kubectl works on its own.
	kc, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	c, err := client.New(kc, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "taskclaims.fleet.giteatools.dev"}, crd); err != nil {
		t.Fatalf("CRD not installed: %v", err)
	}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := c.Get(ctx, client.ObjectKey{Name: "fleet-retirementplan-approval"}, vap); err != nil {
		t.Fatalf("admission policy not installed: %v", err)
	}
	role := &rbacv1.ClusterRole{}
	if err := c.Get(ctx, client.ObjectKey{Name: "fleet-retirement-approver"}, role); err != nil {
		t.Fatalf("approver role not installed: %v", err)
	}
	bindings := &rbacv1.ClusterRoleBindingList{}
	if err := c.List(ctx, bindings); err != nil {
		t.Fatal(err)
	}
	for _, b := range bindings.Items {
		if b.RoleRef.Name == "fleet-retirement-approver" {
			t.Fatalf("the approver role must ship unbound, found binding %s", b.Name)
		}
	}

	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if _, err := os.Stat(cp.KubeconfigPath); !os.IsNotExist(err) {
		t.Fatalf("kubeconfig folder not removed: %v", err)
	}
}
