// Command manager runs the fleet-controller: the WorkerRegistration, RetirementPlan and
// TaskClaim reconcilers. With no kubeconfig and no in-cluster configuration it starts an
// embedded local control plane first, so `make run` works on a bare machine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/localcp"
	"github.com/giteatools/fleet-controller/internal/managercache"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(fleetv1alpha1.AddToScheme(scheme))
}

// The field managers the manager's writes carry: the controllers', and the gateway's
// (its TokenReviews and any other write it makes).
const (
	fieldManager        = "fleet-controller"
	gatewayFieldManager = "fleet-gateway"
)

type options struct {
	metricsAddr    string
	probeAddr      string
	authzAddr      string
	gatewayAddr    string
	gatewayCreds   string
	gatewayCertDir string
	metricsSecure  bool
	leaderElect    bool
	namespaces     string
	hostIDFile     string
	hostID         string
	procRoot       string
	giteaURL       string
	giteaTokenFile string
	repository     string
	claimTTL       time.Duration
	concurrency    int
	maxOpenClaims  int
	sweepInterval  time.Duration
	retryMaxDelay  time.Duration
	crdDir         string
	manifestDirs   []string
	installDirs    []string
	embedded       string
	bannerEnvFile  string
	agentNamespace string
	agentTimings   hostagent.Timings
	takeover       time.Duration
	rowWrites      float64
	pageRows       int
}

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address the Prometheus metrics endpoint binds to (0 disables it).")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS, only to callers a TokenReview authenticates and a SubjectAccessReview allows to get /metrics; false serves plain HTTP.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the health and readiness probes bind to.")
	flag.StringVar(&o.authzAddr, "capability-bind-address", ":8082", "Address of the capability-check endpoint (POST /v1/authorize); empty disables it.")
	flag.StringVar(&o.gatewayAddr, "gateway-bind-address", ":8083", "Address of the gateway workers reach Gitea through (the server of each worker's bound repository); empty disables it.")
	flag.StringVar(&o.gatewayCertDir, "gateway-cert-dir", "", "Folder holding tls.crt and tls.key: the gateway then serves HTTPS (reloading rotated files). Without it the gateway serves plain HTTP, fit only for a loopback or an encrypted network, since workers send it their tokens.")
	flag.StringVar(&o.gatewayCreds, "gateway-credentials-namespace", "fleet-system", "Namespace of the Secrets holding each Gitea identity's gateway token (label "+gateway.LoginLabel+", and "+gateway.ServerLabel+" for a GiteaServer's).")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Enable leader election (one active manager per cluster or per node group).")
	flag.StringVar(&o.namespaces, "namespaces", "", "Comma-separated namespaces to watch; empty watches all.")
	flag.StringVar(&o.hostIDFile, "host-id-file", "/etc/machine-id", "File holding this host's machine id; liveness is only proven for rows of this host.")
	flag.StringVar(&o.hostID, "host-id", "", "This host's machine id (overrides --host-id-file).")
	flag.StringVar(&o.procRoot, "proc-root", "/", "Root under which proc/ and etc/ of the host are found (a node agent mounts the host here).")
	flag.StringVar(&o.giteaURL, "gitea-url", "", "Base URL of the Gitea server of --repository (for example http://127.0.0.1:3000). Empty: claims are decided, and the gateway serves, in GiteaRepository objects only.")
	flag.StringVar(&o.giteaTokenFile, "gitea-token-file", "", "File holding the Gitea API token of the controller's account. The token is never logged or written to status.")
	flag.StringVar(&o.repository, "repository", "", "Canonical owner/name repository on --gitea-url: the default binding of RetirementPlans, served to task claims of every namespace whose GiteaRepositories do not name it, and the repository the gateway serves. Other repositories are GiteaRepository objects.")
	flag.DurationVar(&o.claimTTL, "claim-ttl", 2*time.Hour, "Lifetime of an activated task capability.")
	flag.IntVar(&o.concurrency, "taskclaim-concurrency", taskclaim.DefaultConcurrency,
		"How many TaskClaims are reconciled at once. A claim mostly waits for Gitea and the API server, so claims made together overlap that wait; lower it to spare a small Gitea. The per-target Lease compare-and-swap keeps each target's claim exclusive at any value.")
	flag.IntVar(&o.maxOpenClaims, "max-open-claims-per-worker", claim.DefaultMaxOpenClaims,
		"How many of one worker's TaskClaims may be open (neither refused nor ended) at once; newer ones are refused (TC014, worker_claim_limit) before anything is read from Gitea. A worker holds one claim at a time, so this only bounds what a flood of claims costs.")
	flag.DurationVar(&o.sweepInterval, "claim-sweep-interval", taskclaim.DefaultSweepInterval, "How often Gitea records and claim locks left behind by deleted claims are swept.")
	flag.DurationVar(&o.retryMaxDelay, "claim-retry-max-delay", taskclaim.DefaultRetryMaxDelay, "Cap of the exponential backoff of failed claim reconciles (for example ending a record while Gitea is down).")
	flag.StringVar(&o.crdDir, "crd-dir", "config/crd/bases", "CRD manifests installed into the embedded control plane.")
	o.manifestDirs = []string{"config/rbac", "config/admission"}
	agentNS := os.Getenv("POD_NAMESPACE")
	if agentNS == "" {
		agentNS = "fleet-system"
	}
	flag.StringVar(&o.agentNamespace, "agent-namespace", agentNS, "Namespace of the hosts' coordination Leases (created if missing); default $POD_NAMESPACE, else fleet-system.")
	flag.DurationVar(&o.agentTimings.LeaseDuration, "agent-lease-duration", hostagent.DefaultLeaseDuration, "How long a host's coordination Lease is valid without renewal.")
	flag.DurationVar(&o.agentTimings.RenewDeadline, "agent-renew-deadline", hostagent.DefaultRenewDeadline, "How long the host agent keeps trying to renew before it stops acting for the host.")
	flag.DurationVar(&o.agentTimings.RetryPeriod, "agent-retry-period", hostagent.DefaultRetryPeriod, "How often the host agent tries to acquire or renew its Lease.")
	flag.DurationVar(&o.takeover, "apply-takeover-timeout", retirement.DefaultTakeoverTimeout,
		"How long a plan's apply may go without its applier renewing its hold before another manager takes it over and resumes it (or, where it cannot, completes the report from the rows).")
	flag.Float64Var(&o.rowWrites, "apply-row-writes-per-second", 0,
		"Pace the row writes of this manager's applies to at most this many a second, all applies together, to spare a busy API server; 0 writes as fast as it answers.")
	flag.IntVar(&o.pageRows, "plan-page-rows", retirement.PageMaxRows,
		fmt.Sprintf("Rows per RetirementPlanPage, 1 to %d: fewer rows make smaller objects and more of them.", retirement.PageMaxRows))
	flag.Func("install-manifests", "Folder of YAML manifests whose objects (namespaced ones too) are created in the embedded control plane after the project's own; repeatable. make run passes its local Gitea's gateway credentials here, and its GiteaServer and GiteaRepository.", func(dir string) error {
		o.installDirs = append(o.installDirs, dir)
		return nil
	})
	flag.StringVar(&o.embedded, "embedded", "auto", "Start an embedded control plane: auto (when no kubeconfig or in-cluster config exists), always, never.")
	// Production logging (JSON) by default; --zap-devel switches to development mode.
	zapOpts := zap.Options{Development: false}
	flag.StringVar(&o.bannerEnvFile, "banner-env-file", "", "File of `export` lines (and # comments) printed with the start-up block that says how to reach the controller; make run passes its local Gitea's here.")
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := run(o); err != nil {
		ctrl.Log.WithName("setup").Error(err, "Manager exited with an error")
		os.Exit(1)
	}
}

