package main

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/giteatools/fleet-controller/controllers/gitearepository"
	"github.com/giteatools/fleet-controller/controllers/giteaserver"
	"github.com/giteatools/fleet-controller/controllers/retirementplan"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/controllers/workerregistration"
	"github.com/giteatools/fleet-controller/internal/authz"
	"github.com/giteatools/fleet-controller/internal/capability"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/internal/hostagent"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/nudge"
	"github.com/giteatools/fleet-controller/internal/reglist"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/internal/workflowfence"
)

// config is what the reconcilers are wired with.
type config struct {
	// hostID is the machine id of the host this manager runs on ("" = read it from procRoot).
	hostID string
	// procRoot is where the host's /proc and /etc are mounted ("/" locally).
	procRoot string
	// giteaURL and giteaToken reach the Gitea server of repository, the flags' repository
	// (claims in GiteaRepositories need neither).
	giteaURL, giteaToken string
	// repository is the canonical owner/name repository of the fleet.
	repository string
	// claimTTL is the lifetime of an activated capability.
	claimTTL time.Duration
	// concurrency is how many TaskClaims are reconciled at once.
	concurrency int
	// maxOpenClaims is how many of one worker's claims may be open at once.
	maxOpenClaims int
	// sweepInterval is how often orphaned claim records and locks are swept.
	sweepInterval time.Duration
	// retryMaxDelay caps the backoff of failed claim reconciles.
	retryMaxDelay time.Duration
	// capabilityAddr is where the capability-check endpoint listens ("" disables it).
	capabilityAddr string
	// gatewayAddr is where the gateway listens ("" disables it); gatewayCredentials is the
	// namespace of the per-identity Gitea token Secrets.
	gatewayAddr, gatewayCredentials string
	// gatewayCertDir holds the gateway's serving certificate ("" serves plain HTTP).
	gatewayCertDir string
	// agentNamespace holds the hosts' coordination Leases.
	agentNamespace string
	// agentTimings are the host election's durations.
	agentTimings hostagent.Timings
	// takeoverTimeout is how long an apply's hold lasts without renewal.
	takeoverTimeout time.Duration
	// rowWrites paces each apply's row writes (nil: unpaced).
	rowWrites *rate.Limiter
	// pageRows caps the rows of one RetirementPlanPage (zero: retirement.PageMaxRows).
	pageRows int
}

