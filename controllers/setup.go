// Package controllers holds the thin reconcilers of fleet-controller: each one gathers
// state, asks a pure package for the decision, and writes the result with a
// resourceVersion guard.
package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// Config is what the manager passes to the reconcilers.
type Config struct {
	// HostID is the machine id of the host this manager runs on ("" = read it from ProcRoot).
	HostID string
	// ProcRoot is where the host's /proc and /etc are mounted ("/" locally).
	ProcRoot string
	// GiteaURL and GiteaToken reach Gitea; task claims are disabled without them.
	GiteaURL   string
	GiteaToken string
	// Repository is the canonical owner/name repository of the fleet.
	Repository string
	// ClaimTTL is the lifetime of an activated capability.
	ClaimTTL time.Duration
	// CapabilityAddr is where the capability-check endpoint listens ("" disables it).
	CapabilityAddr string
}

// Setup registers every reconciler of the project with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config) error {
	log := ctrl.Log.WithName("setup")
	prober, err := liveness.NewProcProber(cfg.ProcRoot)
	if err != nil {
		// Partial facts are still usable: the prober answers unknown where a fact is missing.
		log.Error(err, "Host facts are incomplete; affected rows will be preserved")
	}
	if prober == nil {
		prober = &liveness.ProcProber{Root: cfg.ProcRoot}
	}
	if cfg.HostID != "" {
		prober.Facts.HostID = cfg.HostID
	}
	host := retirement.Host{HostID: prober.Facts.HostID, BootID: prober.Facts.BootID}

	if err := (&WorkerRegistrationReconciler{
		Client:   mgr.GetClient(),
		Prober:   prober,
		Clock:    clock.RealClock{},
		Recorder: mgr.GetEventRecorder("workerregistration-controller"),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("workerregistration controller: %w", err)
	}
	if err := (&RetirementPlanReconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Prober:     prober,
		Reprober:   prober,
		Host:       host,
		Repository: cfg.Repository,
		Approvers:  SubjectAccessReviewChecker{Client: mgr.GetClient()},
		Clock:      clock.RealClock{},
		Recorder:   mgr.GetEventRecorder("retirementplan-controller"),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("retirementplan controller: %w", err)
	}
	return setupTaskClaims(ctx, mgr, cfg)
}
