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

// casPatch is the guarded PATCH: the body, the content_version it was read at and,
// when the claim's assignment changes with the record, the whole new assignee list.
//
// Gitea 1.26's EditIssue (routers/api/v1/repo/issue.go) refuses a stale content_version
// with 409 before it edits anything, writes the body through the version-guarded
// update, and only then replaces the assignees; its answer shows both as stored. So the
// assignment costs no request of its own and never lands without the record. nil
// Assignees leaves them alone; an empty list clears them.
type casPatch struct {
	Body           string    `json:"body"`
	ContentVersion int64     `json:"content_version"`
	Assignees      *[]string `json:"assignees,omitempty"`
}

// Read returns the claim record in the target's body (nil when there is none)
// and the content_version it was read at. A malformed block is an error
// wrapping ErrMalformedRecord.
func (c *Client) Read(ctx context.Context, t claim.Target) (*claim.Record, int64, error) {
	is, err := c.readIssue(ctx, t)
	if err != nil {
		return nil, 0, err
	}
	rec, err := ParseBody(is.Body, t)
	if err != nil {
		return nil, *is.ContentVersion, fmt.Errorf("%s: %w", t, err)
	}
	return rec, *is.ContentVersion, nil
}

// PublishOption adjusts one Publish call.
type PublishOption func(*publishOptions)

type publishOptions struct {
	seen *claim.TargetState
	// assign makes the write (Publish) add the record's identity to the assignees, or
	// (Clear) remove it.
	assign bool
}

// Assigning makes the guarded write also change the target's assignment: Publish assigns
// the record's identity, Clear removes it (keeping every other assignee). The assignee
// list sent is the one read, so an assignment made by someone between that read and the
// write is replaced (assignments carry no version Gitea could guard).
func Assigning() PublishOption {
	return func(o *publishOptions) { o.assign = true }
}

// withAssignee returns the assignee list with login added (add) or removed, and whether
// it differs from assignees. Logins compare case-insensitively, as Gitea compares them.
func withAssignee(assignees []string, login string, add bool) ([]string, bool) {
	next := make([]string, 0, len(assignees)+1)
	found := false
	for _, a := range assignees {
		if strings.EqualFold(a, login) {
			found = true
			if !add {
				continue
			}
		}
		next = append(next, a)
	}
	if found == add {
		return assignees, false
	}
	if add {
		next = append(next, login)
	}
	return next, true
}

// Over makes Publish write over the issue as seen, a [Client.ReadTarget] answer taken by
// the caller's own decision, instead of reading the issue again: the guarded write
// carries seen.RecordVersion, so it lands only if the body is still exactly what the
// decision saw (any change since, by anyone, is a 409 and ErrConflict). seen must
// describe the target being published.
func Over(seen claim.TargetState) PublishOption {
	return func(o *publishOptions) { o.seen = &seen }
}

