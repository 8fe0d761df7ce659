/*
Copyright 2026 The fleet-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package retirement

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// Approval bindings: what an approval binds, and so what must not have moved between
// the plan and the apply.
const (
	// BindingRegistry (the seed's strict binding) binds the whole registry:
	// the approval carries the registry fingerprint, and any change to any row of the
	// namespace since the plan (a live worker's heartbeat included) ends the apply with
	// registry_revision_moved.
	BindingRegistry = "Registry"
	// BindingCandidateSet binds the candidate set alone: the candidate fingerprint and
	// the exact identities. At apply the plan is computed afresh and must have exactly
	// the approved candidates, each unchanged in every fingerprint field (otherwise
	// candidate_set_moved); rows outside the candidate set may have moved. The approval
	// carries no registry fingerprint. It is the default: a live fleet's heartbeats void
	// a registry binding within seconds.
	BindingCandidateSet = "CandidateSet"
)

// Bindings lists the approval bindings, the default first.
func Bindings() []string { return []string{BindingCandidateSet, BindingRegistry} }

// Approval is what a reviewer copied from a plan into spec.approval.
type Approval struct {
	// Binding is BindingRegistry or BindingCandidateSet; empty means the default (see
	// EffectiveBinding).
	Binding string
	// RegistryFingerprint must equal the fresh plan's registry fingerprint under
	// BindingRegistry, and must be empty under BindingCandidateSet.
	RegistryFingerprint string
	// CandidateFingerprint must equal the fresh plan's candidate fingerprint.
	CandidateFingerprint string
	// WorkerIdentities are the identities to retire.
	WorkerIdentities []string
}

// EffectiveBinding is the approval's binding with the default applied. Left empty, it is
// BindingCandidateSet, unless the approval names a registry fingerprint: an approval is
// never held to less than the tokens it carries, so that makes it BindingRegistry (the
// seed's approval, which names all three tokens, keeps its strict meaning). Any other
// value is returned as is (and refused by ApprovalMismatch and DecideApply).
func (a Approval) EffectiveBinding() string {
	switch {
	case a.Binding != "":
		return a.Binding
	case a.RegistryFingerprint != "":
		return BindingRegistry
	}
	return BindingCandidateSet
}

// bindingProblem says why an approval's binding and registry fingerprint do not fit
// together ("" when they do). The API schema refuses the same combinations; this keeps
// the decisions safe without it.
func bindingProblem(a Approval) string {
	switch a.EffectiveBinding() {
	case BindingRegistry:
		if a.RegistryFingerprint == "" {
			return "the approval binds the registry (binding Registry) but carries no registryFingerprint"
		}
	case BindingCandidateSet:
		if a.RegistryFingerprint != "" {
			return "the approval binds the candidate set (binding CandidateSet) and must not carry a registryFingerprint"
		}
	default:
		return fmt.Sprintf("the approval's binding %q is neither %s nor %s", a.Binding, BindingRegistry, BindingCandidateSet)
	}
	return ""
}

// ApplyDecision is the pure verdict taken after the authoritative re-read and
// before any write.
type ApplyDecision struct {
	// Proceed is true when the controller may start retiring Retire.
	Proceed bool
	// Outcome is the outcome to stop with when Proceed is false; empty when
	// Proceed is true (the run ends as applied or transaction_failed, see
	// Summarize).
	Outcome string
	// Detail explains a stop.
	Detail string
	// RequestedIdentities is the approval's identity list, normalised.
	RequestedIdentities []string
	// Retire lists the fresh rows to retire, in identity order.
	Retire []Row
	// Preserved holds assessments for requested identities that are not in
	// the fresh candidate set (reason not_in_candidate_set).
	Preserved []Assessment
}

// DecideApply compares an approval against a plan recomputed from the rows
// just re-read from the API server (fresh must be BuildPlan over freshRows,
// with freshly listed task claims) and decides whether apply may proceed.
//
// Stops, checked in this order:
//   - transaction_failed: the binding is unknown, or does not fit the
//     registry fingerprint (see Approval.Binding); nothing is decided on it;
//   - nothing_requested: the approval names no identity;
//   - already_retired: every requested identity is a row that is already
//     Retired (an idempotent replay after a successful apply, whose
//     fingerprints have necessarily moved);
//   - registry_revision_moved (BindingRegistry only): the registry
//     fingerprint differs;
//   - candidate_set_moved: the candidate fingerprint differs; under
//     BindingCandidateSet also when a requested identity is not a candidate
//     of the fresh plan (the approved set must be exactly what is retired).
//
// Under BindingCandidateSet the registry is not compared: the fresh plan is
// the one applied at once, and the candidate fingerprint covers every
// fingerprint field of every candidate row, so any change to an approved row
// still stops the apply while changes to other rows (a live worker's
// heartbeat) do not. The compare-and-swap against the registry is then the
// one between this fresh read and the writes: each row's update is guarded by
// the resourceVersion read here.
//
// Otherwise every requested identity is revalidated against the fresh plan:
// candidates are returned in Retire (sorted by identity), the others are
// preserved with not_in_candidate_set, carrying the fresh plan's reason in
// their evidence. Matching tokens are necessary, never sufficient: the
// caller must still run RecheckBeforeWrite and a guarded update per row.
func DecideApply(req Approval, fresh Plan, freshRows []Row) ApplyDecision {
	ids := NormalizeIdentities(req.WorkerIdentities)
	d := ApplyDecision{RequestedIdentities: ids}
	if why := bindingProblem(req); why != "" {
		d.Outcome, d.Detail = OutcomeTransactionFailed, why+"; nothing was applied"
		return d
	}
	binding := req.EffectiveBinding()
	if len(ids) == 0 {
		d.Outcome, d.Detail = OutcomeNothingRequested, "the approval names no worker identity"
		return d
	}

	byName := make(map[string][]*Row, len(freshRows))
	for i := range freshRows {
		r := &freshRows[i]
		byName[r.Name] = append(byName[r.Name], r)
	}
	allRetired := true
	for _, id := range ids {
		rs := byName[id]
		if len(rs) == 0 {
			allRetired = false
			break
		}
		for _, r := range rs {
			if r.Phase != fleet.Retired {
				allRetired = false
				break
			}
		}
		if !allRetired {
			break
		}
	}
	if allRetired {
		d.Outcome, d.Detail = OutcomeAlreadyRetired, "every requested registration is already Retired"
		return d
	}

	if binding == BindingRegistry && req.RegistryFingerprint != fresh.RegistryFingerprint {
		d.Outcome = OutcomeRegistryRevisionMoved
		d.Detail = fmt.Sprintf("registry fingerprint is now %s, approval carries %s", fresh.RegistryFingerprint, req.RegistryFingerprint)
		return d
	}
	if req.CandidateFingerprint != fresh.CandidateFingerprint {
		d.Outcome = OutcomeCandidateSetMoved
		d.Detail = fmt.Sprintf("candidate fingerprint is now %s, approval carries %s", fresh.CandidateFingerprint, req.CandidateFingerprint)
		return d
	}

	candidates := make(map[string]struct{}, len(fresh.Candidates))
	for _, a := range fresh.Candidates {
		candidates[a.WorkerIdentity] = struct{}{}
	}
	if binding == BindingCandidateSet {
		var missing []string
		for _, id := range ids {
			if _, ok := candidates[id]; !ok || len(byName[id]) != 1 {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			d.Outcome = OutcomeCandidateSetMoved
			d.Detail = fmt.Sprintf("the approval binds the candidate set, but the plan computed at apply time does not have %s as candidate(s)",
				strings.Join(quoteAll(missing), ", "))
			return d
		}
	}
	preserved := make(map[string]Assessment, len(fresh.Preserved))
	for _, a := range fresh.Preserved {
		if _, dup := preserved[a.WorkerIdentity]; !dup {
			preserved[a.WorkerIdentity] = a
		}
	}
	for _, id := range ids {
		if _, ok := candidates[id]; ok {
			if rs := byName[id]; len(rs) == 1 {
				d.Retire = append(d.Retire, *rs[0])
				continue
			}
		}
		a, planned := preserved[id]
		kept := notInCandidateSet(id, "at apply time", a, planned)
		if _, ok := candidates[id]; !planned && !ok {
			kept.Detail += " (no such registration)"
		}
		d.Preserved = append(d.Preserved, kept)
	}
	d.Proceed = true
	return d
}

// ApprovalMismatch explains how an approval differs from the plan it approves: its
// tokens must equal the plan's and its identities must be exactly the plan's candidates
// (order and duplicates aside). Under BindingRegistry both tokens count;
// under BindingCandidateSet only the candidate fingerprint does, and the approval must
// carry no registry fingerprint. It returns "" when the approval repeats the plan.
// Matching is what an Approved condition needs; it is never enough to retire anything
// (DecideApply and RecheckBeforeWrite decide that on fresh state).
func ApprovalMismatch(req Approval, registryFingerprint, candidateFingerprint string, candidates []string) string {
	if why := bindingProblem(req); why != "" {
		return why
	}
	switch {
	case req.EffectiveBinding() == BindingRegistry && req.RegistryFingerprint != registryFingerprint:
		return "the approval's registryFingerprint does not equal the plan's"
	case req.CandidateFingerprint != candidateFingerprint:
		return "the approval's candidateFingerprint does not equal the plan's"
	case !slices.Equal(NormalizeIdentities(req.WorkerIdentities), NormalizeIdentities(candidates)):
		return "the approval's workerIdentities are not exactly the plan's candidate identities"
	}
	return ""
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// NormalizeIdentities trims, de-duplicates and sorts identities, dropping
// empty entries. It returns nil for an empty result.
func NormalizeIdentities(ids []string) []string {
	seen := make(map[string]struct{}, len(ids))
	var out []string
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if _, ok := seen[id]; ok {
			continue
		}
		seen[id] = struct{}{}
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// UntouchedAssessments builds preserved assessments for rows the controller
// did not get to write (for example reason external_fence_moved once the
// active task claims changed mid-apply).
func UntouchedAssessments(rows []Row, reason, detail string) []Assessment {
	out := make([]Assessment, 0, len(rows))
	for _, r := range rows {
		out = append(out, Assessment{
			WorkerIdentity: r.Name,
			ReasonCode:     reason,
			Detail:         detail,
			Evidence:       map[string]string{EvidencePhase: r.Phase, EvidenceOwnershipState: r.OwnershipState},
		})
	}
	return out
}

// ApplyReport is the final, reportable result of an apply run.
type ApplyReport struct {
	// Outcome is one of the Outcome* constants.
	Outcome string
	// MutationPerformed is true only when at least one row was retired.
	MutationPerformed bool
	// RetiredCount is len(Retired).
	RetiredCount int
	// Retired lists the identities actually retired, sorted.
	Retired []string
	// Preserved lists every requested identity that was not retired, with
	// its reason, sorted by identity.
	Preserved []Assessment
	// Interrupted is true when the per-row loop stopped early (fence moved or
	// an error). Such a run is never a clean apply: Retired says exactly
	// which rows were written.
	Interrupted bool
	// Recovered is true when the applier stopped before writing its report and a
	// takeover completed it from what the rows show (CompleteInterrupted). Such a report
	// is Interrupted too.
	Recovered bool
	// Resumed is true when the applier stopped before writing its report and a takeover
	// on the rows' host resumed the apply (DecideResume, SummarizeResume).
	Resumed bool
	// Detail explains an interruption or a stop.
	Detail string
}

// Summarize turns a decision and what the controller then did into the
// reported result.
//
// Kubernetes has no multi-object transaction, so unlike a database-backed
// registry an interrupted run may already have retired some rows. The rule:
// when the decision was a stop, its outcome is reported unchanged; when the
// run was interrupted (interruption != "") before anything was retired, the
// outcome is transaction_failed; otherwise it is applied, with Interrupted
// set whenever the loop stopped early, so a partial run is never presented
// as a clean one.
func Summarize(d ApplyDecision, retired []string, preserved []Assessment, interruption string) ApplyReport {
	if !d.Proceed {
		return ApplyReport{Outcome: d.Outcome, Preserved: sortAssessments(d.Preserved), Detail: d.Detail}
	}
	rep := ApplyReport{
		Retired:     NormalizeIdentities(retired),
		Interrupted: interruption != "",
		Detail:      interruption,
	}
	all := make([]Assessment, 0, len(d.Preserved)+len(preserved))
	all = append(all, d.Preserved...)
	all = append(all, preserved...)
	rep.Preserved = sortAssessments(all)
	rep.RetiredCount = len(rep.Retired)
	rep.MutationPerformed = rep.RetiredCount > 0
	if rep.Interrupted && rep.RetiredCount == 0 {
		rep.Outcome = OutcomeTransactionFailed
	} else {
		rep.Outcome = OutcomeApplied
	}
	return rep
}

func sortAssessments(as []Assessment) []Assessment {
	sort.SliceStable(as, func(i, j int) bool { return as[i].WorkerIdentity < as[j].WorkerIdentity })
	return as
}

// notInCandidateSet keeps worker id as not_in_candidate_set: it is not a candidate of the
// plan computed again (when says when). fresh, when planned, is that plan's own verdict on
// the row, whose reason and evidence the assessment carries (planReasonCode).
func notInCandidateSet(id, when string, fresh Assessment, planned bool) Assessment {
	ev := map[string]string{}
	detail := fmt.Sprintf("worker %q is not in the candidate set recomputed %s", id, when)
	if planned {
		for k, v := range fresh.Evidence {
			ev[k] = v
		}
		ev[EvidencePlanReasonCode] = fresh.ReasonCode
		detail += fmt.Sprintf(" (%s: %s)", fresh.ReasonCode, fresh.Detail)
	}
	return Assessment{WorkerIdentity: id, ReasonCode: ReasonNotInCandidateSet, Detail: detail, Evidence: ev}
}
