package giteaclaim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// timeLayout is how times appear in records, audit blocks and messages.
const timeLayout = time.RFC3339

// Kind is the kind of Gitea item a claim targets.
type Kind string

const (
	// KindIssue is a plain issue.
	KindIssue Kind = "Issue"
	// KindPullRequest is a pull request.
	KindPullRequest Kind = "PullRequest"
)

// Valid reports whether k is one of the known kinds.
func (k Kind) Valid() bool { return k == KindIssue || k == KindPullRequest }

// Target identifies one issue or pull request.
type Target struct {
	// Repository is the canonical "owner/name".
	Repository string
	// Kind says whether Number is an issue or a pull request.
	Kind Kind
	// Number is the issue or pull request number.
	Number int64
}

// String renders the target as owner/name#number (kind).
func (t Target) String() string {
	return fmt.Sprintf("%s#%d (%s)", t.Repository, t.Number, t.Kind)
}

// validate checks the target's shape and splits the repository.
func (t Target) validate() (owner, name string, err error) {
	owner, name, err = splitRepo(t.Repository)
	if err != nil {
		return "", "", err
	}
	if !t.Kind.Valid() {
		return "", "", fmt.Errorf("%w: target kind %q is neither %s nor %s", ErrInvalidArgument, t.Kind, KindIssue, KindPullRequest)
	}
	if t.Number <= 0 {
		return "", "", fmt.Errorf("%w: target number %d must be positive", ErrInvalidArgument, t.Number)
	}
	return owner, name, nil
}

// splitRepo splits "owner/name".
func splitRepo(repo string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%w: repository %q is not owner/name", ErrInvalidArgument, repo)
	}
	return owner, name, nil
}

// State is the lifecycle state stored in a claim record.
type State string

const (
	// StateActive: the claim holds the target until ExpiresAt.
	StateActive State = "active"
	// StateReleased: the holder gave the claim up.
	StateReleased State = "released"
	// StateCompleted: the work cycle finished.
	StateCompleted State = "completed"
	// StateExpired: the claim ran out of time.
	StateExpired State = "expired"
	// StateRevoked: the claim was taken away (block, failed validation, stale
	// state, ownership loss).
	StateRevoked State = "revoked"
)

// Final reports whether s ends a claim (every known state but active).
func (s State) Final() bool {
	switch s {
	case StateReleased, StateCompleted, StateExpired, StateRevoked:
		return true
	}
	return false
}

// Record is the claim record stored in the issue body. Times are kept in UTC
// with second precision so that what is written reads back identically.
type Record struct {
	// ClaimID identifies the claim (for example the TaskClaim's UID); it is
	// what tells "ours" from "foreign".
	ClaimID string `json:"claimID"`
	// Worker is the worker registration that holds the claim.
	Worker string `json:"worker"`
	// Identity is the Gitea login the worker acts as.
	Identity string `json:"identity"`
	// Role is the task role derived for this claim (author, reviewer, …).
	Role string `json:"role"`
	// Repository is the canonical "owner/name" of the target.
	Repository string `json:"repository"`
	// Kind is the target kind.
	Kind Kind `json:"kind"`
	// Number is the target number.
	Number int64 `json:"number"`
	// HeadSHA is the pull request head the claim was validated against
	// (empty for issues).
	HeadSHA string `json:"headSHA,omitempty"`
	// Generation is the lock generation the claim was acquired at (the
	// per-target lock's resourceVersion).
	Generation string `json:"generation"`
	// Pin is the validation pin (fingerprint) the claim was made with.
	Pin string `json:"pin"`
	// State is the lifecycle state.
	State State `json:"state"`
	// ClaimedAt is when the claim was acquired.
	ClaimedAt time.Time `json:"claimedAt"`
	// ExpiresAt is when the claim stops being in force on its own.
	ExpiresAt time.Time `json:"expiresAt"`
}

// Target returns the target the record is about.
func (r Record) Target() Target {
	return Target{Repository: r.Repository, Kind: r.Kind, Number: r.Number}
}

// InForce reports whether the record holds its target at now.
func (r Record) InForce(now time.Time) bool {
	return r.State == StateActive && now.Before(r.ExpiresAt)
}

// normalized returns r with times in UTC truncated to the second.
func (r Record) normalized() Record {
	r.ClaimedAt = r.ClaimedAt.UTC().Truncate(time.Second)
	r.ExpiresAt = r.ExpiresAt.UTC().Truncate(time.Second)
	return r
}

