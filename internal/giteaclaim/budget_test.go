package giteaclaim

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// countingTransport counts the requests a client sends.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(req)
}

// counted returns a copy of c whose requests are counted.
func counted(t *testing.T, c *Client) (*Client, *countingTransport) {
	t.Helper()
	ct := &countingTransport{base: server.HTTP.Transport}
	if ct.base == nil {
		ct.base = http.DefaultTransport
	}
	cp := *c
	cp.http = &http.Client{Transport: ct, Timeout: server.HTTP.Timeout}
	cp.repos = &repoCache{entries: map[string]repoEntry{}}
	return &cp, ct
}

// TestPublishOverTheStateSeen: a publication over a ReadTarget answer is one request
// (the guarded write, whose answer is the read-back), and it loses with ErrConflict when
// the body changed after that read. A Clear is a read and the guarded write.
func TestPublishOverTheStateSeen(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	w, calls := counted(t, f.workers[0])
	tg := f.newIssue(t, "publish over the state seen", "Body.")

	if _, err := w.ReadTarget(ctx, tg); err != nil {
		t.Fatal(err)
	}
	if n := calls.n.Swap(0); n != 4 {
		t.Fatalf("first issue read made %d requests, want 4 (issue, dependencies, repository, branch)", n)
	}
	seen, err := w.ReadTarget(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.n.Swap(0); n != 3 {
		t.Fatalf("issue read with the default branch cached made %d requests, want 3", n)
	}
	rec := f.record(f.workers[0], tg, "claim-over")
	pub, err := w.Publish(ctx, tg, rec, Over(seen))
	if err != nil {
		t.Fatalf("Publish over the state seen: %v", err)
	}
	if n := calls.n.Swap(0); n != 1 {
		t.Fatalf("publication over the state seen made %d requests, want 1", n)
	}
	if pub.ContentVersion != seen.RecordVersion+1 || !sameRecord(pub.Record, rec) {
		t.Fatalf("published %+v at %d, want the record at %d", pub.Record, pub.ContentVersion, seen.RecordVersion+1)
	}
	if got, _, err := f.admin.Read(ctx, tg); err != nil || got == nil || got.ClaimID != rec.ClaimID {
		t.Fatalf("Gitea holds %+v (%v)", got, err)
	}

	// A body edited after the read: the write over the stale state loses, whoever edited.
	other := f.newIssue(t, "edited after the read", "Body.")
	stale, err := w.ReadTarget(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if err := server.EditBody(ctx, f.repo, other.Number, "Edited by a human."); err != nil {
		t.Fatal(err)
	}
	calls.n.Store(0)
	_, err = w.Publish(ctx, other, f.record(f.workers[0], other, "claim-stale"), Over(stale))
	var ce *ConflictError
	if !errors.Is(err, ErrConflict) || !errors.As(err, &ce) || ce.ContentVersion != stale.RecordVersion {
		t.Fatalf("Publish over a stale state: %v, want ErrConflict at %d", err, stale.RecordVersion)
	}
	if n := calls.n.Load(); n != 1 {
		t.Fatalf("the lost write made %d requests, want 1", n)
	}
	if got, _, err := f.admin.Read(ctx, other); err != nil || got != nil {
		t.Fatalf("after the lost write Gitea holds %+v (%v), want no record", got, err)
	}

	// The state seen must be of the target published.
	if _, err := w.Publish(ctx, other, f.record(f.workers[0], other, "claim-x"), Over(seen)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Publish over another target's state: %v, want ErrInvalidArgument", err)
	}

	calls.n.Store(0)
	if _, err := w.Clear(ctx, tg, rec.ClaimID, claim.RecordStateReleased); err != nil {
		t.Fatalf("Clear: %v", err)
	}
	if n := calls.n.Load(); n != 2 {
		t.Fatalf("Clear made %d requests, want 2 (read, guarded write)", n)
	}
}

// TestRepositoryCacheTTL: the default branch is read again once the TTL passed.
func TestRepositoryCacheTTL(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	now := time.Now()
	w, calls := counted(t, f.workers[0])
	w.now = func() time.Time { return now }
	tg := f.newIssue(t, "cache ttl", "Body.")
	for i, want := range []int64{4, 3, 4} {
		if i == 2 {
			now = now.Add(DefaultRepositoryCacheTTL + time.Second)
		}
		calls.n.Store(0)
		st, err := w.ReadTarget(ctx, tg)
		if err != nil {
			t.Fatal(err)
		}
		if n := calls.n.Load(); n != want || st.BaseBranch != "main" || st.ParityRevision == "" {
			t.Fatalf("read %d: %d requests (want %d), base %q at %q", i, n, want, st.BaseBranch, st.ParityRevision)
		}
	}
}
