package claim

import (
	"slices"
	"strings"
	"time"
)

// Capability is the narrow, expiring permission an acquired claim activates.
// It is bound to eight dimensions: worker (Worker, Identity), repository,
// target, role, operations, pin, claim/lease (ClaimID, LeaseName,
// LeaseGeneration) and expiry. A worker without one is neutral.
type Capability struct {
	// Worker is the registration name.
	Worker string `json:"worker"`
	// Identity is the Gitea identity the worker acts as.
	Identity string `json:"identity"`
	// Repository is the bound "owner/name" repository.
	Repository string `json:"repository"`
	// Target is the bound target, including the pull request head.
	Target Target `json:"target"`
	// Role is the derived temporary role.
	Role Role `json:"role"`
	// Operations are the only operations permitted.
	Operations []string `json:"operations"`
	// Pin is the validation pin the claim consumed.
	Pin string `json:"pin"`
	// ParityRevision is the pinned base-branch head (copied from the
	// validation); pull request capabilities end when it moves.
	ParityRevision string `json:"parityRevision,omitempty"`
	// ClaimID identifies the claim and its Gitea claim record.
	ClaimID string `json:"claimID"`
	// LeaseName is the per-target Lease the claim holds.
	LeaseName string `json:"leaseName"`
	// LeaseGeneration is the Lease resourceVersion last written by this
	// claim. The reconciler must update it on every renewal: any other
	// movement of the Lease ends the capability.
	LeaseGeneration string `json:"leaseGeneration"`
	// ExpiresAt is when the capability ends on its own; it equals the expiry
	// of the authoritative claim record.
	ExpiresAt time.Time `json:"expiresAt"`
}

// ActivateInput is what the reconciler read back after winning the Lease
// compare-and-swap and publishing the claim record in Gitea.
type ActivateInput struct {
	// Validation is Acquisition.Validation from DecideClaim.
	Validation Validation
	// ClaimID identifies the claim (its UID).
	ClaimID string
	// LeaseName is the per-target Lease.
	LeaseName string
	// LeaseGeneration is the Lease resourceVersion as read back.
	LeaseGeneration string
	// LeaseHolder is the Lease holder as read back.
	LeaseHolder string
	// Record is the Gitea claim record as read back (nil when none).
	Record *Record
	// Now is the current time.
	Now time.Time
}

// Activate turns a cleared claim into a capability, but only when the
// read-back proves both halves of the claim: the Lease is held by this claim
// and the authoritative Gitea record is this claim's and in force. A Lease
// alone is a reservation and activates nothing. On refusal the capability is
// nil and the result is a final not_acquired.
func Activate(in ActivateInput) (*Capability, Result) {
	v := in.Validation
	requested := v.Target
	if v.Pin == "" || ComputePin(v.PinComponents) != v.Pin {
		return nil, loss(rulePinMismatch, requested)
	}
	if in.ClaimID == "" || strings.TrimSpace(in.LeaseHolder) != in.ClaimID ||
		in.LeaseName == "" || in.LeaseGeneration == "" {
		return nil, loss(ruleLeaseNotHeld, requested)
	}
	rec := in.Record
	if rec == nil {
		return nil, loss(ruleClaimNotPublished, requested)
	}
	if rec.ClaimID != in.ClaimID || rec.Worker != v.Worker || !sameIdentity(rec.Identity, v.Identity) {
		return nil, loss(ruleClaimRecordNotOurs, requested)
	}
	if RecordState(norm(string(rec.State))) != RecordStateActive || rec.ExpiresAt.IsZero() || !in.Now.Before(rec.ExpiresAt) {
		return nil, loss(ruleClaimRecordInactive, requested)
	}
	c := &Capability{
		Worker:          v.Worker,
		Identity:        v.Identity,
		Repository:      v.Target.Repository,
		Target:          v.Target,
		Role:            v.Role,
		Operations:      slices.Clone(OperationsFor(v.Role)),
		Pin:             v.Pin,
		ParityRevision:  v.ParityRevision,
		ClaimID:         in.ClaimID,
		LeaseName:       in.LeaseName,
		LeaseGeneration: in.LeaseGeneration,
		ExpiresAt:       rec.ExpiresAt,
	}
	return c, success(OutcomeAcquired, requested)
}

