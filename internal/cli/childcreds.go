package cli

import (
	"context"
	"fmt"
	"os"
	osuser "os/user"
	"path/filepath"
	"strconv"
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
	// owner, when set, is the OS user the command runs as: it owns the folder and files.
	owner *osUser
}

// newChildCredentials makes the private folder the command's kubeconfig will be written
// to (the path goes into the command's environment before it starts), owned by owner when
// the command runs as another OS user.
func newChildCredentials(owner *osUser) (*childCredentials, error) {
	dir, err := os.MkdirTemp("", "kubectl-fleet-run-")
	if err != nil {
		return nil, err
	}
	cc := &childCredentials{dir: dir, owner: owner}
	if err := cc.own(dir); err != nil {
		cc.remove()
		return nil, err
	}
	return cc, nil
}

// own hands path to the command's OS user, when it has one of its own.
func (cc *childCredentials) own(path string) error {
	if cc.owner == nil {
		return nil
	}
	if err := os.Chown(path, int(cc.owner.uid), int(cc.owner.gid)); err != nil {
		return fmt.Errorf("handing %s to user %s: %w", path, cc.owner.name, err)
	}
	return nil
}

// osUser is the OS user a command runs as.
type osUser struct {
	name     string
	uid, gid uint32
	home     string
}

// lookupOSUser finds a user by name or numeric id.
func lookupOSUser(spec string) (*osUser, error) {
	u, err := osuser.Lookup(spec)
	if err != nil {
		if u, err = osuser.LookupId(spec); err != nil {
			return nil, usageErrorf("--as-user %s: no such user", spec)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, usageErrorf("--as-user %s: user ids %s:%s are not numbers", spec, u.Uid, u.Gid)
	}
	if os.Geteuid() != 0 {
		return nil, usageErrorf("--as-user %s: only a launcher running as root can start a command as another user", spec)
	}
	return &osUser{name: u.Username, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}, nil
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
	return cc.own(cc.kubeconfig())
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
	if err := cc.own(tmp); err != nil {
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