// Publish makes rec the claim in force on t. It reads the issue (or takes it from an
// [Over] option), refuses with ErrForeignClaim when another claim is in force or the
// issue is assigned to someone other than rec.Identity, and writes the block guarded by
// the content_version read (ErrConflict when that write loses). Gitea answers the
// guarded write with the issue as stored after it (see [Client.write]); only when that
// answer shows exactly rec in force, and no foreign assignee, does Publish succeed.
// rec must describe t (its repository, kind and number; the head is not compared); an
// empty State means [claim.RecordStateActive], any other non-active state is refused.
// Publishing the record already in force again (same claim, same fields) succeeds
// without a write, and the holder may rewrite its own in-force record (for example to
// extend ExpiresAt); a claim that has ended or lapsed is not revived under the same
// ClaimID (ErrNotInForce).
func (c *Client) Publish(ctx context.Context, t claim.Target, rec claim.Record, opts ...PublishOption) (Published, error) {
	var o publishOptions
	for _, opt := range opts {
		opt(&o)
	}
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

	var snap issueSnapshot
	if o.seen != nil {
		if !o.seen.Target.SameItem(t) {
			return Published{}, fmt.Errorf("%w: the state seen is of %s, not %s", ErrInvalidArgument, o.seen.Target, t)
		}
		snap = issueSnapshot{body: o.seen.RecordBody, version: o.seen.RecordVersion, assignees: o.seen.Assignees}
		// The record is parsed from the body the write goes over, not taken from the
		// caller's copy.
		var err error
		if snap.record, err = ParseBody(snap.body, t); err != nil {
			return Published{}, fmt.Errorf("%s: %w", t, err)
		}
		if (snap.record == nil) != (o.seen.ClaimRecord == nil) {
			return Published{}, fmt.Errorf("%w: the state seen and its body disagree about the record", ErrInvalidArgument)
		}
	} else {
		// model: claim.pml step C6 (read the issue; a foreign or lapsed record refuses)
		is, err := c.readIssue(ctx, t)
		if err != nil {
			return Published{}, err
		}
		if snap, err = snapshotOf(t, is); err != nil {
			return Published{}, err
		}
	}
	current, version := snap.record, snap.version
	now := c.now()
	if current != nil && current.ClaimID == rec.ClaimID && !current.InForce(now) {
		// A claim that has ended or lapsed is never revived under the same ID: a new
		// attempt needs fresh validation and a new claim.
		return Published{}, &NotInForceError{Target: t, ClaimID: rec.ClaimID, Found: current, ContentVersion: version}
	}
	foreign := &ForeignClaimError{Target: t}
	if current != nil && current.InForce(now) && current.ClaimID != rec.ClaimID {
		foreign.Holder = current
	}
	foreign.Assignees = foreignAssignees(snap.assignees, rec.Identity)
	if foreign.Holder != nil || len(foreign.Assignees) > 0 {
		return Published{}, foreign
	}
	if c.afterRead != nil {
		c.afterRead(version)
	}

	var assignees *[]string
	if o.assign {
		if next, changed := withAssignee(snap.assignees, rec.Identity, true); changed {
			assignees = &next
		}
	}
	if current != nil && sameRecord(*current, rec) && assignees == nil {
		// Already in force exactly as asked, and the read just made (or the caller's)
		// showed it: nothing to write.
		return Published{Record: *current, ContentVersion: version}, nil
	}
	// model: claim.pml steps C7-C8 (PATCH guarded by content_version; its answer is the read-back)
	return c.write(ctx, t, snap.body, version, rec, assignees)
}

// issueSnapshot is the part of one read of an issue a guarded write starts from.
type issueSnapshot struct {
	body      string
	version   int64
	record    *claim.Record
	assignees []string
}

// snapshotOf parses the claim record out of an issue read.
func snapshotOf(t claim.Target, is *rawIssue) (issueSnapshot, error) {
	rec, err := ParseBody(is.Body, t)
	if err != nil {
		return issueSnapshot{}, fmt.Errorf("%s: %w", t, err)
	}
	return issueSnapshot{body: is.Body, version: *is.ContentVersion, record: rec, assignees: is.assigneeLogins()}, nil
}

// foreignAssignees lists the assignees other than identity (compared as Gitea compares
// logins, case-insensitively).
func foreignAssignees(assignees []string, identity string) []string {
	var out []string
	for _, a := range assignees {
		if !strings.EqualFold(a, identity) {
			out = append(out, a)
		}
	}
	return out
}

// Clear ends the claim claimID on t by rewriting its record with the final
// state (released, completed, expired or revoked), guarded by content_version.
// It refuses with ErrNotInForce unless the body holds claimID in state active
// (its expiry time may have passed: only the holder or the controller ends a
// claim explicitly). Clearing a record that already carries final succeeds
// without a write, so a repeated Clear is harmless. With [Assigning], the same write
// removes the record's identity from the assignees.
func (c *Client) Clear(ctx context.Context, t claim.Target, claimID string, final claim.RecordState, opts ...PublishOption) (Published, error) {
	var o publishOptions
	for _, opt := range opts {
		opt(&o)
	}
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
	snap, err := snapshotOf(t, is)
	if err != nil {
		return Published{}, err
	}
	current, version := snap.record, snap.version
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
	var assignees *[]string
	if o.assign {
		if rest, changed := withAssignee(snap.assignees, current.Identity, false); changed {
			assignees = &rest
		}
	}
	return c.write(ctx, t, snap.body, version, next, assignees)
}

