package giteaclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// Transition is one audited lifecycle step of a claim, stored as an issue
// comment.
type Transition struct {
	// Event is what happened.
	Event claim.Event `json:"event"`
	// Trigger is set for [claim.EventRevoked] (and only then); it must be one
	// of the revocation triggers ([claim.Trigger.Revocation]).
	Trigger claim.Trigger `json:"trigger,omitempty"`
	// ClaimID is the claim concerned.
	ClaimID string `json:"claimID"`
	// Worker is the worker registration concerned.
	Worker string `json:"worker"`
	// Identity is the worker's Gitea login.
	Identity string `json:"identity"`
	// Role is the task role of the claim (may be empty for a rejection made
	// before a role was derived).
	Role string `json:"role,omitempty"`
	// Reason is an optional machine-readable detail (a failure class or
	// blocker for rejections).
	Reason string `json:"reason,omitempty"`
	// At is when the transition happened (UTC, second precision).
	At time.Time `json:"at"`
	// RuleSet is the digest of the rule set the claim is decided under;
	// FormatTransition fills in [claim.RuleSetDigest] when it is empty.
	RuleSet string `json:"ruleSet,omitempty"`

	// CommentID is the Gitea comment holding the transition (set when read).
	CommentID int64 `json:"-"`
	// Author is the login that posted the comment (set when read). Only
	// comments posted by the controller's identity should be trusted.
	Author string `json:"-"`
}

// validate checks the transition before it is posted.
func (tr Transition) validate() error {
	if !tr.Event.Valid() {
		return fmt.Errorf("%w: unknown transition event %q", ErrInvalidArgument, tr.Event)
	}
	if tr.Event == claim.EventRevoked && !tr.Trigger.Revocation() {
		return fmt.Errorf("%w: revocation needs a known trigger, got %q", ErrInvalidArgument, tr.Trigger)
	}
	if tr.Event != claim.EventRevoked && tr.Trigger != "" {
		return fmt.Errorf("%w: trigger %q only applies to %s", ErrInvalidArgument, tr.Trigger, claim.EventRevoked)
	}
	if tr.ClaimID == "" || tr.Worker == "" || tr.Identity == "" {
		return fmt.Errorf("%w: transition needs claimID, worker and identity", ErrInvalidArgument)
	}
	if tr.At.IsZero() {
		return fmt.Errorf("%w: transition time is zero", ErrInvalidArgument)
	}
	return nil
}

// sentence is the human-readable first line of an audit comment.
func (tr Transition) sentence() string {
	var b strings.Builder
	// The identity is quoted, not @-mentioned: an audit trail notifies nobody.
	fmt.Fprintf(&b, "Claim `%s` of worker `%s` (identity `%s`", tr.ClaimID, tr.Worker, tr.Identity)
	if tr.Role != "" {
		fmt.Fprintf(&b, ", role %s", tr.Role)
	}
	fmt.Fprintf(&b, ") %s", tr.Event)
	if tr.Trigger != "" {
		fmt.Fprintf(&b, " (trigger: %s)", tr.Trigger)
	}
	if tr.Reason != "" {
		fmt.Fprintf(&b, " (reason: %s)", tr.Reason)
	}
	fmt.Fprintf(&b, " at %s.", tr.At.Format(timeLayout))
	return b.String()
}

// FormatTransition renders the comment body for tr: the sentence, a blank
// line, and the audit block.
func FormatTransition(tr Transition) (string, error) {
	tr.At = tr.At.UTC().Truncate(time.Second)
	if tr.RuleSet == "" {
		tr.RuleSet = claim.RuleSetDigest()
	}
	if err := tr.validate(); err != nil {
		return "", err
	}
	block, err := encodeBlock(auditOpen, tr)
	if err != nil {
		return "", err
	}
	return tr.sentence() + blockJoiner + block, nil
}

// ParseTransition extracts the audit block from a comment body. found is false
// when the comment holds none; an unreadable block is an error wrapping
// ErrMalformedRecord.
func ParseTransition(body string) (tr Transition, found bool, err error) {
	_, _, payload, found, err := blockSpan(body, auditOpen)
	if err != nil || !found {
		return Transition{}, false, err
	}
	if err := json.Unmarshal([]byte(payload), &tr); err != nil {
		return Transition{}, true, fmt.Errorf("%w: audit block: %w", ErrMalformedRecord, err)
	}
	if err := tr.validate(); err != nil {
		return Transition{}, true, fmt.Errorf("%w: audit block: %w", ErrMalformedRecord, err)
	}
	tr.At = tr.At.UTC()
	return tr, true, nil
}

// RecordTransition posts tr as a comment on the target and returns it with
// CommentID and Author filled in.
func (c *Client) RecordTransition(ctx context.Context, t claim.Target, tr Transition) (Transition, error) {
	owner, name, err := validateTarget(t)
	if err != nil {
		return Transition{}, err
	}
	body, err := FormatTransition(tr)
	if err != nil {
		return Transition{}, err
	}
	cm, resp, err := c.SDK(ctx).CreateIssueComment(owner, name, t.Number, gitea.CreateIssueCommentOption{Body: body})
	if err != nil {
		return Transition{}, fmt.Errorf("recording %s transition on %s: %w", tr.Event, t,
			sdkErr("POST", issuePath(owner, name, t.Number)+"/comments", resp, err))
	}
	out, _, err := ParseTransition(cm.Body)
	if err != nil {
		return Transition{}, fmt.Errorf("recording %s transition on %s: comment %d reads back wrong: %w", tr.Event, t, cm.ID, err)
	}
	out.CommentID = cm.ID
	if cm.Poster != nil {
		out.Author = cm.Poster.UserName
	}
	return out, nil
}

// listPageSize is the page size asked for in every paged listing.
const listPageSize = 50

// ListTransitions returns the audited transitions on the target, oldest
// first. Comments without an audit block are skipped; a comment whose block is
// unreadable is an error (the trail must not be silently incomplete).
func (c *Client) ListTransitions(ctx context.Context, t claim.Target) ([]Transition, error) {
	owner, name, err := validateTarget(t)
	if err != nil {
		return nil, err
	}
	sdk := c.SDK(ctx)
	cms, err := listAll(issuePath(owner, name, t.Number)+"/comments", func(o gitea.ListOptions) ([]*gitea.Comment, *gitea.Response, error) {
		return sdk.ListIssueComments(owner, name, t.Number, gitea.ListIssueCommentOptions{ListOptions: o})
	})
	if err != nil {
		return nil, fmt.Errorf("listing transitions on %s: %w", t, err)
	}
	var out []Transition
	for _, cm := range cms {
		tr, found, err := ParseTransition(cm.Body)
		if err != nil {
			return nil, fmt.Errorf("listing transitions on %s: comment %d: %w", t, cm.ID, err)
		}
		if !found {
			continue
		}
		tr.CommentID = cm.ID
		if cm.Poster != nil {
			tr.Author = cm.Poster.UserName
		}
		out = append(out, tr)
	}
	return out, nil
}