// Authorize refusal reasons.
const (
	// ReasonNoCapability: the worker is neutral and holds no task capability.
	ReasonNoCapability = "no_capability"
	// ReasonRevoked: the capability was revoked.
	ReasonRevoked = "revoked"
	// ReasonExpired: the capability's expiry has passed (or is unset).
	ReasonExpired = "expired"
	// ReasonWrongWorker: the caller is not the bound worker.
	ReasonWrongWorker = "wrong_worker"
	// ReasonWrongRepository: the operation is on another repository.
	ReasonWrongRepository = "wrong_repository"
	// ReasonWrongTarget: the operation is on another issue or pull request.
	ReasonWrongTarget = "wrong_target"
	// ReasonWrongHead: a pull request operation names a head other than the bound one.
	ReasonWrongHead = "wrong_head"
	// ReasonOperationNotPermitted: the role does not permit the operation.
	ReasonOperationNotPermitted = "operation_not_permitted"
)

// Query is one operation a worker wants to perform.
type Query struct {
	// Worker is the caller's registration name.
	Worker string
	// Repository is the repository the operation touches.
	Repository string
	// Target is the item the operation touches (with head for pull requests).
	Target Target
	// Operation is one of the Op constants.
	Operation string
	// Now is the current time.
	Now time.Time
}

// Authorize decides whether capability c permits query q. It checks, in
// order: a capability exists, it is not revoked, not expired, and the
// worker, repository, target, head and operation all match its bindings. The
// operation must be both listed in the capability and permitted by its role,
// so a capability altered in transit cannot widen itself. The reason is ""
// when allowed.
func Authorize(c *Capability, revoked bool, q Query) (allowed bool, reason string) {
	switch {
	case c == nil:
		return false, ReasonNoCapability
	case revoked:
		return false, ReasonRevoked
	case c.ExpiresAt.IsZero() || !q.Now.Before(c.ExpiresAt):
		return false, ReasonExpired
	case c.Worker == "" || q.Worker != c.Worker:
		return false, ReasonWrongWorker
	case !sameRepository(q.Repository, c.Repository) || !sameRepository(q.Target.Repository, c.Repository):
		return false, ReasonWrongRepository
	case q.Target.Kind != c.Target.Kind || q.Target.Number != c.Target.Number:
		return false, ReasonWrongTarget
	case c.Target.Kind == KindPullRequest &&
		(strings.TrimSpace(q.Target.HeadSHA) == "" || !sameSHA(q.Target.HeadSHA, c.Target.HeadSHA)):
		return false, ReasonWrongHead
	case !slices.Contains(c.Operations, q.Operation) || !slices.Contains(OperationsFor(c.Role), q.Operation):
		return false, ReasonOperationNotPermitted
	}
	return true, ""
}

// Held is one claim a worker may act through: its name, phase and capability (nil when
// the claim holds none).
type Held struct {
	// Claim is the TaskClaim's name.
	Claim string
	// Worker is the claim's spec.worker.
	Worker string
	// Phase is the claim's phase.
	Phase string
	// Capability is the claim's status.capability.
	Capability *Capability
}

// Answer is the verdict on one query across all of a worker's claims.
type Answer struct {
	// Allowed is true when some active capability permits the query.
	Allowed bool `json:"allowed"`
	// Reason names why not ("" when allowed).
	Reason string `json:"reason,omitempty"`
	// Claim is the claim that allowed the query, or whose refusal is reported. It is
	// always one of the caller's own claims.
	Claim string `json:"claim,omitempty"`
}

// AuthorizeAmong answers q from the caller's active capabilities: the first one that
// permits it wins. Otherwise the refusal of the caller's last active claim is reported
// (wrong_target, operation_not_permitted, …), and a caller with no active claim is
// neutral: no_capability. Claims of other workers are never considered, so an answer
// never names another worker's task.
func AuthorizeAmong(held []Held, q Query) Answer {
	best := Answer{Reason: ReasonNoCapability}
	for _, h := range held {
		if h.Worker != q.Worker || h.Phase != PhaseActive || h.Capability == nil {
			continue
		}
		ok, reason := Authorize(h.Capability, false, q)
		if ok {
			return Answer{Allowed: true, Claim: h.Claim}
		}
		best = Answer{Reason: reason, Claim: h.Claim}
	}
	return best
}
