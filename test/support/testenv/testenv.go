// Package testenv is the one envtest bootstrap of the project's suites: a real
// kube-apiserver and etcd with the project's CRDs, a scheme with the client-go and fleet
// types, a cacheless client, the project's RBAC and admission manifests, impersonated
// clients, a discard event recorder, unique names and namespaces, this host's facts for
// the liveness probes, and how Ready and Stalled read.
//
// It returns errors rather than failing, so Ginkgo suites (Expect(err)...) and Go
// benchmarks (b.Fatal) use it alike. Only tests import it.
package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/manifests"
)

// modulePath is the module whose root holds config/.
const modulePath = "github.com/giteatools/fleet-controller"

// Env is a running control plane.
type Env struct {
	// Environment is the envtest environment (its ControlPlane gives kubectl).
	Environment *envtest.Environment
	// Config reaches the API server as its administrator.
	Config *rest.Config
	// Scheme knows the client-go and fleet types.
	Scheme *runtime.Scheme
	// Client is a cacheless administrator client: what it reads is what the API server holds.
	Client client.WithWatch

	// cancel ends the context StartSuite gave the suite's managers (Stop calls it).
	cancel context.CancelFunc
}

// Start starts kube-apiserver and etcd (KUBEBUILDER_ASSETS names their folder) with the
// project's CRDs installed. Call Stop when done, also after an error.
func Start() (*Env, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	e := &Env{Scheme: scheme, Environment: &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}}
	if e.Config, err = e.Environment.Start(); err != nil {
		return e, fmt.Errorf("starting envtest (KUBEBUILDER_ASSETS=%q; hack/envtest.sh prints the folder): %w",
			os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	if e.Client, err = client.NewWithWatch(e.Config, client.Options{Scheme: scheme}); err != nil {
		return e, err
	}
	return e, nil
}

// Stop stops the control plane, also one that started only in part. For an Env of
// StartSuite it first cancels the suite's context, so the managers stop before the API
// server does.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	if e.cancel != nil {
		e.cancel()
	}
	if e.Environment == nil {
		return nil
	}
	return e.Environment.Stop()
}

// InstallManifests creates the cluster-wide objects of config/rbac and config/admission
// (ClusterRoles, admission policies and their bindings) exactly as a cluster gets them.
// The deployment's own namespaced objects (ServiceAccount, Role, RoleBinding of
// fleet-system) are left out: no controller Pod runs here.
func (e *Env) InstallManifests(ctx context.Context) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	return manifests.Create(ctx, e.Client, notDeployment,
		filepath.Join(root, "config", "admission"), filepath.Join(root, "config", "rbac"))
}

func notDeployment(u *unstructured.Unstructured) (bool, error) {
	switch u.GetKind() {
	case "ServiceAccount", "RoleBinding", "Role":
		return false, nil
	}
	return true, nil
}

// Impersonate returns a cacheless client that acts as user, member of groups.
func (e *Env) Impersonate(user string, groups ...string) (client.Client, error) {
	c := rest.CopyConfig(e.Config)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return client.New(c, client.Options{Scheme: e.Scheme})
}

// ServiceAccount is the user name and the groups the API server gives ServiceAccount
// name of namespace ns, for Impersonate.
func ServiceAccount(ns, name string) (user string, groups []string) {
	return "system:serviceaccount:" + ns + ":" + name,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

// NewNamespace creates a namespace named Uniq(prefix) and returns its name.
func (e *Env) NewNamespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Uniq(prefix)}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("creating namespace %s: %w", ns.Name, err)
	}
	return ns.Name, nil
}

