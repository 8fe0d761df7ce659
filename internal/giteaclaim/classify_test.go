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
	}{
		{"lost guarded write", wrap(&ConflictError{}), false, false, claim.PublishConflict},
		{"foreign record", wrap(&ForeignClaimError{Holder: &claim.Record{ClaimID: "other"}}), false, false, claim.PublishForeign},
		{"foreign record and assignee", wrap(&ForeignClaimError{Holder: &claim.Record{ClaimID: "other"}, Assignees: []string{"x"}}), false, false, claim.PublishForeign},
		{"foreign assignee only", wrap(&ForeignClaimError{Assignees: []string{"someone"}}), false, false, claim.PublishAssigneeForeign},
		{"foreign, nothing named", wrap(&ForeignClaimError{}), false, false, claim.PublishForeign},
		{"read-back shows another record", wrap(&NotInForceError{}), false, true, claim.PublishForeign},
		{"target gone", wrap(ErrNotFound), true, true, claim.PublishUnavailable},
		{"kind mismatch", wrap(ErrKindMismatch), true, true, claim.PublishUnavailable},
		{"malformed record", wrap(ErrMalformedRecord), true, true, claim.PublishUnavailable},
		{"unverified write", wrap(ErrUnverified), false, false, claim.PublishUnavailable},
		{"transport failure", errors.New("connection refused"), false, false, claim.PublishUnavailable},
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
	}
}
