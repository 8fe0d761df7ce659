// Package controllers holds the thin reconcilers of fleet-controller: each one gathers
// state, asks a pure package for the decision, and writes the result with a
// resourceVersion guard.
package controllers

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Config is what the manager passes to the reconcilers.
type Config struct {
	// HostID is the machine id of the host this manager runs on.
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
	_ = ctx
	_ = mgr
	_ = cfg
	return nil
}