func run(o options) error {
	log := ctrl.Log.WithName("setup")
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	if o.claimTTL <= 0 {
		return fmt.Errorf("--claim-ttl must be positive, got %s", o.claimTTL)
	}
	if o.concurrency < 1 {
		return fmt.Errorf("--taskclaim-concurrency must be at least 1, got %d", o.concurrency)
	}
	if o.maxOpenClaims < 1 {
		return fmt.Errorf("--max-open-claims-per-worker must be at least 1, got %d", o.maxOpenClaims)
	}
	if o.pageRows < 1 || o.pageRows > retirement.PageMaxRows {
		return fmt.Errorf("--plan-page-rows must be between 1 and %d, got %d", retirement.PageMaxRows, o.pageRows)
	}
	if o.takeover < retirement.MinTakeoverTimeout {
		return fmt.Errorf("--apply-takeover-timeout must be at least %s, got %s", retirement.MinTakeoverTimeout, o.takeover)
	}
	rowWrites, err := rowWriteLimiter(o.rowWrites, o.takeover)
	if err != nil {
		return err
	}
	cfg, kubeconfig, stop, err := restConfig(o)
	if err != nil {
		return err
	}
	defer stop()
	if err := printBanner(os.Stdout, kubeconfig, o.bannerEnvFile, gatewayURL(o), metricsURL(o)); err != nil {
		return err
	}

	hostID := strings.TrimSpace(o.hostID)
	if hostID == "" {
		b, err := os.ReadFile(filepath.Join(o.procRoot, strings.TrimPrefix(o.hostIDFile, "/")))
		if err != nil {
			log.Error(err, "Cannot read the host id; rows will be preserved as host_binding_unproven", "file", o.hostIDFile)
		}
		hostID = strings.TrimSpace(string(b))
	}
	var giteaToken string
	if o.giteaTokenFile != "" {
		b, err := os.ReadFile(o.giteaTokenFile)
		if err != nil {
			return fmt.Errorf("reading --gitea-token-file: %w", err)
		}
		giteaToken = strings.TrimSpace(string(b))
	}

	var namespaces []string
	for _, ns := range strings.Split(o.namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			namespaces = append(namespaces, ns)
		}
	}
	if len(namespaces) > 0 {
		namespaces = append(namespaces, o.agentNamespace) // the hosts' Leases
	}
	cacheOpts := managercache.Options(namespaces)
	// Leases are cached unfiltered: the claim locks and the hosts' Leases carry different
	// labels, and a label selector cannot ask for either.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOpts,
		// managedFields name the controller, not the binary's file name.
		Client:                 client.Options{FieldOwner: fieldManager},
		Metrics:                metricsOptions(o),
		HealthProbeBindAddress: o.probeAddr,
		LeaderElection:         o.leaderElect,
		LeaderElectionID:       "fleet-controller.fleet.giteatools.dev",
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := setup(mgr, config{
		hostID:             hostID,
		procRoot:           o.procRoot,
		giteaURL:           o.giteaURL,
		giteaToken:         giteaToken,
		repository:         o.repository,
		claimTTL:           o.claimTTL,
		concurrency:        o.concurrency,
		maxOpenClaims:      o.maxOpenClaims,
		sweepInterval:      o.sweepInterval,
		retryMaxDelay:      o.retryMaxDelay,
		capabilityAddr:     o.authzAddr,
		gatewayAddr:        o.gatewayAddr,
		gatewayCredentials: o.gatewayCreds,
		gatewayCertDir:     o.gatewayCertDir,
		agentNamespace:     o.agentNamespace,
		agentTimings:       o.agentTimings,
		takeoverTimeout:    o.takeover,
		rowWrites:          rowWrites,
		pageRows:           o.pageRows,
	}); err != nil {
		return fmt.Errorf("setting up controllers: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	log.Info("Starting manager", "hostID", hostID, "repository", o.repository, "gitea", o.giteaURL != "")
	return mgr.Start(ctx)
}

// metricsOptions serves metrics the way current kubebuilder scaffolds do: HTTPS (a
// self-signed certificate unless one is mounted) behind controller-runtime's
// authentication and authorization filters.
func metricsOptions(o options) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if o.metricsSecure {
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}

// restConfig returns the cluster to run against: the usual kubeconfig / in-cluster lookup,
// or an embedded control plane when there is none (or when asked for), and then the
// path of the embedded control plane's kubeconfig.
func restConfig(o options) (*rest.Config, string, func(), error) {
	log := ctrl.Log.WithName("setup")
	useEmbedded := o.embedded == "always"
	if o.embedded == "auto" {
		useEmbedded = !clusterConfigured()
	}
	if !useEmbedded {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return nil, "", nil, fmt.Errorf("loading kubeconfig: %w", err)
		}
		if len(o.installDirs) > 0 {
			log.Info("Not installing --install-manifests: it applies to the embedded control plane only; apply them yourself", "dirs", o.installDirs)
		}
		return cfg, "", func() {}, nil
	}
	cp, err := localcp.Start(os.Getenv("KUBEBUILDER_ASSETS"), o.crdDir, o.manifestDirs...)
	if err != nil {
		return nil, "", nil, err
	}
	if err := cp.Install(o.installDirs...); err != nil {
		_ = cp.Stop()
		return nil, "", nil, err
	}
	log.Info("Embedded control plane is up; point kubectl at it with the lines below", "kubeconfig", cp.KubeconfigPath)
	return cp.Config, cp.KubeconfigPath, func() {
		if err := cp.Stop(); err != nil && !errors.Is(err, context.Canceled) {
			log.Error(err, "Stopping the embedded control plane")
		}
	}, nil
}

