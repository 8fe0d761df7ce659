package giteaclaim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// Published is a record Gitea holds, as read back after a guarded write.
type Published struct {
	// Record is the record in force, parsed from the body Gitea returned.
	Record claim.Record
	// ContentVersion is the issue's content_version at the read-back.
	ContentVersion int64
}

// casPatch is the whole body of the guarded PATCH: Gitea only enforces the
// version when nothing else is being edited, so no other field is sent.
type casPatch struct {
	Body           string `json:"body"`
	ContentVersion int64  `json:"content_version"`
}

// Read returns the claim record in the target's body (nil when there is none)
// and the content_version it was read at. A malformed block is an error
// wrapping ErrMalformedRecord.
func (c *Client) Read(ctx context.Context, t claim.Target) (*claim.Record, int64, error) {
	is, err := c.readIssue(ctx, t)
	if err != nil {
		return nil, 0, err
	}
	rec, err := ParseBody(is.Body)
	if err != nil {
		return nil, *is.ContentVersion, fmt.Errorf("%s: %w", t, err)
	}
	return rec, *is.ContentVersion, nil
}

// Publish makes rec the claim in force on t. It reads the issue, refuses with
// ErrForeignClaim when another claim is in force or the issue is assigned to
// someone other than rec.Identity, writes the block guarded by the
// content_version it read (ErrConflict when that write loses), and reads the
// issue back; only when the record in force is exactly rec does it succeed.
// rec must describe t (its repository, kind and number; the head is not
// compared); an empty State means [claim.RecordStateActive], any other
// non-active state is refused. Publishing the record already in force again
// (same claim, same fields) succeeds without a write, and the holder may
// rewrite its own in-force record (for example to extend ExpiresAt); a claim
// that has ended or lapsed is not revived under the same ClaimID
// (ErrNotInForce).
func (c *Client) Publish(ctx context.Context, t claim.Target, rec claim.Record) (Published, error) {
	if rec.State == "" {
		rec.State = claim.RecordStateActive
	}
	rec = normalized(rec)
	if err := validateRecord(rec); err != nil {
		return Published{}, err
	}
	if rec.State != claim.RecordStateActive {
		return Published{}, fmt.Errorf("%w: cannot publish a record in state %q", ErrInvalidArgument, rec.State)
	}
	if rec.Target() != itemOf(t) {
		return Published{}, fmt.Errorf("%w: record is about %s, not %s", ErrInvalidArgument, rec.Target(), t)
	}
	if !c.now().Before(rec.ExpiresAt) {
		return Published{}, fmt.Errorf("%w: record expiresAt %s is not in the future", ErrInvalidArgument,
			rec.ExpiresAt.Format(timeLayout))
	}

	is, err := c.readIssue(ctx, t)
	if err != nil {
		return Published{}, err
	}
	version := *is.ContentVersion
	current, err := ParseBody(is.Body)
	if err != nil {
		return Published{}, fmt.Errorf("%s: %w", t, err)
	}
	now := c.now()
	if current != nil && current.ClaimID == rec.ClaimID && !current.InForce(now) {
		// A claim that has ended or lapsed is never revived under the same
		// ID: a new attempt needs fresh validation and a new claim.
		return Published{}, &NotInForceError{Target: t, ClaimID: rec.ClaimID, Found: current, ContentVersion: version}
	}
	foreign := &ForeignClaimError{Target: t}
	if current != nil && current.InForce(now) && current.ClaimID != rec.ClaimID {
		foreign.Holder = current
	}
	for _, a := range is.assigneeLogins() {
		if !strings.EqualFold(a, rec.Identity) {
			foreign.Assignees = append(foreign.Assignees, a)
		}
	}
	if foreign.Holder != nil || len(foreign.Assignees) > 0 {
		return Published{}, foreign
	}
	if c.afterRead != nil {
		c.afterRead(version)
	}

	if current != nil && sameRecord(*current, rec) {
		return c.verify(ctx, t, rec)
	}
	return c.write(ctx, t, is.Body, version, rec)
}

