package giteaclaim

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// Sentinel errors. Every error returned by this package that belongs to one of
// these classes matches it with errors.Is; the richer types below carry the
// details and are reachable with errors.As.
var (
	// ErrForeignClaim: another claim is in force on the target, or the target
	// is assigned to an identity other than the record's. See ForeignClaimError.
	ErrForeignClaim = errors.New("target is held by another claim")
	// ErrConflict: the issue body changed between the read and the guarded
	// write (Gitea answered 409 to the content_version). Contention is a normal
	// outcome: read fresh state and decide again. See ConflictError.
	ErrConflict = errors.New("issue body changed concurrently (stale content_version)")
	// ErrNotInForce: after a write, or for a Clear, the record in force is not
	// the caller's. See NotInForceError.
	ErrNotInForce = errors.New("claim record in force is not the expected one")
	// ErrUnverified: a write may or may not have landed (transport failure
	// during the write or during the read-back). The claim must be treated as
	// not acquired; a later Read or Clear settles what Gitea holds.
	ErrUnverified = errors.New("claim write could not be verified")
	// ErrMalformedRecord: the issue body holds a claim block that cannot be
	// parsed or holds more than one. Publishing fails closed on such a body.
	ErrMalformedRecord = errors.New("malformed claim record in issue body")
	// ErrKindMismatch: the target names an issue but Gitea has a pull request
	// under that number, or the other way round.
	ErrKindMismatch = errors.New("target kind does not match the Gitea item")
	// ErrInvalidArgument: the caller passed an incomplete or inconsistent
	// target, record or transition; nothing was sent to Gitea.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnsupportedServer: Gitea did not return content_version, so it cannot
	// guard the body write; nothing was written.
	ErrUnsupportedServer = errors.New("gitea server does not expose content_version")
	// ErrNoSuchItem: Gitea has no issue or pull request under the target's number (its
	// read answered 404). The error wraps ErrNotFound too.
	ErrNoSuchItem = errors.New("no issue or pull request under that number")
	// ErrNotFound: Gitea answered 404 (see APIError).
	ErrNotFound = errors.New("not found")
	// ErrForbidden: Gitea answered 401 or 403 (see APIError).
	ErrForbidden = errors.New("not authorised")
)

// ForeignClaimError names what holds the target. Holder is nil when only the
// assignment is foreign.
type ForeignClaimError struct {
	// Target is the target the caller asked for.
	Target claim.Target
	// Holder is the in-force record of another claim, if any.
	Holder *claim.Record
	// Assignees are the assignees other than the record's identity.
	Assignees []string
}

// Error implements error.
func (e *ForeignClaimError) Error() string {
	var parts []string
	if e.Holder != nil {
		parts = append(parts, fmt.Sprintf("claim %q of %s until %s", e.Holder.ClaimID,
			e.Holder.Identity, e.Holder.ExpiresAt.Format(timeLayout)))
	}
	if len(e.Assignees) > 0 {
		parts = append(parts, "assigned to "+strings.Join(e.Assignees, ", "))
	}
	return fmt.Sprintf("%s: %s: %s", e.Target, ErrForeignClaim, strings.Join(parts, "; "))
}

// Is reports a match with ErrForeignClaim.
func (e *ForeignClaimError) Is(target error) bool { return target == ErrForeignClaim }

// ConflictError reports a refused guarded write.
type ConflictError struct {
	// Target is the target written.
	Target claim.Target
	// ContentVersion is the version the write was guarded by.
	ContentVersion int64
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: %s (guarded by content_version %d)", e.Target, ErrConflict, e.ContentVersion)
}

// Is reports a match with ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// NotInForceError reports which record Gitea holds instead of the expected one.
type NotInForceError struct {
	// Target is the target read.
	Target claim.Target
	// ClaimID is the claim the caller expected to be in force.
	ClaimID string
	// Found is the record present in the body (nil when there is none).
	Found *claim.Record
	// ContentVersion is the version at which Found was read.
	ContentVersion int64
}

// Error implements error.
func (e *NotInForceError) Error() string {
	found := "no claim record"
	if e.Found != nil {
		found = fmt.Sprintf("claim %q (%s, expires %s)", e.Found.ClaimID, e.Found.State,
			e.Found.ExpiresAt.Format(timeLayout))
	}
	return fmt.Sprintf("%s: %s: expected claim %q, found %s at content_version %d",
		e.Target, ErrNotInForce, e.ClaimID, found, e.ContentVersion)
}

// Is reports a match with ErrNotInForce.
func (e *NotInForceError) Is(target error) bool { return target == ErrNotInForce }

// APIError is a non-2xx answer from the Gitea API.
type APIError struct {
	// Method and Path identify the request (path below /api/v1).
	Method, Path string
	// StatusCode is the HTTP status Gitea answered.
	StatusCode int
	// Message is Gitea's error message, or the start of the response body.
	Message string
}

// Error implements error.
func (e *APIError) Error() string {
	return fmt.Sprintf("gitea %s %s: %d %s: %s", e.Method, e.Path, e.StatusCode,
		http.StatusText(e.StatusCode), e.Message)
}

// Is maps 404 to ErrNotFound, 401/403 to ErrForbidden and 409 to ErrConflict.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrForbidden:
		return e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	}
	return false
}
