// Package apiconv translates between the API objects of api/v1alpha1 and the plain values
// of the pure decision packages (internal/retirement, internal/fleet, internal/claim,
// internal/liveness). It is the one place that knows both shapes; it decides nothing.
package apiconv

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/fleet"
	"github.com/giteatools/fleet-controller/internal/liveness"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// Row flattens a registration into the retirement package's row.
func Row(wr *fleetv1alpha1.WorkerRegistration) retirement.Row {
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
		PodUID:              podUID(s.Process.Pod),
		GenerationID:        s.GenerationID,
		SessionID:           s.SessionID,
		FencingEpoch:        s.FencingEpoch,
		Phase:               fleet.EffectivePhase(wr.Status.Phase),
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
	if wr.Status.LastHeartbeatAt != nil {
		row.LastHeartbeatAt = wr.Status.LastHeartbeatAt.UTC().Format(time.RFC3339)
	}
	if wr.Status.RetiredAt != nil {
		row.RetiredAt = wr.Status.RetiredAt.UTC().Format(time.RFC3339)
	}
	return row
}

// Rows flattens every registration of a list.
func Rows(items []fleetv1alpha1.WorkerRegistration) []retirement.Row {
	rows := make([]retirement.Row, 0, len(items))
	for i := range items {
		rows = append(rows, Row(&items[i]))
	}
	return rows
}

// Members are the registrations as the fleet snapshot sees them.
func Members(items []fleetv1alpha1.WorkerRegistration) []fleet.Member {
	out := make([]fleet.Member, 0, len(items))
	for i := range items {
		wr := &items[i]
		out = append(out, fleet.Member{
			Name: wr.Name, ClientInstanceID: wr.Spec.ClientInstanceID, WorkerNamespace: wr.Spec.WorkerNamespace,
			Phase: fleet.EffectivePhase(wr.Status.Phase), OwnershipState: wr.Status.OwnershipState,
		})
	}
	return out
}

// ProbeTarget is the process a registration describes.
func ProbeTarget(wr *fleetv1alpha1.WorkerRegistration) liveness.Target {
	p := wr.Spec.Process
	t := liveness.Target{HostID: p.HostID, BootID: p.BootID, PID: p.PID, StartTime: p.StartTime}
	if p.Pod != nil { // p.PID is the pod's own namespace pid: the prober resolves it
		t.Pod = &liveness.PodTarget{UID: p.Pod.UID}
	}
	return t
}

// podUID is the UID of a worker's pod, "" for a host process. Written in lower case, as
// the API server writes UIDs, so that one pod is one identity.
func podUID(p *fleetv1alpha1.PodProcess) string {
	if p == nil {
		return ""
	}
	return strings.ToLower(p.UID)
}

// Probe is a prober's answer in the retirement package's terms.
func Probe(res liveness.Result) retirement.Probe {
	return retirement.Probe{State: fleet.PIDState(res.State).Normalize(), ObservedStartTime: res.ObservedStartTime, Detail: res.Detail}
}

// Assessments stores per-row verdicts in the API's shape.
func Assessments(in []retirement.Assessment) []fleetv1alpha1.WorkerAssessment {
	if len(in) == 0 {
		return nil
	}
	out := make([]fleetv1alpha1.WorkerAssessment, 0, len(in))
	for _, a := range in {
		out = append(out, fleetv1alpha1.WorkerAssessment{WorkerIdentity: a.WorkerIdentity, ReasonCode: a.ReasonCode, Detail: a.Detail, Evidence: a.Evidence})
	}
	return out
}

// Approval is spec.approval in the retirement package's terms.
func Approval(a *fleetv1alpha1.RetirementApproval) retirement.Approval {
	if a == nil {
		return retirement.Approval{}
	}
	return retirement.Approval{Binding: a.Binding, RegistryFingerprint: a.RegistryFingerprint, CandidateFingerprint: a.CandidateFingerprint, WorkerIdentities: a.WorkerIdentities}
}

// Snapshot stores a fleet snapshot in the API's shape.
func Snapshot(sum fleet.Summary) *fleetv1alpha1.PostApply {
	out := &fleetv1alpha1.PostApply{
		StaleWorkerCount:      int32(sum.StaleCount),
		LiveWorkerCount:       int32(sum.LiveCount),
		HistoricalWorkerCount: int32(sum.HistoricalCount),
		LiveFleetSafe:         sum.LiveFleetSafe,
		BlockerCount:          int32(len(sum.Blockers)),
	}
	for _, b := range sum.Blockers[:min(len(sum.Blockers), retirement.MaxListedBlockers)] {
		out.Blockers = append(out.Blockers, fleetv1alpha1.FleetBlocker{Code: b.Code, WorkerIdentity: b.Worker, Detail: b.Detail})
	}
	return out
}

// Holdings are the task claims as the workflow-owner rule sees them.
func Holdings(claims []fleetv1alpha1.TaskClaim) []claim.Holding {
	out := make([]claim.Holding, 0, len(claims))
	for i := range claims {
		tc := &claims[i]
		out = append(out, claim.Holding{Worker: tc.Spec.Worker, Phase: tc.Status.Phase, Deleting: tc.DeletionTimestamp != nil})
	}
	return out
}

// Worker is a registration as the claim decisions see it.
func Worker(wr *fleetv1alpha1.WorkerRegistration) claim.Worker {
	return claim.Worker{Name: wr.Name, Identity: wr.Spec.Identity, Repository: wr.Spec.Repository,
		Phase: fleet.EffectivePhase(wr.Status.Phase), OwnershipState: wr.Status.OwnershipState}
}