// write puts rec into body, writes it guarded by version, and checks Gitea's answer.
//
// The answer is the read-back. Gitea's PATCH /issues/{n} (routers/api/v1/repo/issue.go,
// EditIssue, Gitea 1.26) applies the body only through a database update guarded by
// "content_version = ?" (models/issues ChangeIssueContent: 0 rows means 409), then
// fetches the issue from the database again and renders it with the same converter as
// GET /issues/{n}: body, content_version and assignees as stored after the write. A
// separate GET would read the same row a moment later and prove nothing more: the
// record must be in force at the answer, and what happens after it is what the holder's
// re-checks watch. So the answer is checked exactly like a read-back (the record in force
// is rec, no foreign assignee), and a write whose answer is lost or unreadable is
// ErrUnverified: it may have landed, and the caller must settle that (Clear) before it
// gives up.
func (c *Client) write(ctx context.Context, t claim.Target, body string, version int64, rec claim.Record, assignees *[]string) (Published, error) {
	body, err := WithRecord(body, rec)
	if err != nil {
		return Published{}, fmt.Errorf("%s: %w", t, err)
	}
	is, err := c.patchBody(ctx, t, body, version, assignees)
	if err != nil {
		return Published{}, err
	}
	return c.checkAnswer(t, is, rec)
}

// patchBody performs the guarded body write and returns Gitea's answer: the issue as
// stored after the write.
func (c *Client) patchBody(ctx context.Context, t claim.Target, body string, version int64, assignees *[]string) (*rawIssue, error) {
	owner, name, err := validateTarget(t)
	if err != nil {
		return nil, err
	}
	var is rawIssue
	err = c.doJSON(ctx, http.MethodPatch, issuePath(owner, name, t.Number),
		casPatch{Body: body, ContentVersion: version, Assignees: assignees}, &is)
	switch {
	case err == nil:
	case errors.Is(err, ErrConflict):
		return nil, fmt.Errorf("writing %s: %w", t, &ConflictError{Target: t, ContentVersion: version})
	case isTransport(err):
		// Sent, but no readable answer: the write may have landed.
		return nil, fmt.Errorf("writing %s: %w: %w", t, ErrUnverified, err)
	default:
		return nil, fmt.Errorf("writing %s: %w", t, err)
	}
	if is.ContentVersion == nil {
		return nil, fmt.Errorf("writing %s: %w: the answer carries no content_version", t, ErrUnverified)
	}
	return &is, nil
}

// checkAnswer proves that want is the record Gitea holds in the issue is (the answer to
// the guarded write). A record in a final state is compared as-is (it is not "in force"
// but it must be the one written).
func (c *Client) checkAnswer(t claim.Target, is *rawIssue, want claim.Record) (Published, error) {
	version := *is.ContentVersion
	got, err := ParseBody(is.Body, t)
	if err != nil {
		return Published{}, fmt.Errorf("reading back %s: %w", t, err)
	}
	if got == nil || !sameRecord(*got, want) || (want.State == claim.RecordStateActive && !got.InForce(c.now())) {
		return Published{}, &NotInForceError{Target: t, ClaimID: want.ClaimID, Found: got, ContentVersion: version}
	}
	if want.State == claim.RecordStateActive {
		// Assignments carry no version: one made between the read and the write is only
		// visible now, and an issue assigned to someone else is not ours to hold.
		if foreign := foreignAssignees(is.assigneeLogins(), want.Identity); len(foreign) > 0 {
			return Published{}, &ForeignClaimError{Target: t, Assignees: foreign}
		}
	}
	return Published{Record: *got, ContentVersion: version}, nil
}
