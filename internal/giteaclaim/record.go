package giteaclaim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// timeLayout is how times appear in records, audit blocks and messages.
const timeLayout = time.RFC3339

// validateTarget checks the target's shape and splits the repository. The
// head (t.HeadSHA) plays no part: a claim record lives on the issue, whatever
// the head.
func validateTarget(t claim.Target) (owner, name string, err error) {
	owner, name, err = splitRepo(t.Repository)
	if err != nil {
		return "", "", err
	}
	if !t.Kind.Valid() {
		return "", "", fmt.Errorf("%w: target kind %q is neither %s nor %s", ErrInvalidArgument, t.Kind, claim.KindIssue, claim.KindPullRequest)
	}
	if t.Number <= 0 {
		return "", "", fmt.Errorf("%w: target number %d must be positive", ErrInvalidArgument, t.Number)
	}
	return owner, name, nil
}

// itemOf is t without its head: the issue or pull request itself, which is
// what a claim record is about.
func itemOf(t claim.Target) claim.Target {
	t.HeadSHA = ""
	return t
}

// splitRepo splits "owner/name".
func splitRepo(repo string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%w: repository %q is not owner/name", ErrInvalidArgument, repo)
	}
	return owner, name, nil
}

// normalized returns r with times in UTC truncated to the second, so that what
// is written reads back identically.
func normalized(r claim.Record) claim.Record {
	r.ClaimedAt = r.ClaimedAt.UTC().Truncate(time.Second)
	r.ExpiresAt = r.ExpiresAt.UTC().Truncate(time.Second)
	return r
}

// validateRecord checks that a record is complete and internally consistent
// enough to be stored: every identifying field set and valid UTF-8, a valid
// target, a known state and an expiry after the claim time.
func validateRecord(r claim.Record) error {
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
	for _, v := range []string{r.ClaimID, r.Worker, r.Identity, r.Role, r.Repository, r.HeadSHA, r.Generation, r.Pin, r.RuleSet} {
		if !utf8.ValidString(v) {
			// JSON would rewrite the bytes, so the record could never read back as written.
			return fmt.Errorf("%w: record field %q is not valid UTF-8", ErrInvalidArgument, v)
		}
	}
	if _, _, err := validateTarget(r.Target()); err != nil {
		return err
	}
	if !r.State.Known() {
		return fmt.Errorf("%w: record state %q is unknown", ErrInvalidArgument, r.State)
	}
	if !r.ExpiresAt.After(r.ClaimedAt) {
		return fmt.Errorf("%w: record expiresAt %s is not after claimedAt %s", ErrInvalidArgument,
			r.ExpiresAt.Format(timeLayout), r.ClaimedAt.Format(timeLayout))
	}
	return nil
}

// sameRecord compares two records field by field after normalisation.
func sameRecord(a, b claim.Record) bool {
	ja, errA := json.Marshal(normalized(a))
	jb, errB := json.Marshal(normalized(b))
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// Markers of the machine-readable blocks. The JSON inside never contains
// "-->" because encoding/json escapes '>' as \u003e.
const (
	recordOpen  = claim.RecordMarker
	auditOpen   = claim.AuditMarker
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

// ParseBody extracts the claim record of item (an issue or pull request; its head
// plays no part) from that item's body. It returns nil when the body holds no claim
// block, or one about another item: a record is only ever written on its own item, so
// such a block is text someone copied or forged, not a claim, and the next publication
// replaces it. It returns an error wrapping ErrMalformedRecord when the block is
// unreadable, incomplete or repeated.
func ParseBody(body string, item claim.Target) (*claim.Record, error) {
	_, _, payload, found, err := blockSpan(body, recordOpen)
	if err != nil || !found {
		return nil, err
	}
	var r claim.Record
	if err := json.Unmarshal([]byte(payload), &r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	if err := validateRecord(r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	if !r.Target().SameItem(itemOf(item)) {
		return nil, nil
	}
	r = normalized(r)
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
func WithRecord(body string, r claim.Record) (string, error) {
	block, err := encodeBlock(recordOpen, normalized(r))
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
