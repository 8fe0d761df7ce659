package giteaclaim

import (
	"errors"
	"fmt"
	"testing"

	"github.com/giteatools/fleet-controller/internal/claim"
)

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("publishing: %w", err) }
	tests := []struct {
		name        string
		err         error
		unreadable  bool
		nothing     bool
		publication claim.PublishFailure
		missing     claim.Missing
	}{
		{"lost guarded write", wrap(&ConflictError{}), false, false, claim.PublishConflict, claim.MissingNone},
		{"foreign record", wrap(&ForeignClaimError{Holder: &claim.Record{ClaimID: "other"}}), false, false, claim.PublishForeign, claim.MissingNone},
		{"foreign record and assignee", wrap(&ForeignClaimError{Holder: &claim.Record{ClaimID: "other"}, Assignees: []string{"x"}}), false, false, claim.PublishForeign, claim.MissingNone},
		{"foreign assignee only", wrap(&ForeignClaimError{Assignees: []string{"someone"}}), false, false, claim.PublishAssigneeForeign, claim.MissingNone},
		{"foreign, nothing named", wrap(&ForeignClaimError{}), false, false, claim.PublishForeign, claim.MissingNone},
		{"read-back shows another record", wrap(&NotInForceError{}), false, true, claim.PublishForeign, claim.MissingNone},
		{"target gone", wrap(fmt.Errorf("%w: %w", ErrNoSuchItem, ErrNotFound)), true, true, claim.PublishUnavailable, claim.MissingNotFound},
		{"another read's 404", wrap(ErrNotFound), true, true, claim.PublishUnavailable, claim.MissingNone},
		{"kind mismatch", wrap(ErrKindMismatch), true, true, claim.PublishUnavailable, claim.MissingOtherKind},
		{"malformed record", wrap(ErrMalformedRecord), true, true, claim.PublishUnavailable, claim.MissingNone},
		{"unverified write", wrap(ErrUnverified), false, false, claim.PublishUnavailable, claim.MissingNone},
		{"transport failure", errors.New("connection refused"), false, false, claim.PublishUnavailable, claim.MissingNone},
	}
	for _, tt := range tests {
		if got := Unreadable(tt.err); got != tt.unreadable {
			t.Errorf("%s: Unreadable = %v, want %v", tt.name, got, tt.unreadable)
		}
		if got := NothingToEnd(tt.err); got != tt.nothing {
			t.Errorf("%s: NothingToEnd = %v, want %v", tt.name, got, tt.nothing)
		}
		if got := PublishFailureOf(tt.err); got != tt.publication {
			t.Errorf("%s: PublishFailureOf = %s, want %s", tt.name, got, tt.publication)
		}
		if got := MissingOf(tt.err); got != tt.missing {
			t.Errorf("%s: MissingOf = %q, want %q", tt.name, got, tt.missing)
		}
	}
}