// CreateNamespaces creates the namespaces named names.
func (e *Env) CreateNamespaces(ctx context.Context, names ...string) error {
	for _, name := range names {
		if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return nil
}

// NewScheme returns a scheme with the client-go and fleet types.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := fleetv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// HostFacts reads this machine's boot id and /proc, with hostID standing in for
// /etc/machine-id (so a suite does not depend on the machine having one).
func HostFacts(hostID string) (liveness.HostFacts, error) {
	facts, _ := liveness.ReadHostFacts("")
	if facts.BootID == "" {
		return facts, errors.New("this machine has no /proc/sys/kernel/random/boot_id")
	}
	facts.HostID = hostID
	return facts, nil
}

// SetLogger sends controller-runtime's log to w (GinkgoWriter, or io.Discard).
func SetLogger(w io.Writer) {
	logf.SetLogger(zap.New(zap.WriteTo(w), zap.UseDevMode(true)))
}

var seq atomic.Int64

// Uniq returns prefix-N with N unique in this process.
func Uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// Discard is an events.EventRecorder that drops every event, for reconcilers driven by hand.
var Discard events.EventRecorder = discard{}

type discard struct{}

func (discard) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

// Readiness is how an object's Ready and Stalled conditions read: each "True", "False",
// or "" when absent, and Ready's reason. Compare it whole, so a test states both.
type Readiness struct {
	Ready, Stalled string
	Reason         string
}

// ReadinessOf reads Ready and Stalled from conds.
func ReadinessOf(conds []metav1.Condition) Readiness {
	var r Readiness
	if c := meta.FindStatusCondition(conds, fleetv1alpha1.ReadyCondition); c != nil {
		r.Ready, r.Reason = string(c.Status), c.Reason
	}
	if c := meta.FindStatusCondition(conds, fleetv1alpha1.StalledCondition); c != nil {
		r.Stalled = string(c.Status)
	}
	return r
}

// ModuleRoot is the folder of this module's go.mod, found by walking up from the working
// directory (a test runs in its package folder, always inside the module).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if ok, err := isModuleRoot(dir); err != nil {
			return "", err
		} else if ok {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

func isModuleRoot(dir string) (bool, error) {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if mod, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(mod), `"`) == modulePath, nil
		}
	}
	return false, sc.Err()
}

// AgentTimings are host-election durations for suites: renewal every second, so a
// stopped agent's standby takes over within seconds.
var AgentTimings = hostagent.Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: time.Second}

// NewManager returns a controller-runtime manager on this control plane. Unset options
// take the suites' defaults: this Env's scheme and no metrics or probe listener.
func (e *Env) NewManager(o ctrl.Options) (manager.Manager, error) {
	if o.Scheme == nil {
		o.Scheme = e.Scheme
	}
	if o.Metrics.BindAddress == "" {
		o.Metrics.BindAddress = "0"
	}
	if o.HealthProbeBindAddress == "" {
		o.HealthProbeBindAddress = "0"
	}
	return ctrl.NewManager(e.Config, o)
}

// WriteKubeconfig writes a kubeconfig for this control plane's administrator to path, for
// the processes a suite runs (managers, kubectl, kubectl-fleet).
func (e *Env) WriteKubeconfig(path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.Config.CertData, ClientKeyData: e.Config.KeyData, Token: e.Config.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

// DurationFromEnv is the duration the environment variable name holds (Go syntax, e.g.
// "5m"), or def when it is unset, invalid or not positive: how a long run (make stress)
// stretches a spec's waits without changing the suite.
func DurationFromEnv(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// Kubectl is kubectl as a new cluster administrator (group system:masters) of e: the
// binary in KUBEBUILDER_ASSETS, else the one on PATH. The function runs it with args and
// returns what it printed.
func (e *Env) Kubectl() (func(args ...string) (stdout, stderr string, err error), error) {
	admin, err := e.Environment.AddUser(envtest.User{Name: Uniq("kubectl-admin"), Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	kubectl, err := admin.Kubectl()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(kubectl.Path); kubectl.Path == "" || err != nil {
		if kubectl.Path, err = exec.LookPath("kubectl"); err != nil {
			return nil, fmt.Errorf("kubectl is needed: in KUBEBUILDER_ASSETS or on PATH: %w", err)
		}
	}
	return func(args ...string) (string, string, error) {
		out, errOut, err := kubectl.Run(args...)
		return readAll(out), readAll(errOut), err
	}, nil
}

func readAll(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}
