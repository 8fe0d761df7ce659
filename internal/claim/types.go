package claim

import (
	"fmt"
	"strings"
	"time"
	"unicode"
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

// VerdictAllowed is the only capability verdict (e.g. from a SubjectAccessReview)
// under which a worker may validate or claim.
const VerdictAllowed = "allowed"

// RecordState is the lifecycle state written in a claim record.
type RecordState string

// Claim record states. Only RecordStateActive is in force; the others end a record.
const (
	// RecordStateActive is a claim record in force (until its ExpiresAt).
	RecordStateActive RecordState = "active"
	// RecordStateReleased is a record ended by release.
	RecordStateReleased RecordState = "released"
	// RecordStateCompleted is a record ended by cycle completion.
	RecordStateCompleted RecordState = "completed"
	// RecordStateExpired is a record ended by expiry.
	RecordStateExpired RecordState = "expired"
	// RecordStateRevoked is a record ended by revocation (block, failed validation,
	// stale state, ownership loss).
	RecordStateRevoked RecordState = "revoked"
)

// Final reports whether s ends a claim (every known state but active).
func (s RecordState) Final() bool {
	switch s {
	case RecordStateReleased, RecordStateCompleted, RecordStateExpired, RecordStateRevoked:
		return true
	}
	return false
}

// Known reports whether s is one of the record states.
func (s RecordState) Known() bool { return s == RecordStateActive || s.Final() }

// LabelBlocked is the Gitea label that marks a target as blocked.
const LabelBlocked = "blocked"

// Valid reports whether k is one of the known kinds.
func (k Kind) Valid() bool { return k == KindIssue || k == KindPullRequest }

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

// String renders the target as owner/name#number (kind).
func (t Target) String() string {
	return fmt.Sprintf("%s#%d (%s)", t.Repository, t.Number, t.Kind)
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
	// PullRequest is true when the blocking item is a pull request.
	PullRequest bool `json:"pullRequest,omitempty"`
}

// Review states as Gitea reports them.
const (
	// ReviewApproved approves the pull request.
	ReviewApproved = "APPROVED"
	// ReviewRequestChanges asks for changes.
	ReviewRequestChanges = "REQUEST_CHANGES"
	// ReviewComment comments without a verdict.
	ReviewComment = "COMMENT"
)

// Review is one submitted pull request review.
type Review struct {
	// ID is Gitea's review id.
	ID int64 `json:"id"`
	// Reviewer is the reviewer's identity.
	Reviewer string `json:"reviewer"`
	// State is ReviewApproved, ReviewRequestChanges or ReviewComment.
	State string `json:"state"`
	// CommitID is the head commit the review was made on.
	CommitID string `json:"commitID"`
	// Stale is true when the pull request head moved after the review.
	Stale bool `json:"stale,omitempty"`
	// Dismissed is true when the review was dismissed.
	Dismissed bool `json:"dismissed,omitempty"`
	// Official is true when the review counts towards required approvals.
	Official bool `json:"official,omitempty"`
}

// PullReference is a pull request that references an issue, as Gitea's
// cross-reference records it on the issue.
type PullReference struct {
	// Repository is the "owner/name" of the referencing pull request.
	Repository string `json:"repository"`
	// Number is the referencing pull request's number.
	Number int64 `json:"number"`
	// Author is the identity that opened the referencing pull request.
	Author string `json:"author"`
	// CreatedAt is when the referencing pull request was opened.
	CreatedAt time.Time `json:"createdAt"`
}

// Record is the authoritative claim published in Gitea for a target. Its JSON form is
// the record as stored (see internal/giteaclaim); times are UTC with second precision.
type Record struct {
	// ClaimID identifies the claim (the TaskClaim's UID); it tells "ours" from "foreign".
	ClaimID string `json:"claimID"`
	// Worker is the registration name of the claiming worker.
	Worker string `json:"worker"`
	// Identity is the Gitea identity of the claiming worker.
	Identity string `json:"identity"`
	// Role is the task role derived for the claim.
	Role string `json:"role"`
	// Repository is the canonical "owner/name" of the target.
	Repository string `json:"repository"`
	// Kind is the target kind.
	Kind Kind `json:"kind"`
	// Number is the target number.
	Number int64 `json:"number"`
	// HeadSHA is the pull request head the claim was validated against (empty for
	// issues).
	HeadSHA string `json:"headSHA,omitempty"`
	// Generation is the lock generation the claim was acquired at (the per-target
	// Lease's resourceVersion).
	Generation string `json:"generation"`
	// Pin is the validation pin the claim was made with.
	Pin string `json:"pin"`
	// State is the record's lifecycle state.
	State RecordState `json:"state"`
	// ClaimedAt is when the claim was acquired.
	ClaimedAt time.Time `json:"claimedAt"`
	// ExpiresAt is when the record stops being in force on its own.
	ExpiresAt time.Time `json:"expiresAt"`
	// RuleSet is the digest of the rule set the claim was decided under
	// ([RuleSetDigest] at the time); empty only in records written before
	// records carried it.
	RuleSet string `json:"ruleSet,omitempty"`
}

// Target is the item the record claims (without a head).
func (r *Record) Target() Target {
	return Target{Repository: r.Repository, Kind: r.Kind, Number: r.Number}
}

// InForce reports whether the record still claims its target at now. A record
// is in force unless its state is a known ending state or its expiry has
// passed; unknown states count as in force so that doubt never frees a target.
func (r *Record) InForce(now time.Time) bool {
	if r == nil {
		return false
	}
	if RecordState(norm(string(r.State))).Final() {
		return false
	}
	if !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt) {
		return false
	}
	return true
}

