package giteaclaim

import (
	"errors"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// Unreadable reports whether a ReadTarget error means the target as asked cannot be
// described: it does not exist, it is of the other kind, or its claim record is
// malformed. Such a target is refused as stale rather than retried.
func Unreadable(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrKindMismatch) || errors.Is(err, ErrMalformedRecord)
}

// MissingOf says whether a ReadTarget error means there is no item of the requested kind
// to describe: nothing under the number, or the other kind there. Such a request is
// refused for what it asks, not as stale state.
func MissingOf(err error) claim.Missing {
	switch {
	case errors.Is(err, ErrNoSuchItem):
		return claim.MissingNotFound
	case errors.Is(err, ErrKindMismatch):
		return claim.MissingOtherKind
	}
	return claim.MissingNone
}

// PublishFailureOf classifies a Publish error for the claim decision: a lost guarded
// write, another claim's record, an assignee other than the claiming identity (with no
// other claim's record in force), or anything else (nothing proven published).
func PublishFailureOf(err error) claim.PublishFailure {
	var foreign *ForeignClaimError
	switch {
	case errors.As(err, &foreign) && foreign.Holder == nil && len(foreign.Assignees) > 0:
		return claim.PublishAssigneeForeign
	case errors.Is(err, ErrConflict):
		return claim.PublishConflict
	case errors.Is(err, ErrForeignClaim), errors.Is(err, ErrNotInForce):
		return claim.PublishForeign
	}
	return claim.PublishUnavailable
}

// NothingToEnd reports whether a Read or Clear error while ending a claim means there is
// no record of this claim left to end: another claim's record, an ended one, an
// unreadable block, or a target that no longer exists. Ending must not hang on those, or
// a revoked capability would stay in status forever.
func NothingToEnd(err error) bool {
	return errors.Is(err, ErrNotInForce) || Unreadable(err)
}
