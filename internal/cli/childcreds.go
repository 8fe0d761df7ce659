package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// childTokenLifetime is how long the API token handed to a command lives; the launcher
// renews it at half its life, and client-go re-reads the token file, so the command never
// holds a stale one.
const childTokenLifetime = time.Hour

// credentialEnv are the launcher's variables that can carry its credentials (the
// kubeconfig it acts with, the Gitea token files of the demo and the test tooling): the
// command started by run never gets them.
var credentialEnv = []string{"KUBECONFIG", "FLEET_GITEA_TOKEN_FILE", "GITEA_TOKEN", "GITEA_ADMIN_PASSWORD", "GITEA_ADMIN_PASSWORD_FILE", "FLEET_DEMO_MANIFESTS"}

// childCredentials is the kubeconfig a command started by run acts with: the worker's own
// ServiceAccount (a token the launcher mints and renews), never the launcher's
// credentials, so the command can do what the fleet-worker role lets its worker do and
// nothing more.
type childCredentials struct {
	dir       string // private folder: kubeconfig and token
	expiresAt time.Time
}

// newChildCredentials makes the private folder the command's kubeconfig will be written
// to (the path goes into the command's environment before it starts).
func newChildCredentials() (*childCredentials, error) {
	dir, err := os.MkdirTemp("", "kubectl-fleet-run-")
	if err != nil {
		return nil, err
	}
	return &childCredentials{dir: dir}, nil
}

// write mints the first token of ServiceAccount ns/name and writes the kubeconfig that
// uses it against the launcher's API server (server, CA and TLS settings; not its
// credentials).
func (cc *childCredentials) write(ctx context.Context, c client.Client, cfg *rest.Config, ns, name string) error {
	if err := cc.renew(ctx, c, ns, name); err != nil {
		return err
	}
	cluster := clientcmdapi.NewCluster()
	cluster.Server = cfg.Host + cfg.APIPath
	cluster.CertificateAuthority, cluster.CertificateAuthorityData = cfg.CAFile, cfg.CAData
	cluster.TLSServerName, cluster.InsecureSkipTLSVerify = cfg.ServerName, cfg.Insecure
	user := clientcmdapi.NewAuthInfo()
	user.TokenFile = cc.tokenPath()
	kctx := clientcmdapi.NewContext()
	kctx.Cluster, kctx.AuthInfo, kctx.Namespace = "fleet", name, ns
	kc := clientcmdapi.NewConfig()
	kc.Clusters["fleet"], kc.AuthInfos[name], kc.Contexts[name] = cluster, user, kctx
	kc.CurrentContext = name
	if err := clientcmd.WriteToFile(*kc, cc.kubeconfig()); err != nil {
		return fmt.Errorf("writing the command's kubeconfig: %w", err)
	}
	return nil
}

func (cc *childCredentials) kubeconfig() string { return filepath.Join(cc.dir, "kubeconfig") }
func (cc *childCredentials) tokenPath() string  { return filepath.Join(cc.dir, "token") }

// renew mints a new API token for the ServiceAccount and replaces the token file.
func (cc *childCredentials) renew(ctx context.Context, c client.Client, ns, name string) error {
	tr, err := serviceAccountToken(ctx, c, ns, name, childTokenLifetime)
	if err != nil {
		return fmt.Errorf("the command's own credentials: %w", err)
	}
	tmp := cc.tokenPath() + ".new"
	if err := os.WriteFile(tmp, []byte(tr.Status.Token), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, cc.tokenPath()); err != nil {
		return err
	}
	cc.expiresAt = tr.Status.ExpirationTimestamp.Time
	return nil
}

// due reports whether the token is past half its life.
func (cc *childCredentials) due(now time.Time) bool {
	return !now.Before(cc.expiresAt.Add(-childTokenLifetime / 2))
}

func (cc *childCredentials) remove() { _ = os.RemoveAll(cc.dir) }