// setup registers every reconciler and endpoint of the project with the manager.
func setup(mgr ctrl.Manager, cfg config) error {
	log := ctrl.Log.WithName("setup")
	prober, err := liveness.NewProcProber(cfg.procRoot)
	if err != nil {
		// Partial facts are still usable: the prober answers unknown where a fact is missing.
		log.Error(err, "Host facts are incomplete; affected rows will be preserved")
	}
	if prober == nil {
		prober = &liveness.ProcProber{Root: cfg.procRoot}
	}
	if cfg.hostID != "" {
		prober.Facts.HostID = cfg.hostID
	}
	clk := clock.RealClock{}
	reviewer := authz.Reviewer{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}
	fence := workflowfence.Fence{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Clock: clk}

	// Every manager is its host's agent candidate and a fleet coordinator candidate; the
	// Leases elect one of each, whatever --leader-elect says.
	elections, err := hostagent.Campaign(mgr, cfg.agentNamespace, prober.Facts.HostID, cfg.agentTimings)
	if err != nil {
		return err
	}
	coordinator := elections.Coordinator
	var wrAgent workerregistration.HostAgent
	var rpAgent retirementplan.HostAgent
	if agent := elections.Host; agent != nil {
		wrAgent, rpAgent = agent, agent
		log.Info("Campaigning for this host", "hostID", agent.HostID, "agent", elections.Instance, "Lease", cfg.agentNamespace+"/"+agent.Lease)
	} else {
		log.Info("No host id: this manager is no host's agent, its rows are preserved as host_binding_unproven", "agent", elections.Instance)
	}

	if err := (&workerregistration.Reconciler{
		Client:         mgr.GetClient(),
		Prober:         prober,
		Clock:          clk,
		Recorder:       mgr.GetEventRecorder("workerregistration-controller"),
		Agent:          wrAgent,
		Coordinator:    coordinator,
		AgentNamespace: cfg.agentNamespace,
		Repository:     cfg.repository,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("workerregistration controller: %w", err)
	}
	// The Gitea servers and repositories the fleet works on: their Ready conditions. Their
	// tokens are read from the controller's own namespace.
	dialer := &giteaserver.Dialer{Reader: mgr.GetAPIReader(), Namespace: cfg.agentNamespace}
	if err := (&giteaserver.Reconciler{
		Client:      mgr.GetClient(),
		Dialer:      dialer,
		Recorder:    mgr.GetEventRecorder("giteaserver-controller"),
		Coordinator: coordinator,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("giteaserver controller: %w", err)
	}
	if err := (&gitearepository.Reconciler{
		Client:               mgr.GetClient(),
		Dialer:               dialer,
		Recorder:             mgr.GetEventRecorder("gitearepository-controller"),
		Coordinator:          coordinator,
		CredentialsNamespace: cfg.gatewayCredentials,
	}).SetupWithManager(context.Background(), mgr); err != nil {
		return fmt.Errorf("gitearepository controller: %w", err)
	}
	registrations, err := reglist.New(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetScheme())
	if err != nil {
		return err
	}
	deps := &retirementplan.Deps{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Registrations: registrations,
		Host:          retirement.Host{HostID: prober.Facts.HostID, BootID: prober.Facts.BootID, BootTime: prober.Facts.BootTime},
		Repository:    cfg.repository,
		Approvers:     reviewer,
		Fence:         fence,
		Clock:         clk,
		Recorder:      mgr.GetEventRecorder("retirementplan-controller"),
		PageRows:      cfg.pageRows,
	}
	hostPlans := &retirementplan.HostPlanReconciler{
		Deps:           deps,
		Prober:         prober,
		Reprober:       prober,
		Agent:          rpAgent,
		Coordinator:    coordinator,
		AgentNamespace: cfg.agentNamespace,
		// A host plan waits for its host's agent one more Lease term after the Lease
		// expired before the fleet coordinator's stand-in closes it without writing any
		// row.
		HostAgentGrace:  cfg.agentTimings.LeaseDuration,
		TakeoverTimeout: cfg.takeoverTimeout,
		RowWrites:       cfg.rowWrites,
	}
	if err := hostPlans.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("retirementplan-host controller: %w", err)
	}
	if err := (&retirementplan.FleetPlanReconciler{
		Deps:           deps,
		Coordinator:    coordinator,
		AgentNamespace: cfg.agentNamespace,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("retirementplan-fleet controller: %w", err)
	}
	authn := gateway.NewAuthenticator(mgr.GetClient())
	if cfg.capabilityAddr != "" {
		if err := mgr.Add(&capability.Server{Addr: cfg.capabilityAddr, Reader: mgr.GetAPIReader(), Cache: mgr.GetClient(), Clock: clk, Authn: authn}); err != nil {
			return fmt.Errorf("capability endpoint: %w", err)
		}
	}
	// Claims are decided in the GiteaRepositories of their namespace, and in the repository
	// the --gitea-url and --repository flags name, if any. The sweep ends orphaned records
	// and locks in all of them, and the gateway routes each worker to the server of its
	// bound repository. The doctor checks the flags' server only (for now).
	repositories := &gitearepository.Resolver{Reader: mgr.GetClient(), Dialer: dialer}
	claims := &taskclaim.Reconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Repositories:  repositories,
		Verdicts:      reviewer,
		Fence:         fence,
		TTL:           cfg.claimTTL,
		Clock:         clk,
		Recorder:      mgr.GetEventRecorder("taskclaim-controller"),
		RetryMaxDelay: cfg.retryMaxDelay,
		MaxOpenClaims: cfg.maxOpenClaims,
		// The flags' rule set is published when the manager starts (SetupWithManager adds
		// the publisher); claims there are refused while the published copy is not in force.
		MaxConcurrentReconciles: cfg.concurrency,
		// The gateway nudges the claim reconciler after a write that may complete a claim.
		Nudges: &nudge.Hub{},
	}
	sweep := &taskclaim.Sweeper{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Repositories: repositories,
		TTL: cfg.claimTTL, Interval: cfg.sweepInterval, Clock: clk}
	if err := mgr.Add(sweep); err != nil {
		return fmt.Errorf("claim sweep: %w", err)
	}
	var gc *giteaclaim.Client
	if cfg.giteaURL != "" && cfg.repository != "" {
		if gc, err = giteaclaim.New(cfg.giteaURL, cfg.giteaToken, giteaclaim.WithClock(clk.Now)); err != nil {
			return fmt.Errorf("gitea client: %w", err)
		}
		claims.Gitea, claims.Repository = gc, cfg.repository
		sweep.Gitea, sweep.Repository = gc, cfg.repository
	} else {
		log.Info("No --gitea-url and --repository: claims are decided in GiteaRepositories only")
	}
	if cfg.gatewayAddr != "" {
		gw := &gateway.Gateway{
			Addr:         cfg.gatewayAddr,
			CertDir:      cfg.gatewayCertDir,
			Repositories: repositories,
			Reader:       mgr.GetAPIReader(),
			Cache:        mgr.GetClient(),
			Authn:        authn,
			Credentials:  gateway.NewCredentials(mgr.GetAPIReader(), cfg.gatewayCredentials, gc),
			Recorder:     mgr.GetEventRecorder("fleet-gateway"),
			Client:       client.WithFieldOwner(mgr.GetClient(), gatewayFieldManager),
			Clock:        clk,
			Nudges:       claims.Nudges,
		}
		if gc != nil {
			gw.GiteaURL, gw.Repository, gw.Gitea = cfg.giteaURL, cfg.repository, gc
			if err := mgr.Add(&gateway.Doctor{Repository: cfg.repository, Gitea: gc,
				Credentials: gateway.NewCredentials(mgr.GetAPIReader(), cfg.gatewayCredentials, gc)}); err != nil {
				return fmt.Errorf("gitea doctor: %w", err)
			}
		}
		if err := mgr.Add(gw); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	return claims.SetupWithManager(mgr)
}
