package claim

import (
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// ValidateInput is everything Validate decides from. The reconciler reads it
// fresh; Validate never reaches for anything else.
type ValidateInput struct {
	// Worker is the requesting worker's registration.
	Worker Worker
	// ClaimID identifies the claim object asking (its UID). A Lease or claim
	// record held under this id is not foreign. It must be unique per claim.
	ClaimID string
	// Requested is the target the worker chose. Validation never replaces it.
	Requested Target
	// State is the requested target's state as just read.
	State TargetState
	// ControllerRepository is the "owner/name" repository the controller serves.
	ControllerRepository string
	// Where is the key of the repository the claim's target resolved to (the zero key
	// for the flags' repository): with the worker's binding it gives the pin's
	// repository_binding (CanonicalBinding).
	Where RepositoryKey
	// CapabilityVerdict is the authorization verdict for the worker; only
	// VerdictAllowed passes.
	CapabilityVerdict string
	// Now is the current time, used for claim record and Lease expiry.
	Now time.Time
	// OtherClaims counts the claims, other than this one, that the worker or
	// its identity holds or is acquiring (see [OtherClaims]). Any refuses.
	OtherClaims int
}

// Validation is the outcome of a successful validation: the derived role,
// the operations it would permit, and the pin over every pinned component.
// The reconciler stores it (status.validation) and hands it back at claim
// time; the pin is checked against the components, so every component must
// survive that round trip.
type Validation struct {
	PinComponents
	// Operations are the operations the derived role permits.
	Operations []string `json:"operations"`
	// Pin is ComputePin over the components.
	Pin string `json:"pin"`
}

// Validate runs the rejection rules in a fixed order against the requested
// target and, when none refuses, derives the role and pins the state:
//
//  1. worker registered, active and live; capability verdict allowed (authority)
//  2. target well formed; worker binding, target and controller repository agree; the
//     worker holds no other claim (policy)
//  3. the requested number holds an item of the requested kind (eligibility/ineligible)
//  4. the state read describes the requested target and head, and is complete (stale_state)
//  5. target not closed or merged (eligibility/terminal)
//  6. no open dependency edge (eligibility/dependency_gated); not labelled blocked (eligibility/ineligible)
//  7. no foreign claim record, Lease holder or assignee (contention/foreign_claimed)
//  8. identity independence for the derived role (authority/ineligible)
//
// Validation may refuse; it never proposes or selects another target.
func Validate(in ValidateInput) (Validation, Result) {
	v, id := evaluate(in)
	if id != "" {
		return Validation{}, refusal(id, OutcomeRejected, in.Requested)
	}
	return v, success(OutcomeValidated, in.Requested)
}

// evaluate is Validate without the Result wrapping, shared with the claim-time
// revalidation. It returns the id of the first refusing rule, or "".
func evaluate(in ValidateInput) (Validation, ruleID) {
	for _, check := range []func(ValidateInput) ruleID{
		checkWorker,
		checkVerdict,
		checkTargetShape,
		checkBinding,
		checkSingleClaim,
		checkExists,
		checkFreshness,
		checkTerminal,
		checkDependencies,
		checkBlockedLabel,
		checkForeignClaim,
		checkIndependence,
	} {
		if id := check(in); id != "" {
			return Validation{}, id
		}
	}
	st := in.State
	role := DeriveRole(st)
	c := PinComponents{
		Identity:          in.Worker.Identity,
		Worker:            in.Worker.Name,
		CapabilityVerdict: in.CapabilityVerdict,
		RepositoryBinding: CanonicalBinding(in.Worker.Repository, in.Where),
		Target:            in.Requested,
		Role:              role,
		ParityRevision:    st.ParityRevision,
		DependencyStates:  DependencyStates(st.Dependencies),
		ClaimGeneration:   st.LeaseGeneration,
		RuleSetDigest:     RuleSetDigest(),
	}
	if in.Requested.Kind == KindPullRequest {
		c.HeadSHA = st.Target.HeadSHA
	}
	return Validation{PinComponents: c, Operations: OperationsFor(role), Pin: ComputePin(c)}, ""
}

func checkWorker(in ValidateInput) ruleID {
	w := in.Worker
	switch {
	case strings.TrimSpace(w.Name) == "" || strings.TrimSpace(w.Identity) == "":
		return ruleWorkerNotRegistered
	case w.Phase != fleet.Active:
		return ruleWorkerRetired
	case w.OwnershipState != fleet.Live:
		return ruleWorkerNotLive
	}
	return ""
}

func checkVerdict(in ValidateInput) ruleID {
	if in.CapabilityVerdict != VerdictAllowed {
		return ruleCapabilityDenied
	}
	return ""
}

var (
	repositoryPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)
	shaPattern        = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)
)

// wellFormed reports whether t names exactly one item: a canonical
// repository, a known kind, a positive number, and a head exactly when the
// target is a pull request.
func wellFormed(t Target) bool {
	if !repositoryPattern.MatchString(t.Repository) || t.Number <= 0 {
		return false
	}
	switch t.Kind {
	case KindIssue:
		return t.HeadSHA == ""
	case KindPullRequest:
		return shaPattern.MatchString(t.HeadSHA)
	default:
		return false
	}
}

