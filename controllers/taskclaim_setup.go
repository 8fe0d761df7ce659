package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// setupTaskClaims registers the TaskClaim reconciler and the capability endpoint. Without
// Gitea no claim can be published, so no claim could ever activate: the reconciler is
// not started and claims stay Pending (the log says why).
func setupTaskClaims(_ context.Context, mgr ctrl.Manager, cfg Config) error {
	log := ctrl.Log.WithName("setup")
	if cfg.CapabilityAddr != "" {
		if err := mgr.Add(&CapabilityServer{Addr: cfg.CapabilityAddr, Reader: mgr.GetAPIReader(), Clock: clock.RealClock{}}); err != nil {
			return fmt.Errorf("capability endpoint: %w", err)
		}
	}
	if cfg.GiteaURL == "" || cfg.Repository == "" {
		log.Info("Task claims are disabled: --gitea-url and --repository are required")
		return nil
	}
	gc, err := giteaclaim.New(cfg.GiteaURL, cfg.GiteaToken)
	if err != nil {
		return fmt.Errorf("gitea client: %w", err)
	}
	ttl := cfg.ClaimTTL
	if ttl <= 0 {
		ttl = 2 * time.Hour
	}
	return (&TaskClaimReconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Gitea:      gc,
		Verdicts:   SubjectAccessReviewVerdict{Client: mgr.GetClient()},
		Repository: cfg.Repository,
		TTL:        ttl,
		Clock:      clock.RealClock{},
		Recorder:   mgr.GetEventRecorder("taskclaim-controller"),
	}).SetupWithManager(mgr)
}
