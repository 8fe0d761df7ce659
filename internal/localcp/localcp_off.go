//go:build nolocalcp

// Package localcp is left out of this build (the nolocalcp tag, which the images use): a
// manager built so runs against a cluster only, and links none of envtest.
package localcp

import (
	"errors"

	"k8s.io/client-go/rest"
)

// ErrNoAssets is returned by Start: this build has no embedded control plane.
var ErrNoAssets = errors.New("this manager was built without the embedded control plane (tag nolocalcp): give it a cluster (KUBECONFIG or in-cluster)")

// ControlPlane is never started in this build.
type ControlPlane struct {
	Config         *rest.Config
	KubeconfigPath string
}

// Start always fails with ErrNoAssets.
func Start(string, string, ...string) (*ControlPlane, error) { return nil, ErrNoAssets }

// Install does nothing.
func (c *ControlPlane) Install(...string) error { return ErrNoAssets }

// Stop does nothing.
func (c *ControlPlane) Stop() error { return nil }
