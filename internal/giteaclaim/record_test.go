package giteaclaim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// sampleRecord is a complete, valid record.
func sampleRecord() Record {
	at := time.Date(2026, 7, 31, 15, 18, 17, 0, time.UTC)
	return Record{
		ClaimID: "claim-1", Worker: "worker-a", Identity: "alice", Role: "author",
		Repository: "org/repo", Kind: KindIssue, Number: 7, Generation: "42", Pin: "sha256:abc",
		State: StateActive, ClaimedAt: at, ExpiresAt: at.Add(time.Hour),
	}
}

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
			got, err := ParseBody(withBlock)
			if err != nil || got == nil || !got.sameAs(rec) {
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
	second.ClaimID, second.State = "claim-2", StateActive
	replaced, err := WithRecord(body, second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(replaced, "head\n\n") || !strings.HasSuffix(replaced, " -->\ntail") {
		t.Fatalf("replacement moved surrounding text: %q", replaced)
	}
	got, err := ParseBody(replaced)
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseBody(tc.body)
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
		state State
		now   time.Time
		want  bool
	}{
		{"active before expiry", StateActive, rec.ExpiresAt.Add(-time.Second), true},
		{"active at expiry", StateActive, rec.ExpiresAt, false},
		{"active after expiry", StateActive, rec.ExpiresAt.Add(time.Minute), false},
		{"released", StateReleased, rec.ClaimedAt, false},
		{"revoked", StateRevoked, rec.ClaimedAt, false},
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
		mutate func(*Record)
		ok     bool
	}{
		{"valid", func(*Record) {}, true},
		{"no claim id", func(r *Record) { r.ClaimID = " " }, false},
		{"no worker", func(r *Record) { r.Worker = "" }, false},
		{"no role", func(r *Record) { r.Role = "" }, false},
		{"bad repository", func(r *Record) { r.Repository = "org" }, false},
		{"nested repository", func(r *Record) { r.Repository = "org/a/b" }, false},
		{"bad kind", func(r *Record) { r.Kind = "issue" }, false},
		{"zero number", func(r *Record) { r.Number = 0 }, false},
		{"unknown state", func(r *Record) { r.State = "held" }, false},
		{"expiry before claim", func(r *Record) { r.ExpiresAt = r.ClaimedAt }, false},
		{"no claimedAt", func(r *Record) { r.ClaimedAt = time.Time{} }, false},
		{"invalid utf-8", func(r *Record) { r.Pin = "\xf9" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sampleRecord()
			tc.mutate(&r)
			err := r.validate()
			if tc.ok != (err == nil) {
				t.Fatalf("validate = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("validate error %v does not wrap ErrInvalidArgument", err)
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
		{"claimed", func(tr *Transition) { tr.Event = EventClaimed }, false},
		{"revoked with trigger", func(tr *Transition) { tr.Event, tr.Trigger = EventRevoked, TriggerStaleState }, false},
		{"rejected with reason", func(tr *Transition) { tr.Event, tr.Reason, tr.Role = EventRejected, "contention", "" }, false},
		{"revoked without trigger", func(tr *Transition) { tr.Event = EventRevoked }, true},
		{"revoked with unknown trigger", func(tr *Transition) { tr.Event, tr.Trigger = EventRevoked, "boredom" }, true},
		{"trigger on non-revocation", func(tr *Transition) { tr.Event, tr.Trigger = EventReleased, TriggerRelease }, true},
		{"unknown event", func(tr *Transition) { tr.Event = "paused" }, true},
		{"no identity", func(tr *Transition) { tr.Event, tr.Identity = EventClaimed, "" }, true},
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
	got, err := ParseBody(body)
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
			return // refused by Record.validate before any write
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
		got, err := ParseBody(withBlock)
		if err != nil || got == nil || !got.sameAs(rec) {
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
	released.State = StateReleased
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
		{"clear to active", func() error { _, err := c.Clear(ctx, tg, "c", StateActive); return err }},
		{"clear without id", func() error { _, err := c.Clear(ctx, tg, "", StateReleased); return err }},
		{"read bad target", func() error {
			_, _, err := c.Read(ctx, Target{Repository: "x", Kind: KindIssue, Number: 1})
			return err
		}},
		{"read target bad kind", func() error { _, err := c.ReadTarget(ctx, "o/r", "Epic", 1); return err }},
		{"transition without trigger", func() error {
			_, err := c.RecordTransition(ctx, tg, Transition{Event: EventRevoked, ClaimID: "c", Worker: "w", Identity: "i", At: time.Now()})
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
