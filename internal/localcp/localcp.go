//go:build !nolocalcp

// Package localcp starts an embedded, local Kubernetes control plane (kube-apiserver and
// etcd from the envtest binaries) so the manager can run on a machine with no cluster.
//
// It links controller-runtime's envtest, whose init writes below $TMPDIR. The images
// build the manager with the nolocalcp tag (localcp_off.go), so a manager in a pod, with
// its read-only root filesystem, carries none of it.
package localcp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/giteatools/fleet-controller/internal/manifests"
)

// ErrNoAssets is returned when no envtest binaries are available.
var ErrNoAssets = errors.New("no control-plane binaries: set KUBEBUILDER_ASSETS (run `make run`, which provides them through hack/envtest.sh)")

// ControlPlane is a running embedded control plane.
type ControlPlane struct {
	env *envtest.Environment
	// Config is the admin REST config of the control plane.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file kubectl can use.
	KubeconfigPath string
	dir            string
}

// Start starts kube-apiserver and etcd from assetsDir, installs the CRDs found in crdDir
// and the cluster-scoped objects (ClusterRoles, admission policies) of manifestDirs, and
// writes a kubeconfig file into a fresh temporary folder.
func Start(assetsDir, crdDir string, manifestDirs ...string) (*ControlPlane, error) {
	if assetsDir == "" {
		return nil, ErrNoAssets
	}
	if _, err := os.Stat(filepath.Join(assetsDir, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoAssets, err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assetsDir,
		CRDDirectoryPaths:     []string{crdDir},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting embedded control plane: %w", err)
	}
	dir, err := os.MkdirTemp("", "fleet-controller-")
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating kubeconfig folder: %w", err)
	}
	if err := installClusterScoped(cfg, manifestDirs); err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(cfg, path); err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &ControlPlane{env: env, Config: cfg, KubeconfigPath: path, dir: dir}, nil
}

// Stop stops the control plane and removes its temporary files.
func (c *ControlPlane) Stop() error {
	err := c.env.Stop()
	if rmErr := os.RemoveAll(c.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

// Install creates every object (namespaced ones too) of the YAML files in dirs, in
// file-name order: what a local run needs besides the project's manifests, such as the
// demo Gitea's gateway credentials.
func (c *ControlPlane) Install(dirs ...string) error {
	if len(dirs) == 0 {
		return nil
	}
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	return manifests.Create(context.Background(), cl, nil, dirs...)
}

// installClusterScoped creates every cluster-scoped object of the YAML files in dirs
// (namespaced objects belong to a deployment and are skipped).
func installClusterScoped(cfg *rest.Config, dirs []string) error {
	if len(dirs) == 0 {
		return nil
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	return manifests.Create(context.Background(), c, manifests.ClusterScoped(c), dirs...)
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["embedded"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["embedded"] = &clientcmdapi.Context{Cluster: "embedded", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "embedded"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