// Missing is why a requested item could not be read at all.
type Missing string

const (
	// MissingNone: the item was read (or the read failed for another reason).
	MissingNone Missing = ""
	// MissingNotFound: Gitea has no issue or pull request under the number.
	MissingNotFound Missing = "not_found"
	// MissingOtherKind: Gitea holds the other kind (issue or pull request) there.
	MissingOtherKind Missing = "other_kind"
)

// TargetState is everything the decisions need to know about a target, as
// read from Gitea and from the per-target Lease by the reconciler.
type TargetState struct {
	// Missing says why there is no item to describe: Gitea has nothing under the
	// requested number, or holds the other kind there. Every field read from Gitea is
	// then empty.
	Missing Missing `json:"missing,omitempty"`
	// Target is the item that was actually read, including its current head.
	Target Target `json:"target"`
	// State is "open" or "closed".
	State string `json:"state"`
	// Merged is true for a merged pull request.
	Merged bool `json:"merged"`
	// MergedBy is the identity that merged a merged pull request ("" otherwise).
	MergedBy string `json:"mergedBy,omitempty"`
	// MergeCommit is the commit a merged pull request was merged as ("" otherwise).
	MergeCommit string `json:"mergeCommit,omitempty"`
	// Author is the identity that opened the issue or pull request.
	Author string `json:"author"`
	// Draft is true for a pull request marked as work in progress.
	Draft bool `json:"draft,omitempty"`
	// HeadBranch is the pull request's head branch (empty for issues).
	HeadBranch string `json:"headBranch,omitempty"`
	// BaseBranch is the branch a pull request targets; for an issue, the
	// repository's default branch.
	BaseBranch string `json:"baseBranch,omitempty"`
	// Pushers are every identity with a hand in the pull request's commits:
	// the identity that opened it, every account Gitea recorded pushing to it
	// (its pull_push timeline events), and the accounts behind every commit's
	// author, committer and Co-authored-by trailers; sorted, unique.
	Pushers []string `json:"pushers,omitempty"`
	// UnmappedCommitEmails are commit author, committer or co-author e-mails
	// that map to no account (a Co-authored-by trailer without a readable
	// e-mail is listed as the trailer itself); sorted, unique. Nobody can
	// prove who these are, so independence cannot be shown while any exist.
	UnmappedCommitEmails []string `json:"unmappedCommitEmails,omitempty"`
	// UnattributedPushes counts Gitea push records that name no account (a
	// deleted pusher). Independence cannot be shown while any exist.
	UnattributedPushes int `json:"unattributedPushes,omitempty"`
	// ReferencingPulls are the pull requests Gitea links to an issue as
	// cross-references (a pull request whose title or body mentions "#N"),
	// in timeline order; empty for pull requests.
	ReferencingPulls []PullReference `json:"referencingPulls,omitempty"`
	// Reviews are the submitted reviews of a pull request, oldest first
	// (pending drafts and bare review requests are left out).
	Reviews []Review `json:"reviews,omitempty"`
	// Reviewed is true when at least one non-approving review was submitted.
	Reviewed bool `json:"reviewed"`
	// Approved is true when an approval is in force (neither dismissed nor
	// made on an older head).
	Approved bool `json:"approved"`
	// ChangesRequested is true when a change request is neither dismissed
	// nor stale.
	ChangesRequested bool `json:"changesRequested,omitempty"`
	// Labels are the target's label names.
	Labels []string `json:"labels,omitempty"`
	// Assignees are the identities the target is assigned to.
	Assignees []string `json:"assignees,omitempty"`
	// Dependencies are the issues the target depends on.
	Dependencies []DependencyEdge `json:"dependencies,omitempty"`
	// ParityRevision is the head commit of the base (default) branch.
	ParityRevision string `json:"parityRevision"`
	// ParityParents are the parents of the ParityRevision commit. They are
	// read only for an open, approved pull request (the merger's target),
	// where a base head whose parents include the pull request's head is a
	// merge that Gitea has pushed but not yet recorded as merged.
	ParityParents []string `json:"parityParents,omitempty"`
	// ClaimRecord is the claim record currently published in Gitea, if any.
	ClaimRecord *Record `json:"claimRecord,omitempty"`
	// RecordVersion is the version of the storage that holds the record (the
	// issue's content_version in Gitea) at the time of the read. A guarded
	// write of the record fails when it moved since.
	RecordVersion int64 `json:"recordVersion,omitempty"`
	// RecordBody is the text that holds the record (the issue body) at
	// RecordVersion. A guarded write of the record replaces the record inside
	// it, so a claim can write over exactly what its decision read. It is not
	// part of any decision and not serialised.
	RecordBody string `json:"-"`
	// Title is the issue's or pull request's title at the read.
	Title string `json:"-"`
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
	// Phase is Active or Retired (fleet.Active, fleet.Retired).
	Phase string `json:"phase"`
	// OwnershipState is live, stale or historical (fleet.Live, …).
	OwnershipState string `json:"ownershipState"`
}

// norm trims and lower-cases a free-form value read from Gitea.
func norm(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// sameIdentity compares Gitea identities, which are case-insensitive. Empty
// identities never match anything.
// IdentityKey is identity in the form two identities sameIdentity takes for one share:
// trimmed, and each letter replaced by one fixed member of its simple case-folding class
// (the one strings.EqualFold matches by), lower case where the class has one. Claims
// record it so that the claims of one identity can be selected by exact match.
func IdentityKey(identity string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return unicode.ToLower(least)
	}, strings.TrimSpace(identity))
}

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