// Target is a claim's target in the claim package's terms.
func Target(t fleetv1alpha1.TaskTarget) claim.Target {
	return claim.Target{Repository: t.Repository, Kind: claim.Kind(t.Kind), Number: t.Number, HeadSHA: t.HeadSHA}
}

// TaskTarget is a target in the API's shape.
func TaskTarget(t claim.Target) fleetv1alpha1.TaskTarget {
	return fleetv1alpha1.TaskTarget{Repository: t.Repository, Kind: string(t.Kind), Number: t.Number, HeadSHA: t.HeadSHA}
}

// ValidationStatus stores a validation in the API's shape.
func ValidationStatus(v claim.Validation, at time.Time) *fleetv1alpha1.ClaimValidation {
	target := TaskTarget(v.Target)
	return &fleetv1alpha1.ClaimValidation{
		Pin: v.Pin, Target: &target, Role: string(v.Role), Operations: v.Operations, Identity: v.Identity,
		CapabilityVerdict: v.CapabilityVerdict, RepositoryBinding: v.RepositoryBinding,
		ParityRevision: v.ParityRevision, DependencyStates: v.DependencyStates, HeadSHA: v.HeadSHA,
		ClaimGeneration: v.ClaimGeneration, RuleSetDigest: v.RuleSetDigest, ValidatedAt: metav1.NewTime(at),
	}
}

// Validation rebuilds the issued validation from status (its pin is checked against the
// components, so nothing can be lost on the way). The target is the one validated, never
// spec's: a claim whose spec names another target is a substitution. A validation that
// recorded no target rebuilds with none, which no claim matches.
func Validation(tc *fleetv1alpha1.TaskClaim) claim.Validation {
	s := tc.Status.Validation
	if s == nil {
		return claim.Validation{}
	}
	var validated claim.Target
	if s.Target != nil {
		validated = Target(*s.Target)
	}
	return claim.Validation{
		PinComponents: claim.PinComponents{
			Identity: s.Identity, Worker: tc.Spec.Worker, CapabilityVerdict: s.CapabilityVerdict,
			RepositoryBinding: s.RepositoryBinding, Target: validated, Role: claim.Role(s.Role),
			ParityRevision: s.ParityRevision, DependencyStates: s.DependencyStates, HeadSHA: s.HeadSHA,
			ClaimGeneration: s.ClaimGeneration, RuleSetDigest: s.RuleSetDigest,
		},
		Operations: s.Operations,
		Pin:        s.Pin,
	}
}

// Capability rebuilds the capability in status (nil when there is none).
func Capability(tc *fleetv1alpha1.TaskClaim) *claim.Capability {
	c := tc.Status.Capability
	if c == nil {
		return nil
	}
	parity := ""
	if tc.Status.Validation != nil {
		parity = tc.Status.Validation.ParityRevision
	}
	return &claim.Capability{
		Worker: c.Worker, Identity: c.Identity, Repository: c.Repository,
		Target: claim.Target{Repository: c.Repository, Kind: claim.Kind(c.Target.Kind), Number: c.Target.Number, HeadSHA: c.Target.HeadSHA},
		Role:   claim.Role(c.Role), Operations: c.Operations, Pin: c.Pin, ParityRevision: parity,
		ClaimID: c.ClaimID, LeaseName: c.LeaseName, LeaseGeneration: c.LeaseGeneration, ExpiresAt: c.ExpiresAt.Time,
	}
}

// CapabilityStatus stores a capability in the API's shape.
func CapabilityStatus(c *claim.Capability) *fleetv1alpha1.TaskCapability {
	return &fleetv1alpha1.TaskCapability{
		Worker: c.Worker, Identity: c.Identity, Repository: c.Repository,
		Target: fleetv1alpha1.ClaimTargetRef{Kind: string(c.Target.Kind), Number: c.Target.Number, HeadSHA: c.Target.HeadSHA},
		Role:   string(c.Role), Operations: c.Operations, Pin: c.Pin, ClaimID: c.ClaimID,
		LeaseName: c.LeaseName, LeaseGeneration: c.LeaseGeneration, ExpiresAt: metav1.NewTime(c.ExpiresAt),
	}
}

// ResultStatus stores a claim result in the API's shape.
func ResultStatus(r claim.Result) *fleetv1alpha1.ClaimResult {
	return &fleetv1alpha1.ClaimResult{
		Outcome: string(r.Outcome), Class: string(r.Class), Blocker: string(r.Blocker),
		FailedPredicate: r.FailedPredicate, RuleID: r.RuleID, Message: r.Message,
		ContentionIsNormal: r.ContentionIsNormal, ReassessFromFreshState: r.ReassessFromFreshState,
		RetryPermitted: r.RetryPermitted, RuleSetDigest: r.RuleSetDigest,
	}
}

// Time is a metav1.Time (API times are metav1.Time).
func Time(t time.Time) metav1.Time { return metav1.NewTime(t) }

// TimePtr returns the time a *metav1.Time holds, or nil.
func TimePtr(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

// ClaimRepositoryKey is the key of the repository tc's validation resolved
// (status.repository); the zero key, of the flags' repository, when it recorded none.
func ClaimRepositoryKey(tc *fleetv1alpha1.TaskClaim) claim.RepositoryKey {
	if r := tc.Status.Repository; r != nil {
		return claim.RepositoryKey{Server: r.Server, ID: r.ID}
	}
	return claim.RepositoryKey{}
}
