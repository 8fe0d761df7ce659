package giteaclaim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// sampleRecord is a complete, valid record.
func sampleRecord() claim.Record {
	at := time.Date(2026, 7, 31, 15, 18, 17, 0, time.UTC)
	return claim.Record{
		ClaimID: "claim-1", Worker: "worker-a", Identity: "alice", Role: "author",
		Repository: "org/repo", Kind: claim.KindIssue, Number: 7, Generation: "42", Pin: "sha256:abc",
		State: claim.RecordStateActive, ClaimedAt: at, ExpiresAt: at.Add(time.Hour),
	}
}

// sampleItem is the item sampleRecord is about.
var sampleItem = claim.Target{Repository: "org/repo", Kind: claim.KindIssue, Number: 7}

func TestWithRecordStripRecordRoundTrip(t *testing.T) {
	rec := sampleRecord()
	for _, tc := range []struct {
		name, body string
	}{
		{"empty", ""},
		{"plain", "Fix the thing."},
		{"trailing blank line", "Fix the thing.\n\n"},
		{"crlf and unicode", "Line one\r\nLine two — ünïcode \t \r\n"},
		{"other html comment", "<!-- keep me -->\nbody"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withBlock, err := WithRecord(tc.body, rec)
			if err != nil {
				t.Fatalf("WithRecord: %v", err)
			}
			if !strings.HasPrefix(withBlock, tc.body) {
				t.Fatalf("WithRecord changed the existing body: %q", withBlock)
			}
			got, err := ParseBody(withBlock, sampleItem)
			if err != nil || got == nil || !sameRecord(*got, rec) {
				t.Fatalf("ParseBody = %+v, %v; want %+v", got, err, rec)
			}
			stripped, err := StripRecord(withBlock)
			if err != nil || stripped != tc.body {
				t.Fatalf("StripRecord = %q, %v; want %q", stripped, err, tc.body)
			}
		})
	}
}