// validate checks that a record is complete and internally consistent.
func (r Record) validate() error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"claimID", r.ClaimID}, {"worker", r.Worker}, {"identity", r.Identity},
		{"role", r.Role}, {"repository", r.Repository},
	} {
		if strings.TrimSpace(f.v) == "" {
			missing = append(missing, f.name)
		}
	}
	if r.ClaimedAt.IsZero() {
		missing = append(missing, "claimedAt")
	}
	if r.ExpiresAt.IsZero() {
		missing = append(missing, "expiresAt")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: record lacks %s", ErrInvalidArgument, strings.Join(missing, ", "))
	}
	for _, v := range []string{r.ClaimID, r.Worker, r.Identity, r.Role, r.Repository, r.HeadSHA, r.Generation, r.Pin} {
		if !utf8.ValidString(v) {
			// JSON would rewrite the bytes, so the record could never read back as written.
			return fmt.Errorf("%w: record field %q is not valid UTF-8", ErrInvalidArgument, v)
		}
	}
	if _, _, err := r.Target().validate(); err != nil {
		return err
	}
	if r.State != StateActive && !r.State.Final() {
		return fmt.Errorf("%w: record state %q is unknown", ErrInvalidArgument, r.State)
	}
	if !r.ExpiresAt.After(r.ClaimedAt) {
		return fmt.Errorf("%w: record expiresAt %s is not after claimedAt %s", ErrInvalidArgument,
			r.ExpiresAt.Format(timeLayout), r.ClaimedAt.Format(timeLayout))
	}
	return nil
}

// sameAs compares two records field by field after normalisation.
func (r Record) sameAs(o Record) bool {
	a, errA := json.Marshal(r.normalized())
	b, errB := json.Marshal(o.normalized())
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// Markers of the machine-readable blocks. The JSON inside never contains
// "-->" because encoding/json escapes '>' as \u003e.
const (
	recordOpen  = "<!-- fleet-claim:v1 "
	auditOpen   = "<!-- fleet-claim-audit:v1 "
	blockClose  = " -->"
	blockJoiner = "\n\n"
)

// blockSpan locates the single block opened by open in text. It returns
// found=false when there is none and an error when there are several or the
// block is not terminated.
func blockSpan(text, open string) (start, end int, payload string, found bool, err error) {
	start = strings.Index(text, open)
	if start < 0 {
		return 0, 0, "", false, nil
	}
	if strings.Contains(text[start+len(open):], open) {
		return 0, 0, "", false, fmt.Errorf("%w: more than one %q block", ErrMalformedRecord, strings.TrimSpace(open))
	}
	rel := strings.Index(text[start+len(open):], blockClose)
	if rel < 0 {
		return 0, 0, "", false, fmt.Errorf("%w: unterminated %q block", ErrMalformedRecord, strings.TrimSpace(open))
	}
	payloadStart := start + len(open)
	end = payloadStart + rel + len(blockClose)
	return start, end, text[payloadStart : payloadStart+rel], true, nil
}

// ParseBody extracts the claim record from an issue body. It returns nil when
// the body holds no claim block, and an error wrapping ErrMalformedRecord when
// the block is unreadable, incomplete or repeated.
func ParseBody(body string) (*Record, error) {
	_, _, payload, found, err := blockSpan(body, recordOpen)
	if err != nil || !found {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal([]byte(payload), &r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	r = r.normalized()
	return &r, nil
}

// encodeBlock renders the block line for a record.
func encodeBlock(open string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encoding %s block: %w", strings.TrimSpace(open), err)
	}
	return open + string(b) + blockClose, nil
}

// WithRecord returns body carrying r as its claim block: an existing block is
// replaced in place, otherwise the block is appended after a blank line. All
// other bytes of body are kept. StripRecord undoes an append exactly.
func WithRecord(body string, r Record) (string, error) {
	block, err := encodeBlock(recordOpen, r.normalized())
	if err != nil {
		return "", err
	}
	start, end, _, found, err := blockSpan(body, recordOpen)
	if err != nil {
		return "", err
	}
	if found {
		return body[:start] + block + body[end:], nil
	}
	if body == "" {
		return block, nil
	}
	return body + blockJoiner + block, nil
}

// StripRecord removes the claim block, together with the blank line WithRecord
// put in front of it, and returns the rest of the body unchanged.
func StripRecord(body string) (string, error) {
	start, end, _, found, err := blockSpan(body, recordOpen)
	if err != nil || !found {
		return body, err
	}
	if strings.HasSuffix(body[:start], blockJoiner) {
		start -= len(blockJoiner)
	}
	return body[:start] + body[end:], nil
}