// gatewayURL is the URL a local worker reaches the gateway at, or "" when the gateway is
// off (no --gateway-bind-address, or no Gitea to forward to).
func gatewayURL(o options) string {
	if o.gatewayAddr == "" || o.giteaURL == "" || o.repository == "" {
		return ""
	}
	scheme := "http"
	if o.gatewayCertDir != "" {
		scheme = "https"
	}
	return localURL(scheme, o.gatewayAddr, "")
}

// metricsURL is the URL of the metrics endpoint for a local scraper, or "" when it is off.
func metricsURL(o options) string {
	if o.metricsAddr == "0" {
		return ""
	}
	scheme := "http"
	if o.metricsSecure {
		scheme = "https"
	}
	return localURL(scheme, o.metricsAddr, "/metrics")
}

// localURL is the URL of a listen address seen from this host: an address on every
// interface is reached at 127.0.0.1.
func localURL(scheme, addr, path string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + path
}

// printBanner prints, as one indented block to paste into a shell, what a user needs to
// reach this controller: the embedded control plane's KUBECONFIG, the lines of envFile
// (make run's local Gitea), and the gateway's and the metrics endpoint's URLs. It prints
// nothing when there is none.
func printBanner(w io.Writer, kubeconfig, envFile, gw, metrics string) error {
	var lines []string
	if kubeconfig != "" {
		lines = append(lines, "export KUBECONFIG="+kubeconfig)
	}
	if envFile != "" {
		b, err := os.ReadFile(envFile)
		if err != nil {
			return fmt.Errorf("reading --banner-env-file: %w", err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
	}
	if gw != "" {
		lines = append(lines, "export FLEET_GATEWAY_URL="+gw)
	}
	if metrics != "" && len(lines) > 0 {
		lines = append(lines, "export FLEET_METRICS_URL="+metrics)
	}
	if len(lines) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "\n    %s\n\n", strings.Join(lines, "\n    "))
	return err
}

func clusterConfigured() bool {
	if os.Getenv("KUBECONFIG") != "" || os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return true
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(home, ".kube", "config"))
	return err == nil
}

// rowWriteLimiter returns the pace of --apply-row-writes-per-second (nil for 0, no pace).
// An apply renews its hold between two rows, so a pace that leaves more than a third of
// the takeover timeout between rows could let the hold lapse under a live apply; it is
// refused.
func rowWriteLimiter(perSecond float64, takeover time.Duration) (*rate.Limiter, error) {
	switch {
	case perSecond == 0:
		return nil, nil
	case perSecond < 0 || math.IsNaN(perSecond) || math.IsInf(perSecond, 0):
		return nil, fmt.Errorf("--apply-row-writes-per-second must be 0 (no pace) or a positive number, got %g", perSecond)
	}
	if gap := time.Duration(float64(time.Second) / perSecond); gap > retirement.MaxRenewInterval(takeover) {
		if takeover <= 0 {
			takeover = retirement.DefaultTakeoverTimeout
		}
		return nil, fmt.Errorf("--apply-row-writes-per-second %g leaves %s between two rows, more than a third of --apply-takeover-timeout (%s): the apply's hold could lapse while it waits",
			perSecond, gap, takeover)
	}
	return rate.NewLimiter(rate.Limit(perSecond), 1), nil
}
