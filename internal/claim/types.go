package claim

import (
	"strings"
	"time"
)

// Kind is the kind of Gitea item a task targets.
type Kind string

const (
	// KindIssue is a Gitea issue.
	KindIssue Kind = "Issue"
	// KindPullRequest is a Gitea pull request.
	KindPullRequest Kind = "PullRequest"
)

// Target state values as reported by Gitea.
const (
	// StateOpen is an open issue or pull request.
	StateOpen = "open"
	// StateClosed is a closed issue or pull request (merged pull requests are closed too).
	StateClosed = "closed"
)

// Worker registration values, mirroring the WorkerRegistration API.
const (
	// PhaseActive is a registration that still describes a running worker.
	PhaseActive = "Active"
	// PhaseRetired is a registration that was retired.
	PhaseRetired = "Retired"
	// OwnershipLive is a registration whose heartbeat is fresh.
	OwnershipLive = "live"
	// OwnershipStale is an active registration whose heartbeat lapsed.
	OwnershipStale = "stale"
	// OwnershipHistorical is a retired registration kept as history.
	OwnershipHistorical = "historical"
)

// VerdictAllowed is the only capability verdict (e.g. from a SubjectAccessReview)
// under which a worker may validate or claim.
const VerdictAllowed = "allowed"

// Claim record states, as written in the Gitea claim record. Only
// RecordStateActive is in force; the others end a record.
const (
	// RecordStateActive is a claim record in force (until its ExpiresAt).
	RecordStateActive = "active"
	// RecordStateReleased is a record ended by release.
	RecordStateReleased = "released"
	// RecordStateCompleted is a record ended by cycle completion.
	RecordStateCompleted = "completed"
	// RecordStateExpired is a record ended by expiry.
	RecordStateExpired = "expired"
	// RecordStateRevoked is a record ended by revocation.
	RecordStateRevoked = "revoked"
)

// LabelBlocked is the Gitea label that marks a target as blocked.
const LabelBlocked = "blocked"

// Target is exactly one issue or pull request in one repository.
type Target struct {
	// Repository is the canonical "owner/name" of the Gitea repository.
	Repository string `json:"repository"`
	// Kind is Issue or PullRequest.
	Kind Kind `json:"kind"`
	// Number is the issue or pull request number.
	Number int64 `json:"number"`
	// HeadSHA is the pull request head commit; empty for issues.
	HeadSHA string `json:"headSHA,omitempty"`
}

// SameItem reports whether t and o name the same issue or pull request
// (repository, kind and number), ignoring the head.
func (t Target) SameItem(o Target) bool {
	return sameRepository(t.Repository, o.Repository) && t.Kind == o.Kind && t.Number == o.Number
}

// Identical reports whether t and o are the same target including the head
// commit: the equality the no-substitution clause demands.
func (t Target) Identical(o Target) bool {
	return t.SameItem(o) && sameSHA(t.HeadSHA, o.HeadSHA)
}

// DependencyEdge is one Gitea issue dependency of the target: the target is
// blocked by the referenced issue while that issue is not closed.
type DependencyEdge struct {
	// Repository is the "owner/name" of the blocking issue.
	Repository string `json:"repository"`
	// Number is the blocking issue's number.
	Number int64 `json:"number"`
	// State is the blocking issue's state; anything but "closed" gates.
	State string `json:"state"`
}

// ClaimRecord is the authoritative claim published in Gitea for a target.
type ClaimRecord struct {
	// ClaimID identifies the claim (the TaskClaim that published it).
	ClaimID string `json:"claimID"`
	// Worker is the registration name of the claiming worker.
	Worker string `json:"worker"`
	// Identity is the Gitea identity of the claiming worker.
	Identity string `json:"identity"`
	// ExpiresAt is when the record stops being in force.
	ExpiresAt time.Time `json:"expiresAt"`
	// State is one of the RecordState constants.
	State string `json:"state"`
}

// InForce reports whether the record still claims its target at now. A record
// is in force unless its state is a known ending state or its expiry has
// passed; unknown states count as in force so that doubt never frees a target.
func (r *ClaimRecord) InForce(now time.Time) bool {
	if r == nil {
		return false
	}
	switch norm(r.State) {
	case RecordStateReleased, RecordStateCompleted, RecordStateExpired, RecordStateRevoked:
		return false
	}
	if !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt) {
		return false
	}
	return true
}

// TargetState is everything the decisions need to know about a target, as
// read from Gitea and from the per-target Lease by the reconciler.
type TargetState struct {
	// Target is the item that was actually read, including its current head.
	Target Target `json:"target"`
	// State is "open" or "closed".
	State string `json:"state"`
	// Merged is true for a merged pull request.
	Merged bool `json:"merged"`
	// Author is the identity that opened the issue or pull request.
	Author string `json:"author"`
	// Pushers are the identities that authored or committed any commit of the
	// pull request, plus the identity of the last push.
	Pushers []string `json:"pushers,omitempty"`
	// Reviewed is true when at least one non-approving review was submitted.
	Reviewed bool `json:"reviewed"`
	// Approved is true when an approval is in force.
	Approved bool `json:"approved"`
	// Labels are the target's label names.
	Labels []string `json:"labels,omitempty"`
	// Assignees are the identities the target is assigned to.
	Assignees []string `json:"assignees,omitempty"`
	// Dependencies are the issues the target depends on.
	Dependencies []DependencyEdge `json:"dependencies,omitempty"`
	// ParityRevision is the head commit of the base (default) branch.
	ParityRevision string `json:"parityRevision"`
	// ClaimRecord is the claim record currently published in Gitea, if any.
	ClaimRecord *ClaimRecord `json:"claimRecord,omitempty"`
	// LeaseGeneration is the resourceVersion of the per-target Lease; "" when
	// the Lease does not exist yet.
	LeaseGeneration string `json:"leaseGeneration"`
	// LeaseHolder is the claim ID recorded as the Lease holder; "" when free.
	LeaseHolder string `json:"leaseHolder"`
	// LeaseExpiresAt is when the holder's lease lapses (renew time plus
	// duration). Zero means no expiry is known and the holder counts as
	// holding.
	LeaseExpiresAt time.Time `json:"leaseExpiresAt"`
}

// Worker is the part of a WorkerRegistration the decisions use.
type Worker struct {
	// Name is the registration's name.
	Name string `json:"name"`
	// Identity is the Gitea identity the worker acts as.
	Identity string `json:"identity"`
	// Repository is the "owner/name" repository the worker is bound to.
	Repository string `json:"repository"`
	// Phase is Active or Retired.
	Phase string `json:"phase"`
	// OwnershipState is live, stale or historical.
	OwnershipState string `json:"ownershipState"`
}

// norm trims and lower-cases a free-form value read from Gitea.
func norm(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// sameIdentity compares Gitea identities, which are case-insensitive. Empty
// identities never match anything.
func sameIdentity(a, b string) bool {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	return a != "" && strings.EqualFold(a, b)
}

// sameRepository compares "owner/name" values, which Gitea treats
// case-insensitively. Empty values never match.
func sameRepository(a, b string) bool { return sameIdentity(a, b) }

// sameSHA compares commit ids case-insensitively; two empty values match
// (issues carry no head).
func sameSHA(a, b string) bool {
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}

// containsIdentity reports whether list holds id.
func containsIdentity(list []string, id string) bool {
	for _, x := range list {
		if sameIdentity(x, id) {
			return true
		}
	}
	return false
}