func TestWithRecordReplacesInPlace(t *testing.T) {
	first := sampleRecord()
	body, err := WithRecord("head", first)
	if err != nil {
		t.Fatal(err)
	}
	body += "\ntail"
	second := first
	second.ClaimID, second.State = "claim-2", claim.RecordStateActive
	replaced, err := WithRecord(body, second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(replaced, "head\n\n") || !strings.HasSuffix(replaced, " -->\ntail") {
		t.Fatalf("replacement moved surrounding text: %q", replaced)
	}
	got, err := ParseBody(replaced, sampleItem)
	if err != nil || got.ClaimID != "claim-2" {
		t.Fatalf("ParseBody = %+v, %v", got, err)
	}
}

func TestParseBody(t *testing.T) {
	good, err := WithRecord("", sampleRecord())
	if err != nil {
		t.Fatal(err)
	}
	incomplete := sampleRecord()
	incomplete.Identity = ""
	for _, tc := range []struct {
		name      string
		body      string
		wantNil   bool
		malformed bool
	}{
		{name: "no block", body: "just text", wantNil: true},
		{name: "audit block is not a record", body: auditOpen + `{"event":"claimed"}` + blockClose, wantNil: true},
		{name: "valid", body: good},
		{name: "two blocks", body: good + "\n" + good, malformed: true},
		{name: "unterminated", body: recordOpen + `{"claimID":"x"`, malformed: true},
		{name: "bad json", body: recordOpen + `{nope}` + blockClose, malformed: true},
		{name: "incomplete", body: recordOpen + `{"claimID":"x","state":"active"}` + blockClose, malformed: true},
		{name: "unknown state", body: strings.Replace(good, `"state":"active"`, `"state":"paused"`, 1), malformed: true},
		{name: "unknown kind", body: strings.Replace(good, `"kind":"Issue"`, `"kind":"Epic"`, 1), malformed: true},
		// A record is only ever written on its own item: one naming another item (copied or
		// forged into this body) is no claim on this one.
		{name: "a record about another number", body: strings.Replace(good, `"number":7`, `"number":8`, 1), wantNil: true},
		{name: "a record about the pull request of the same number", body: strings.Replace(good, `"kind":"Issue"`, `"kind":"PullRequest"`, 1), wantNil: true},
		{name: "a record about another repository", body: strings.Replace(good, `"repository":"org/repo"`, `"repository":"org/other"`, 1), wantNil: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseBody(tc.body, sampleItem)
			if tc.malformed {
				if !errors.Is(err, ErrMalformedRecord) {
					t.Fatalf("err = %v, want ErrMalformedRecord", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if (got == nil) != tc.wantNil {
				t.Fatalf("record = %+v, want nil: %v", got, tc.wantNil)
			}
		})
	}
}

func TestRecordInForce(t *testing.T) {
	rec := sampleRecord()
	for _, tc := range []struct {
		name  string
		state claim.RecordState
		now   time.Time
		want  bool
	}{
		{"active before expiry", claim.RecordStateActive, rec.ExpiresAt.Add(-time.Second), true},
		{"active at expiry", claim.RecordStateActive, rec.ExpiresAt, false},
		{"active after expiry", claim.RecordStateActive, rec.ExpiresAt.Add(time.Minute), false},
		{"released", claim.RecordStateReleased, rec.ClaimedAt, false},
		{"revoked", claim.RecordStateRevoked, rec.ClaimedAt, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rec
			r.State = tc.state
			if got := r.InForce(tc.now); got != tc.want {
				t.Fatalf("InForce = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRecordValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*claim.Record)
		ok     bool
	}{
		{"valid", func(*claim.Record) {}, true},
		{"no claim id", func(r *claim.Record) { r.ClaimID = " " }, false},
		{"no worker", func(r *claim.Record) { r.Worker = "" }, false},
		{"no role", func(r *claim.Record) { r.Role = "" }, false},
		{"bad repository", func(r *claim.Record) { r.Repository = "org" }, false},
		{"nested repository", func(r *claim.Record) { r.Repository = "org/a/b" }, false},
		{"bad kind", func(r *claim.Record) { r.Kind = "issue" }, false},
		{"zero number", func(r *claim.Record) { r.Number = 0 }, false},
		{"unknown state", func(r *claim.Record) { r.State = "held" }, false},
		{"expiry before claim", func(r *claim.Record) { r.ExpiresAt = r.ClaimedAt }, false},
		{"no claimedAt", func(r *claim.Record) { r.ClaimedAt = time.Time{} }, false},
		{"invalid utf-8", func(r *claim.Record) { r.Pin = "\xf9" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sampleRecord()
			tc.mutate(&r)
			err := validateRecord(r)
			if tc.ok != (err == nil) {
				t.Fatalf("validateRecord = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("validateRecord error %v does not wrap ErrInvalidArgument", err)
			}
		})
	}
}

func TestTransitionFormatParse(t *testing.T) {
	at := time.Date(2026, 7, 31, 15, 0, 0, 500, time.FixedZone("x", -5*3600))
	base := Transition{ClaimID: "c1", Worker: "w1", Identity: "alice", Role: "reviewer", At: at}
	for _, tc := range []struct {
		name    string
		mutate  func(*Transition)
		wantErr bool
	}{
		{"claimed", func(tr *Transition) { tr.Event = claim.EventClaimed }, false},
		{"revoked with trigger", func(tr *Transition) { tr.Event, tr.Trigger = claim.EventRevoked, claim.TriggerStaleState }, false},
		{"rejected with reason", func(tr *Transition) { tr.Event, tr.Reason, tr.Role = claim.EventRejected, "contention", "" }, false},
		{"revoked without trigger", func(tr *Transition) { tr.Event = claim.EventRevoked }, true},
		{"revoked with unknown trigger", func(tr *Transition) { tr.Event, tr.Trigger = claim.EventRevoked, "boredom" }, true},
		{"trigger on non-revocation", func(tr *Transition) { tr.Event, tr.Trigger = claim.EventReleased, claim.TriggerRelease }, true},
		{"unknown event", func(tr *Transition) { tr.Event = "paused" }, true},
		{"no identity", func(tr *Transition) { tr.Event, tr.Identity = claim.EventClaimed, "" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := base
			tc.mutate(&tr)
			body, err := FormatTransition(tr)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("FormatTransition err = %v, want ErrInvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(body, string(tr.Event)) || strings.HasPrefix(body, "<!--") {
				t.Fatalf("comment lacks a human sentence: %q", body)
			}
			got, found, err := ParseTransition(body)
			if err != nil || !found {
				t.Fatalf("ParseTransition = %v, %v", found, err)
			}
			want := tr
			want.At = at.UTC().Truncate(time.Second)
			want.RuleSet = claim.RuleSetDigest() // every audit comment names the rule set in force
			if got != want {
				t.Fatalf("round trip = %+v, want %+v", got, want)
			}
		})
	}
	if _, found, err := ParseTransition("a human comment"); found || err != nil {
		t.Fatalf("plain comment parsed as transition: %v %v", found, err)
	}
	if _, _, err := ParseTransition(auditOpen + "{" + blockClose); !errors.Is(err, ErrMalformedRecord) {
		t.Fatalf("broken audit block: err = %v", err)
	}
}

func TestBlockNeverContainsTerminator(t *testing.T) {
	rec := sampleRecord()
	rec.Pin = "--> <!-- fleet-claim:v1 {} -->"
	body, err := WithRecord("x", rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseBody(body, sampleItem)
	if err != nil || got.Pin != rec.Pin {
		t.Fatalf("hostile pin did not round-trip: %+v, %v", got, err)
	}
}

// FuzzRecordBody checks that adding a record to any body that has no claim
// block keeps the body intact, and that the block reads back as written.
func FuzzRecordBody(f *testing.F) {
	for _, s := range []string{"", "x", "a\n\n", "\r\n", "<!-- fleet-claim-audit:v1 {} -->", "-->", "ü"} {
		f.Add(s, "pin")
	}
	f.Fuzz(func(t *testing.T, body, pin string) {
		if !utf8.ValidString(pin) {
			return // refused by validateRecord before any write
		}
		rec := sampleRecord()
		rec.Pin = pin
		withBlock, err := WithRecord(body, rec)
		if strings.Contains(body, recordOpen) {
			return // bodies that already hold a block are covered by table tests
		}
		if err != nil {
			t.Fatalf("WithRecord(%q): %v", body, err)
		}
		got, err := ParseBody(withBlock, sampleItem)
		if err != nil || got == nil || !sameRecord(*got, rec) {
			t.Fatalf("ParseBody after WithRecord(%q) = %+v, %v", body, got, err)
		}
		stripped, err := StripRecord(withBlock)
		if err != nil || stripped != body {
			t.Fatalf("StripRecord = %q, %v; want %q", stripped, err, body)
		}
	})
}

// TestArgumentsCheckedBeforeIO uses an address nothing listens on: every case
// must be refused before a request is attempted.
func TestArgumentsCheckedBeforeIO(t *testing.T) {
	c, err := New("http://127.0.0.1:1/", "token")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec := sampleRecord()
	rec.ClaimedAt, rec.ExpiresAt = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	tg := rec.Target()
	expired := rec
	expired.ClaimedAt, expired.ExpiresAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	released := rec
	released.State = claim.RecordStateReleased
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"publish expired record", func() error { _, err := c.Publish(ctx, tg, expired); return err }},
		{"publish final state", func() error { _, err := c.Publish(ctx, tg, released); return err }},
		{"publish for another target", func() error {
			other := tg
			other.Number++
			_, err := c.Publish(ctx, other, rec)
			return err
		}},
		{"clear to active", func() error { _, err := c.Clear(ctx, tg, "c", claim.RecordStateActive); return err }},
		{"clear without id", func() error { _, err := c.Clear(ctx, tg, "", claim.RecordStateReleased); return err }},
		{"read bad target", func() error {
			_, _, err := c.Read(ctx, claim.Target{Repository: "x", Kind: claim.KindIssue, Number: 1})
			return err
		}},
		{"read target bad kind", func() error {
			_, err := c.ReadTarget(ctx, claim.Target{Repository: "o/r", Kind: "Epic", Number: 1})
			return err
		}},
		{"transition without trigger", func() error {
			_, err := c.RecordTransition(ctx, tg, Transition{Event: claim.EventRevoked, ClaimID: "c", Worker: "w", Identity: "i", At: time.Now()})
			return err
		}},
		{"file without path", func() error { _, err := c.PublishFile(ctx, "o/r", "/", nil, ""); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
	for _, bad := range []struct{ url, token string }{{"ftp://x", "t"}, {"http://", "t"}, {"http://h", ""}} {
		if _, err := New(bad.url, bad.token); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("New(%q, %q) err = %v, want ErrInvalidArgument", bad.url, bad.token, err)
		}
	}
}

// TestWireFormatUnchanged pins the exact bytes this package writes to Gitea
// (the record block and the audit comment) and the error texts it reports. The
// expected strings were produced by the package before it moved to the claim
// package's types; they must never change without a new format version.
func TestWireFormatUnchanged(t *testing.T) {
	at := time.Date(2026, 7, 31, 15, 18, 17, 0, time.UTC)
	rec := sampleRecord()
	pr := rec
	pr.Kind, pr.HeadSHA, pr.State, pr.Pin = claim.KindPullRequest, "0123abcd", claim.RecordStateRevoked, "<-->&"
	pr.RuleSet = "sha256:0123"
	pr.ClaimedAt = at.In(time.FixedZone("x", 3600)).Add(500 * time.Millisecond)
	tg := claim.Target{Repository: "org/repo", Kind: claim.KindPullRequest, Number: 9}
	format := func(tr Transition) string {
		t.Helper()
		body, err := FormatTransition(tr)
		if err != nil {
			t.Fatalf("FormatTransition(%+v): %v", tr, err)
		}
		return body
	}
	withRecord := func(body string, r claim.Record) string {
		t.Helper()
		out, err := WithRecord(body, r)
		if err != nil {
			t.Fatalf("WithRecord: %v", err)
		}
		return out
	}
	for _, tc := range []struct{ name, got, want string }{
		{"issue record", withRecord("Body.", rec),
			"Body.\n\n" + `<!-- fleet-claim:v1 {"claimID":"claim-1","worker":"worker-a","identity":"alice","role":"author","repository":"org/repo","kind":"Issue","number":7,"generation":"42","pin":"sha256:abc","state":"active","claimedAt":"2026-07-31T15:18:17Z","expiresAt":"2026-07-31T16:18:17Z"} -->`},
		{"pull request record", withRecord("", pr),
			`<!-- fleet-claim:v1 {"claimID":"claim-1","worker":"worker-a","identity":"alice","role":"author","repository":"org/repo","kind":"PullRequest","number":7,"headSHA":"0123abcd","generation":"42","pin":"\u003c--\u003e\u0026","state":"revoked","claimedAt":"2026-07-31T15:18:17Z","expiresAt":"2026-07-31T16:18:17Z","ruleSet":"sha256:0123"} -->`},
		{"revocation comment", format(Transition{Event: claim.EventRevoked, Trigger: claim.TriggerOwnershipLoss, ClaimID: "c1", Worker: "w1",
			Identity: "alice", Role: "reviewer", Reason: "lease moved", At: at.Add(300 * time.Millisecond)}),
			"Claim `c1` of worker `w1` (identity `alice`, role reviewer) revoked (trigger: ownership_loss) (reason: lease moved) at 2026-07-31T15:18:17Z.\n\n" +
				`<!-- fleet-claim-audit:v1 {"event":"revoked","trigger":"ownership_loss","claimID":"c1","worker":"w1","identity":"alice","role":"reviewer","reason":"lease moved","at":"2026-07-31T15:18:17Z","ruleSet":"` + claim.RuleSetDigest() + `"} -->`},
		{"rejection comment", format(Transition{Event: claim.EventRejected, ClaimID: "c2", Worker: "w2", Identity: "bob", At: at, RuleSet: "sha256:0123"}),
			"Claim `c2` of worker `w2` (identity `bob`) rejected at 2026-07-31T15:18:17Z.\n\n" +
				`<!-- fleet-claim-audit:v1 {"event":"rejected","claimID":"c2","worker":"w2","identity":"bob","at":"2026-07-31T15:18:17Z","ruleSet":"sha256:0123"} -->`},
		{"foreign claim error", (&ForeignClaimError{Target: tg, Holder: &rec, Assignees: []string{"bob"}}).Error(),
			`org/repo#9 (PullRequest): target is held by another claim: claim "claim-1" of alice until 2026-07-31T16:18:17Z; assigned to bob`},
		{"not in force error", (&NotInForceError{Target: tg, ClaimID: "c9", Found: &pr, ContentVersion: 4}).Error(),
			`org/repo#9 (PullRequest): claim record in force is not the expected one: expected claim "c9", found claim "claim-1" (revoked, expires 2026-07-31T16:18:17Z) at content_version 4`},
		{"conflict error", (&ConflictError{Target: tg, ContentVersion: 4}).Error(),
			`org/repo#9 (PullRequest): issue body changed concurrently (stale content_version) (guarded by content_version 4)`},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}
