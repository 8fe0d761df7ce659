package controllers

import (
	"context"
	"sort"
	"time"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/fleet"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// rowOf flattens a registration into the retirement package's row.
func rowOf(wr *fleetv1alpha1.WorkerRegistration) retirement.Row {
	s := wr.Spec
	row := retirement.Row{
		Name:                wr.Name,
		Namespace:           wr.Namespace,
		ClientInstanceID:    s.ClientInstanceID,
		WorkerNamespace:     s.WorkerNamespace,
		Identity:            s.Identity,
		Remote:              s.Remote,
		Repository:          s.Repository,
		HeartbeatTTLSeconds: retirement.NumberFromInt(s.HeartbeatTTLSeconds),
		HostID:              s.Process.HostID,
		BootID:              s.Process.BootID,
		PID:                 s.Process.PID,
		StartTime:           s.Process.StartTime,
		GenerationID:        s.GenerationID,
		SessionID:           s.SessionID,
		FencingEpoch:        s.FencingEpoch,
		Phase:               wr.Status.Phase,
		OwnershipState:      wr.Status.OwnershipState,
		TokenFingerprint:    s.TokenFingerprint,
		Revisions: map[string]string{
			"code": s.Revisions.Code, "config": s.Revisions.Config,
			"profile": s.Revisions.Profile, "protocol": s.Revisions.Protocol,
		},
		RetiredBy:        wr.Status.RetiredBy,
		RetirementReason: wr.Status.RetirementReason,
		ResourceVersion:  wr.ResourceVersion,
	}
	if row.Phase == "" {
		row.Phase = fleetv1alpha1.PhaseActive
	}
	if wr.Status.LastHeartbeatAt != nil {
		row.LastHeartbeatAt = wr.Status.LastHeartbeatAt.UTC().Format(time.RFC3339)
	}
	if wr.Status.RetiredAt != nil {
		row.RetiredAt = wr.Status.RetiredAt.UTC().Format(time.RFC3339)
	}
	return row
}

// probeAll probes every Active row; a nil prober leaves every row unknown.
func probeAll(ctx context.Context, p liveness.Prober, items []fleetv1alpha1.WorkerRegistration) map[string]retirement.Probe {
	out := make(map[string]retirement.Probe, len(items))
	if p == nil {
		return out
	}
	for i := range items {
		wr := &items[i]
		if wr.Status.Phase == fleetv1alpha1.PhaseRetired {
			continue
		}
		out[wr.Name] = probeOne(ctx, p, wr)
	}
	return out
}

func probeOne(ctx context.Context, p liveness.Prober, wr *fleetv1alpha1.WorkerRegistration) retirement.Probe {
	res := p.Probe(ctx, probeTarget(wr))
	return retirement.Probe{State: fleet.PIDState(res.State).Normalize(), ObservedStartTime: res.ObservedStartTime, Detail: res.Detail}
}

// claimIsActive reports whether a TaskClaim still (or may yet) own work. Anything not
// provably finished counts as active, so a worker is protected rather than retired.
func claimIsActive(tc *fleetv1alpha1.TaskClaim) bool {
	switch tc.Status.Phase {
	case fleetv1alpha1.ClaimPhaseRejected, fleetv1alpha1.ClaimPhaseReleased, fleetv1alpha1.ClaimPhaseCompleted,
		fleetv1alpha1.ClaimPhaseExpired, fleetv1alpha1.ClaimPhaseRevoked:
		return false
	}
	return tc.DeletionTimestamp == nil
}

// workflowOwners returns, sorted, the workers holding active claims.
func workflowOwners(claims []fleetv1alpha1.TaskClaim) []string {
	seen := map[string]bool{}
	var owners []string
	for i := range claims {
		tc := &claims[i]
		if claimIsActive(tc) && !seen[tc.Spec.Worker] {
			seen[tc.Spec.Worker] = true
			owners = append(owners, tc.Spec.Worker)
		}
	}
	sort.Strings(owners)
	return owners
}

func membersOf(items []fleetv1alpha1.WorkerRegistration) []fleet.Member {
	out := make([]fleet.Member, 0, len(items))
	for i := range items {
		wr := &items[i]
		phase := wr.Status.Phase
		if phase == "" {
			phase = fleetv1alpha1.PhaseActive
		}
		out = append(out, fleet.Member{
			Name: wr.Name, ClientInstanceID: wr.Spec.ClientInstanceID, WorkerNamespace: wr.Spec.WorkerNamespace,
			Phase: phase, OwnershipState: wr.Status.OwnershipState,
		})
	}
	return out
}

func assessmentsOf(in []retirement.Assessment) []fleetv1alpha1.WorkerAssessment {
	if len(in) == 0 {
		return nil
	}
	out := make([]fleetv1alpha1.WorkerAssessment, 0, len(in))
	for _, a := range in {
		out = append(out, fleetv1alpha1.WorkerAssessment{WorkerIdentity: a.WorkerIdentity, ReasonCode: a.ReasonCode, Detail: a.Detail, Evidence: a.Evidence})
	}
	return out
}
