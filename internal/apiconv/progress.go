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
	out := retirement.Progress{
		State:     p.State,
		Applier:   p.Applier,
		StartedAt: p.StartedAt.Time,
		RenewedAt: p.RenewedAt.Time,
	}
	if len(p.IntendedRows) > 0 {
		out.Intended = make([]string, 0, len(p.IntendedRows))
		out.IntendedVersions = make(map[string]string, len(p.IntendedRows))
		out.IntendedFingerprints = make(map[string]string, len(p.IntendedRows))
		for _, r := range p.IntendedRows {
			out.Intended = append(out.Intended, r.Name)
			out.IntendedVersions[r.Name] = r.ResourceVersion
			out.IntendedFingerprints[r.Name] = r.Fingerprint
		}
	}
	return out
}

// IntendedRows records the rows an apply sets out to write, sorted by name, each with the
// resourceVersion and the fingerprint it was read at.
func IntendedRows(items []fleetv1alpha1.WorkerRegistration, names []string) []fleetv1alpha1.IntendedRow {
	byName := make(map[string]*fleetv1alpha1.WorkerRegistration, len(items))
	for i := range items {
		byName[items[i].Name] = &items[i]
	}
	names = retirement.NormalizeIdentities(names)
	out := make([]fleetv1alpha1.IntendedRow, 0, len(names))
	for _, n := range names {
		ir := fleetv1alpha1.IntendedRow{Name: n}
		if wr := byName[n]; wr != nil {
			ir.ResourceVersion, ir.Fingerprint = wr.ResourceVersion, retirement.RowFingerprint(Row(wr))
		}
		out = append(out, ir)
	}
	return out
}

// Versions are the registrations' resourceVersions by name.
func Versions(items []fleetv1alpha1.WorkerRegistration) map[string]string {
	out := make(map[string]string, len(items))
	for i := range items {
		out[items[i].Name] = items[i].ResourceVersion
	}
	return out
}
