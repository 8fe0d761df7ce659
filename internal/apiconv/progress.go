package apiconv

import (
	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// Progress is a plan's recorded apply progress as the pure package reads it; nil (no
// apply started) is the zero Progress.
func Progress(p *fleetv1alpha1.ApplyProgress) retirement.Progress {
	if p == nil {
		return retirement.Progress{}
	}
	return retirement.Progress{
		State:     p.State,
		Applier:   p.Applier,
		StartedAt: p.StartedAt.Time,
		RenewedAt: p.RenewedAt.Time,
		Intended:  p.Intended,
	}
}