func checkTargetShape(in ValidateInput) ruleID {
	if !wellFormed(in.Requested) {
		return ruleTargetMalformed
	}
	return ""
}

func checkBinding(in ValidateInput) ruleID {
	if !sameRepository(in.Worker.Repository, in.Requested.Repository) {
		return ruleWorkerRepositoryMismatch
	}
	if !sameRepository(in.ControllerRepository, in.Requested.Repository) {
		return ruleControllerRepoMismatch
	}
	return ""
}

// checkSingleClaim: a worker (and an identity) holds at most one claim.
func checkSingleClaim(in ValidateInput) ruleID {
	if in.OtherClaims > 0 {
		return ruleWorkerHoldsClaim
	}
	return ""
}

// checkExists refuses a request for an item Gitea does not have, or has as the other
// kind: a request that can never be met, which is not stale state (nothing moved).
func checkExists(in ValidateInput) ruleID {
	switch in.State.Missing {
	case MissingNotFound:
		return ruleTargetNotFound
	case MissingOtherKind:
		return ruleTargetKindMismatch
	}
	return ""
}

func checkFreshness(in ValidateInput) ruleID {
	st := in.State
	if !st.Target.SameItem(in.Requested) {
		return ruleTargetStateMismatch
	}
	switch norm(st.State) {
	case StateOpen:
		if strings.TrimSpace(st.ParityRevision) == "" {
			return ruleTargetStateIncomplete
		}
		if in.Requested.Kind == KindPullRequest && strings.TrimSpace(st.Target.HeadSHA) == "" {
			return ruleTargetStateIncomplete
		}
	case StateClosed:
	default:
		return ruleTargetStateIncomplete
	}
	if in.Requested.Kind == KindPullRequest && !sameSHA(in.Requested.HeadSHA, st.Target.HeadSHA) {
		return ruleHeadSHAMismatch
	}
	return ""
}

func checkTerminal(in ValidateInput) ruleID {
	if DeriveRole(in.State) == RoleTerminal {
		return ruleTargetTerminal
	}
	return ""
}

// dependencyGated reports whether any dependency edge is not closed. An edge
// in an unknown state gates, so doubt never opens a target.
func dependencyGated(edges []DependencyEdge) bool {
	for _, e := range edges {
		if norm(e.State) != StateClosed {
			return true
		}
	}
	return false
}

func checkDependencies(in ValidateInput) ruleID {
	if dependencyGated(in.State.Dependencies) {
		return ruleDependencyOpen
	}
	return ""
}

// labelledBlocked reports whether the labels include LabelBlocked.
func labelledBlocked(labels []string) bool {
	for _, l := range labels {
		if norm(l) == LabelBlocked {
			return true
		}
	}
	return false
}

func checkBlockedLabel(in ValidateInput) ruleID {
	if labelledBlocked(in.State.Labels) {
		return ruleTargetBlocked
	}
	return ""
}

// recordOwnedBy reports whether rec was published by this worker under this
// claim. With no claim id, any record of the same worker and identity counts.
func recordOwnedBy(rec *Record, w Worker, claimID string) bool {
	if rec == nil || rec.Worker != w.Name || !sameIdentity(rec.Identity, w.Identity) {
		return false
	}
	return claimID == "" || rec.ClaimID == claimID
}

// foreignLeaseHolder reports whether the Lease is held, not lapsed, by a
// holder other than claimID.
func foreignLeaseHolder(st TargetState, claimID string, now time.Time) bool {
	holder := strings.TrimSpace(st.LeaseHolder)
	if holder == "" || (claimID != "" && holder == claimID) {
		return false
	}
	return st.LeaseExpiresAt.IsZero() || now.Before(st.LeaseExpiresAt)
}

// foreignAssignees reports whether the target is assigned and identity is
// not among the assignees.
func foreignAssignees(assignees []string, identity string) bool {
	assigned := false
	for _, a := range assignees {
		if strings.TrimSpace(a) != "" {
			assigned = true
		}
	}
	return assigned && !containsIdentity(assignees, identity)
}

func checkForeignClaim(in ValidateInput) ruleID {
	st := in.State
	if rec := st.ClaimRecord; rec.InForce(in.Now) && !recordOwnedBy(rec, in.Worker, in.ClaimID) {
		return ruleClaimRecordForeign
	}
	if foreignLeaseHolder(st, in.ClaimID, in.Now) {
		return ruleLeaseHeldForeign
	}
	if foreignAssignees(st.Assignees, in.Worker.Identity) {
		return ruleAssigneeForeign
	}
	return ""
}

func checkIndependence(in ValidateInput) ruleID {
	err := CheckIndependence(in.Worker.Identity, DeriveRole(in.State), in.State)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrAuthorConflict):
		return ruleAuthorIndependence
	case errors.Is(err, ErrPusherConflict):
		return rulePusherIndependence
	case errors.Is(err, ErrRoleConflict):
		return ruleRoleIndependence
	default:
		return ruleIndependenceUnprovable
	}
}