// Clear ends the claim claimID on t by rewriting its record with the final
// state (released, completed, expired or revoked), guarded by content_version.
// It refuses with ErrNotInForce unless the body holds claimID in state active
// (its expiry time may have passed: only the holder or the controller ends a
// claim explicitly). Clearing a record that already carries final succeeds
// without a write, so a repeated Clear is harmless.
func (c *Client) Clear(ctx context.Context, t claim.Target, claimID string, final claim.RecordState) (Published, error) {
	if claimID == "" {
		return Published{}, fmt.Errorf("%w: claimID is empty", ErrInvalidArgument)
	}
	if !final.Final() {
		return Published{}, fmt.Errorf("%w: %q is not a final claim state", ErrInvalidArgument, final)
	}
	is, err := c.readIssue(ctx, t)
	if err != nil {
		return Published{}, err
	}
	version := *is.ContentVersion
	current, err := ParseBody(is.Body)
	if err != nil {
		return Published{}, fmt.Errorf("%s: %w", t, err)
	}
	if current == nil || current.ClaimID != claimID {
		return Published{}, &NotInForceError{Target: t, ClaimID: claimID, Found: current, ContentVersion: version}
	}
	switch current.State {
	case final:
		return Published{Record: *current, ContentVersion: version}, nil
	case claim.RecordStateActive:
	default:
		return Published{}, &NotInForceError{Target: t, ClaimID: claimID, Found: current, ContentVersion: version}
	}
	next := *current
	next.State = final
	return c.write(ctx, t, is.Body, version, next)
}

// write puts rec into body, writes it guarded by version, and verifies the result.
func (c *Client) write(ctx context.Context, t claim.Target, body string, version int64, rec claim.Record) (Published, error) {
	body, err := WithRecord(body, rec)
	if err != nil {
		return Published{}, fmt.Errorf("%s: %w", t, err)
	}
	if err := c.patchBody(ctx, t, body, version); err != nil {
		return Published{}, err
	}
	return c.verify(ctx, t, rec)
}

// patchBody performs the guarded body write.
func (c *Client) patchBody(ctx context.Context, t claim.Target, body string, version int64) error {
	owner, name, err := validateTarget(t)
	if err != nil {
		return err
	}
	err = c.doJSON(ctx, http.MethodPatch, issuePath(owner, name, t.Number),
		casPatch{Body: body, ContentVersion: version}, nil)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrConflict):
		return fmt.Errorf("writing %s: %w", t, &ConflictError{Target: t, ContentVersion: version})
	case isTransport(err):
		return fmt.Errorf("writing %s: %w: %w", t, ErrUnverified, err)
	default:
		return fmt.Errorf("writing %s: %w", t, err)
	}
}

// verify reads the target back and proves that want is the record Gitea
// holds. A record in a final state is compared as-is (it is not "in force"
// but it must be the one written).
func (c *Client) verify(ctx context.Context, t claim.Target, want claim.Record) (Published, error) {
	is, err := c.readIssue(ctx, t)
	if err != nil {
		if isTransport(err) {
			return Published{}, fmt.Errorf("reading back %s: %w: %w", t, ErrUnverified, err)
		}
		return Published{}, fmt.Errorf("reading back %s: %w", t, err)
	}
	version := *is.ContentVersion
	got, err := ParseBody(is.Body)
	if err != nil {
		return Published{}, fmt.Errorf("reading back %s: %w", t, err)
	}
	if got == nil || !sameRecord(*got, want) || (want.State == claim.RecordStateActive && !got.InForce(c.now())) {
		return Published{}, &NotInForceError{Target: t, ClaimID: want.ClaimID, Found: got, ContentVersion: version}
	}
	if want.State == claim.RecordStateActive {
		// Assignments carry no version: one made between the read and the write is only
		// visible now, and an issue assigned to someone else is not ours to hold.
		foreign := &ForeignClaimError{Target: t}
		for _, a := range is.assigneeLogins() {
			if !strings.EqualFold(a, want.Identity) {
				foreign.Assignees = append(foreign.Assignees, a)
			}
		}
		if len(foreign.Assignees) > 0 {
			return Published{}, foreign
		}
	}
	return Published{Record: *got, ContentVersion: version}, nil
}
