package giteaclaim

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// issueBody reads the raw body of a target.
func issueBody(t *testing.T, c *Client, tg claim.Target) (string, int64) {
	t.Helper()
	is, err := c.readIssue(ctxT(t), tg)
	if err != nil {
		t.Fatalf("reading %s: %v", tg, err)
	}
	return is.Body, *is.ContentVersion
}

func TestPublishAndReadBack(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	original := "Implement the thing.\r\n\r\n- keep CRLF\r\n- ünïcode — and trailing spaces   \n<!-- a foreign comment -->\n"
	tg := f.newIssue(t, "publish and read back", original)
	before, v0 := issueBody(t, f.admin, tg)

	if rec, v, err := f.workers[0].Read(ctx, tg); err != nil || rec != nil || v != v0 {
		t.Fatalf("Read before publish = %+v, %d, %v; want nil, %d", rec, v, err, v0)
	}
	rec := f.record(f.workers[0], tg, "claim-publish")
	pub, err := f.workers[0].Publish(ctx, tg, rec)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if !sameRecord(pub.Record, rec) || pub.ContentVersion <= v0 {
		t.Fatalf("Published = %+v; want record %+v at a version above %d", pub, rec, v0)
	}

	got, v, err := f.reviewer.Read(ctx, tg)
	if err != nil || got == nil || !sameRecord(*got, rec) || v != pub.ContentVersion {
		t.Fatalf("Read = %+v, %d, %v; want the published record at %d", got, v, err, pub.ContentVersion)
	}
	after, _ := issueBody(t, f.admin, tg)
	if rest, err := StripRecord(after); err != nil || rest != before {
		t.Fatalf("body outside the block changed:\nbefore %q\nafter  %q", before, rest)
	}

	// Publishing the same record again is a no-op that still verifies.
	again, err := f.workers[0].Publish(ctx, tg, rec)
	if err != nil || again.ContentVersion != pub.ContentVersion {
		t.Fatalf("re-publish = %+v, %v; want no write at version %d", again, err, pub.ContentVersion)
	}
}

func TestSecondPublisherGetsForeignClaim(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	tg := f.newIssue(t, "foreign claim", "Body.")
	first := f.record(f.workers[0], tg, "claim-first")
	if _, err := f.workers[0].Publish(ctx, tg, first); err != nil {
		t.Fatalf("first Publish: %v", err)
	}
	_, v := issueBody(t, f.admin, tg)

	_, err := f.workers[1].Publish(ctx, tg, f.record(f.workers[1], tg, "claim-second"))
	var fe *ForeignClaimError
	if !errors.Is(err, ErrForeignClaim) || !errors.As(err, &fe) || fe.Holder == nil || fe.Holder.ClaimID != "claim-first" {
		t.Fatalf("second Publish err = %v; want ForeignClaimError held by claim-first", err)
	}
	if _, v2 := issueBody(t, f.admin, tg); v2 != v {
		t.Fatalf("refused Publish wrote the body (version %d -> %d)", v, v2)
	}

	// Once the first claim has expired (seen through a later clock) it no
	// longer holds the target.
	later := time.Now().Add(2 * time.Hour)
	w1Later := f.workers[1].WithToken(f.workers[1].token)
	w1Later.now = func() time.Time { return later }
	w0Later := f.workers[0].WithToken(f.workers[0].token)
	w0Later.now = w1Later.now
	lapsed := first
	lapsed.ClaimedAt, lapsed.ExpiresAt = later, later.Add(time.Hour)
	if _, err := w0Later.Publish(ctx, tg, lapsed); !errors.Is(err, ErrNotInForce) {
		t.Fatalf("reviving a lapsed claim under its ID: err = %v, want ErrNotInForce", err)
	}
	next := f.record(f.workers[1], tg, "claim-after-expiry")
	next.ClaimedAt, next.ExpiresAt = later, later.Add(time.Hour)
	if _, err := w1Later.Publish(ctx, tg, next); err != nil {
		t.Fatalf("Publish over an expired claim: %v", err)
	}
}

func TestPublishRefusesForeignAssignee(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	tg := f.newIssue(t, "assigned elsewhere", "Body.")
	if _, _, err := f.author.SDK(ctx).EditIssue(f.owner, f.name, tg.Number, gitea.EditIssueOption{
		Assignees: []string{f.login(f.reviewer)},
	}); err != nil {
		t.Fatalf("assigning: %v", err)
	}
	_, err := f.workers[0].Publish(ctx, tg, f.record(f.workers[0], tg, "claim-assignee"))
	var fe *ForeignClaimError
	if !errors.As(err, &fe) || fe.Holder != nil || !slices.Equal(fe.Assignees, []string{f.login(f.reviewer)}) {
		t.Fatalf("Publish err = %v; want ForeignClaimError naming assignee %s", err, f.login(f.reviewer))
	}

	// Assigned to the claimant itself is fine.
	own := f.newIssue(t, "assigned to claimant", "Body.")
	if _, _, err := f.author.SDK(ctx).EditIssue(f.owner, f.name, own.Number, gitea.EditIssueOption{
		Assignees: []string{f.login(f.workers[0])},
	}); err != nil {
		t.Fatalf("assigning: %v", err)
	}
	if _, err := f.workers[0].Publish(ctx, own, f.record(f.workers[0], own, "claim-own")); err != nil {
		t.Fatalf("Publish on an issue assigned to the claimant: %v", err)
	}
}

func TestPublishFailsClosed(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	broken := f.newIssue(t, "malformed record", "Text\n\n"+recordOpen+`{"claimID":`+blockClose)
	_, v := issueBody(t, f.admin, broken)
	if _, err := f.workers[0].Publish(ctx, broken, f.record(f.workers[0], broken, "c")); !errors.Is(err, ErrMalformedRecord) {
		t.Fatalf("Publish on a malformed body: err = %v, want ErrMalformedRecord", err)
	}
	if _, v2 := issueBody(t, f.admin, broken); v2 != v {
		t.Fatal("Publish wrote a body it could not parse")
	}

	tg := f.newIssue(t, "kind mismatch", "Body.")
	asPull := claim.Target{Repository: tg.Repository, Kind: claim.KindPullRequest, Number: tg.Number}
	if _, err := f.workers[0].Publish(ctx, asPull, f.record(f.workers[0], asPull, "c")); !errors.Is(err, ErrKindMismatch) {
		t.Fatalf("Publish with the wrong kind: err = %v, want ErrKindMismatch", err)
	}
	other := tg
	other.Number++
	if _, err := f.workers[0].Publish(ctx, tg, f.record(f.workers[0], other, "c")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Publish of a record for another target: err = %v, want ErrInvalidArgument", err)
	}
	missing := claim.Target{Repository: f.repo, Kind: claim.KindIssue, Number: 99999}
	if _, err := f.workers[0].Publish(ctx, missing, f.record(f.workers[0], missing, "c")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Publish on a missing issue: err = %v, want ErrNotFound", err)
	}
}

func TestConcurrentPublishHasExactlyOneWinner(t *testing.T) {
	f := giteaFixture(t)
	const racers, rounds = 8, 20
	tg := f.newIssue(t, "contention", "Several workers want this.\n")
	conflicts, foreign := 0, 0
	for round := range rounds {
		var (
			ready    sync.WaitGroup
			done     sync.WaitGroup
			start    = make(chan struct{})
			versions = make([]int64, racers)
			pubs     = make([]Published, racers)
			errs     = make([]error, racers)
		)
		ready.Add(racers)
		done.Add(racers)
		for i := range racers {
			base := f.workers[i%len(f.workers)]
			c := base.WithToken(base.token)
			var once sync.Once
			c.afterRead = func(v int64) {
				versions[i] = v
				once.Do(ready.Done)
				<-start
			}
			rec := f.record(base, tg, fmt.Sprintf("round%02d-racer%d", round, i))
			go func() {
				defer done.Done()
				pubs[i], errs[i] = c.Publish(ctxT(t), tg, rec)
				once.Do(ready.Done) // a racer that failed before its write still checks in
			}()
		}
		waitOrFail(t, &ready, 30*time.Second, "racers reading the issue")
		close(start)
		waitOrFail(t, &done, 60*time.Second, "racers writing")

		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: racers %d and %d both won", round, winner, i)
				}
				winner = i
			case errors.Is(err, ErrConflict):
				conflicts++
			case errors.Is(err, ErrForeignClaim):
				foreign++
			default:
				t.Fatalf("round %d: racer %d failed outside the contention contract: %v", round, i, err)
			}
			if versions[i] != versions[0] {
				t.Fatalf("round %d: racers started from versions %v, want one version", round, versions)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no winner; errors %v", round, errs)
		}
		held, _, err := f.admin.Read(ctxT(t), tg)
		if err != nil || held == nil || held.ClaimID != pubs[winner].Record.ClaimID {
			t.Fatalf("round %d: record in force %+v, %v; want the winner's %q", round, held, err, pubs[winner].Record.ClaimID)
		}
		if _, err := f.admin.Clear(ctxT(t), tg, held.ClaimID, claim.RecordStateReleased); err != nil {
			t.Fatalf("round %d: releasing the winner's claim: %v", round, err)
		}
	}
	t.Logf("%d rounds of %d racers: %d winners, %d conflicts, %d foreign-claim refusals", rounds, racers, rounds, conflicts, foreign)
}

// TestFreeRunningContention lets four workers race without lining them up:
// whatever the interleaving, one wins and the others get a contention answer.
func TestFreeRunningContention(t *testing.T) {
	f := giteaFixture(t)
	const rounds = 5
	for round := range rounds {
		tg := f.newIssue(t, fmt.Sprintf("free-running contention %d", round), "Body.")
		errs := make([]error, len(f.workers))
		var wg sync.WaitGroup
		for i, w := range f.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = w.Publish(ctxT(t), tg, f.record(w, tg, fmt.Sprintf("free%d-worker%d", round, i)))
			}()
		}
		wg.Wait()
		winners := 0
		for i, err := range errs {
			switch {
			case err == nil:
				winners++
			case errors.Is(err, ErrConflict), errors.Is(err, ErrForeignClaim):
			default:
				t.Fatalf("round %d: worker %d: %v", round, i, err)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d winners; errors %v", round, winners, errs)
		}
	}
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

func TestClearOnlyByOwner(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	tg := f.newIssue(t, "clear", "Body.\n")
	if _, err := f.workers[0].Clear(ctx, tg, "nobody", claim.RecordStateReleased); !errors.Is(err, ErrNotInForce) {
		t.Fatalf("Clear without a record: err = %v, want ErrNotInForce", err)
	}
	rec := f.record(f.workers[0], tg, "claim-owner")
	pub, err := f.workers[0].Publish(ctx, tg, rec)
	if err != nil {
		t.Fatal(err)
	}
	var nf *NotInForceError
	if _, err := f.workers[1].Clear(ctx, tg, "claim-intruder", claim.RecordStateReleased); !errors.As(err, &nf) || nf.Found == nil || nf.Found.ClaimID != rec.ClaimID {
		t.Fatalf("Clear of another claim: err = %v, want NotInForceError showing %q", err, rec.ClaimID)
	}
	if _, err := f.workers[0].Clear(ctx, tg, rec.ClaimID, claim.RecordStateActive); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Clear to active: err = %v, want ErrInvalidArgument", err)
	}
	if got, v, _ := f.admin.Read(ctx, tg); got == nil || !sameRecord(*got, rec) || v != pub.ContentVersion {
		t.Fatalf("refused Clear changed the record: %+v at %d", got, v)
	}

	cleared, err := f.workers[0].Clear(ctx, tg, rec.ClaimID, claim.RecordStateCompleted)
	if err != nil || cleared.Record.State != claim.RecordStateCompleted || cleared.Record.ClaimID != rec.ClaimID {
		t.Fatalf("Clear by the owner = %+v, %v", cleared, err)
	}
	if again, err := f.workers[0].Clear(ctx, tg, rec.ClaimID, claim.RecordStateCompleted); err != nil || again.ContentVersion != cleared.ContentVersion {
		t.Fatalf("repeated Clear = %+v, %v; want a no-op", again, err)
	}
	if _, err := f.workers[0].Clear(ctx, tg, rec.ClaimID, claim.RecordStateRevoked); !errors.Is(err, ErrNotInForce) {
		t.Fatalf("Clear of an ended claim to another state: err = %v, want ErrNotInForce", err)
	}
	if _, err := f.workers[0].Publish(ctx, tg, rec); !errors.Is(err, ErrNotInForce) {
		t.Fatalf("reviving an ended claim: err = %v, want ErrNotInForce", err)
	}
	// The next claim goes through an admin token acting as the worker (Sudo).
	asWorker := f.admin.WithSudo(f.login(f.workers[1]))
	if _, err := asWorker.Publish(ctx, tg, f.record(f.workers[1], tg, "claim-next")); err != nil {
		t.Fatalf("Publish after the previous claim ended: %v", err)
	}
	body, _ := issueBody(t, f.admin, tg)
	if rest, _ := StripRecord(body); rest != "Body.\n" {
		t.Fatalf("body outside the block = %q", rest)
	}
}

func TestTransitionsRoundTrip(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	tg := f.newIssue(t, "audit", "Body.")
	if _, _, err := f.reviewer.SDK(ctx).CreateIssueComment(f.owner, f.name, tg.Number,
		gitea.CreateIssueCommentOption{Body: "A human remark."}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Second)
	base := Transition{ClaimID: "claim-audit", Worker: "reg-w1", Identity: f.login(f.workers[0]), Role: "author", At: at}
	steps := []Transition{
		{Event: claim.EventClaimed}, {Event: claim.EventActivated},
		{Event: claim.EventRevoked, Trigger: claim.TriggerStaleState},
		{Event: claim.EventReleased},
		{Event: claim.EventRejected, Reason: "contention"},
	}
	var want []Transition
	for i, s := range steps {
		tr := base
		tr.Event, tr.Trigger, tr.Reason = s.Event, s.Trigger, s.Reason
		tr.At = at.Add(time.Duration(i) * time.Second)
		got, err := f.admin.RecordTransition(ctx, tg, tr)
		if err != nil {
			t.Fatalf("RecordTransition(%s): %v", tr.Event, err)
		}
		if got.CommentID == 0 || got.Author != f.adminLogin {
			t.Fatalf("RecordTransition returned comment %d by %q", got.CommentID, got.Author)
		}
		want = append(want, got)
	}
	// Sudo posts as the impersonated user.
	sudoTr := base
	sudoTr.Event, sudoTr.At = claim.EventCompleted, at.Add(time.Minute)
	got, err := f.admin.WithSudo(f.login(f.workers[2])).RecordTransition(ctx, tg, sudoTr)
	if err != nil || got.Author != f.login(f.workers[2]) {
		t.Fatalf("RecordTransition via sudo = %+v, %v; want author %s", got, err, f.login(f.workers[2]))
	}
	want = append(want, got)

	bad := base
	bad.Event = claim.EventRevoked
	if _, err := f.admin.RecordTransition(ctx, tg, bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("revocation without trigger: err = %v, want ErrInvalidArgument", err)
	}

	list, err := f.workers[1].ListTransitions(ctx, tg)
	if err != nil {
		t.Fatalf("ListTransitions: %v", err)
	}
	if !slices.Equal(list, want) {
		t.Fatalf("ListTransitions =\n%+v\nwant\n%+v", list, want)
	}
}

func TestReadTargetIssue(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	sdk := f.author.SDK(ctx)
	open := f.newIssue(t, "open blocker", "Body.")
	closed := f.newIssue(t, "closed blocker", "Body.")
	closedState := gitea.StateClosed
	if _, _, err := sdk.EditIssue(f.owner, f.name, closed.Number, gitea.EditIssueOption{State: &closedState}); err != nil {
		t.Fatal(err)
	}
	tg := f.newIssue(t, "read target", "Body.")
	for _, dep := range []claim.Target{open, closed} {
		f.addDependency(t, tg, dep)
	}
	label, _, err := sdk.CreateLabel(f.owner, f.name, gitea.CreateLabelOption{Name: "kind/bug-" + randomHex(2), Color: "#ee0701"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sdk.AddIssueLabels(f.owner, f.name, tg.Number, gitea.IssueLabelsOption{Labels: []int64{label.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sdk.EditIssue(f.owner, f.name, tg.Number, gitea.EditIssueOption{Assignees: []string{f.login(f.workers[0])}}); err != nil {
		t.Fatal(err)
	}
	rec := f.record(f.workers[0], tg, "claim-read-target")
	pub, err := f.workers[0].Publish(ctx, tg, rec)
	if err != nil {
		t.Fatal(err)
	}

	// The head of the target asked for is ignored.
	asked := tg
	asked.HeadSHA = "0000000000000000000000000000000000000000"
	st, err := f.workers[1].ReadTarget(ctx, asked)
	if err != nil {
		t.Fatalf("ReadTarget: %v", err)
	}
	mainBranch, _, err := sdk.GetRepoBranch(f.owner, f.name, "main")
	if err != nil {
		t.Fatal(err)
	}
	wantDeps := []claim.DependencyEdge{
		{Repository: f.repo, Number: open.Number, State: "open"},
		{Repository: f.repo, Number: closed.Number, State: "closed"},
	}
	slices.SortFunc(st.Dependencies, func(a, b claim.DependencyEdge) int { return int(a.Number - b.Number) })
	switch {
	case st.Target != tg, st.State != "open", st.Merged, st.Author != f.login(f.author):
		t.Fatalf("identity fields wrong: %+v", st)
	case st.BaseBranch != "main", st.ParityRevision != mainBranch.Commit.ID, st.Target.HeadSHA != "":
		t.Fatalf("branch fields wrong: base %q@%q head %q; main is %q", st.BaseBranch, st.ParityRevision, st.Target.HeadSHA, mainBranch.Commit.ID)
	case !slices.Equal(st.Labels, []string{label.Name}), !slices.Equal(st.Assignees, []string{f.login(f.workers[0])}):
		t.Fatalf("labels %v assignees %v", st.Labels, st.Assignees)
	case !slices.Equal(st.Dependencies, wantDeps):
		t.Fatalf("dependencies %+v, want %+v", st.Dependencies, wantDeps)
	case st.ClaimRecord == nil || !sameRecord(*st.ClaimRecord, rec) || st.RecordVersion != pub.ContentVersion:
		t.Fatalf("claim %+v at %d, want %+v at %d", st.ClaimRecord, st.RecordVersion, rec, pub.ContentVersion)
	case len(st.Pushers) != 0 || len(st.Reviews) != 0 || st.Reviewed || st.Approved:
		t.Fatalf("pull request fields set on an issue: %+v", st)
	case st.LeaseGeneration != "" || st.LeaseHolder != "" || !st.LeaseExpiresAt.IsZero():
		t.Fatalf("lease fields set from Gitea: %+v", st)
	}
	asPull := tg
	asPull.Kind = claim.KindPullRequest
	if _, err := f.workers[1].ReadTarget(ctx, asPull); !errors.Is(err, ErrKindMismatch) {
		t.Fatalf("ReadTarget with the wrong kind: err = %v, want ErrKindMismatch", err)
	}
	absent := tg
	absent.Number = 99999
	if _, err := f.workers[1].ReadTarget(ctx, absent); !errors.Is(err, ErrNoSuchItem) || MissingOf(err) != claim.MissingNotFound {
		t.Fatalf("ReadTarget of a number Gitea does not have: err = %v, want ErrNoSuchItem", err)
	}
}

func TestReadTargetPullRequestLifecycle(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	tg, branch := f.newPull(t, "pull request lifecycle")
	dep := f.newIssue(t, "pull dependency", "Body.")
	f.addDependency(t, tg, dep)
	read := func() claim.TargetState {
		t.Helper()
		st, err := f.workers[3].ReadTarget(ctxT(t), tg)
		if err != nil {
			t.Fatalf("ReadTarget: %v", err)
		}
		return st
	}
	author, pusher, reviewer := f.login(f.author), f.login(f.workers[1]), f.login(f.reviewer)

	st := read()
	mainBranch, _, err := f.author.SDK(ctx).GetRepoBranch(f.owner, f.name, "main")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "open" || st.Merged || st.Author != author || st.Target.HeadSHA == "" || st.HeadBranch != branch ||
		st.BaseBranch != "main" || st.ParityRevision != mainBranch.Commit.ID || !slices.Equal(st.Pushers, []string{author}) ||
		st.Reviewed || st.Approved || len(st.UnmappedCommitEmails) != 0 {
		t.Fatalf("fresh pull request: %+v", st)
	}
	if len(st.Dependencies) != 1 || st.Dependencies[0].Number != dep.Number || st.Dependencies[0].State != "open" {
		t.Fatalf("dependencies %+v", st.Dependencies)
	}

	// The body CAS works on pull requests too.
	pullRec := f.record(f.workers[0], tg, "claim-pull")
	pullRec.HeadSHA = st.Target.HeadSHA
	pub, err := f.workers[0].Publish(ctx, tg, pullRec)
	if err != nil {
		t.Fatalf("Publish on a pull request: %v", err)
	}
	// The target as read (with its head) names the same item: publishing again
	// through it is the no-op re-publish.
	if again, err := f.workers[0].Publish(ctx, st.Target, pullRec); err != nil || again.ContentVersion != pub.ContentVersion ||
		!sameRecord(again.Record, pullRec) {
		t.Fatalf("re-publish through the read target = %+v, %v; want no write at version %d", again, err, pub.ContentVersion)
	}

	// Another identity pushes: it becomes a pusher and the head moves.
	if item := st.Target; item.HeadSHA == "" || itemOf(item) != tg {
		t.Fatalf("read target %+v, want %+v with its head", st.Target, tg)
	}
	// The head of the target asked for is ignored: a stale one reads the current head.
	stale := tg
	stale.HeadSHA = "0000000000000000000000000000000000000000"
	if got, err := f.workers[3].ReadTarget(ctx, stale); err != nil || got.Target != st.Target {
		t.Fatalf("ReadTarget with a stale head = %+v, %v; want target %+v", got.Target, err, st.Target)
	}
	oldHead := st.Target.HeadSHA
	f.pushFile(t, f.workers[1], branch, branch+"/second.txt", "second\n")
	st = eventually(t, read, func(st claim.TargetState) bool { return st.Target.HeadSHA != oldHead }, "head to move")
	if !slices.Equal(st.Pushers, sortedUnique([]string{author, pusher})) {
		t.Fatalf("pushers %v, want %s and %s", st.Pushers, author, pusher)
	}

	review := func(state gitea.ReviewStateType, body string) {
		t.Helper()
		if _, _, err := f.reviewer.SDK(ctxT(t)).CreatePullReview(f.owner, f.name, tg.Number,
			gitea.CreatePullReviewOptions{State: state, Body: body}); err != nil {
			t.Fatalf("review %s: %v", state, err)
		}
	}
	review(gitea.ReviewStateComment, "A question.")
	if st = read(); !st.Reviewed || st.Approved || st.ChangesRequested {
		t.Fatalf("after a comment review: reviewed=%v approved=%v changes=%v", st.Reviewed, st.Approved, st.ChangesRequested)
	}
	review(gitea.ReviewStateRequestChanges, "Please change.")
	if st = read(); !st.Reviewed || st.Approved || !st.ChangesRequested {
		t.Fatalf("after a change request: reviewed=%v approved=%v changes=%v", st.Reviewed, st.Approved, st.ChangesRequested)
	}
	review(gitea.ReviewStateApproved, "")
	st = read()
	if !st.Approved || len(st.Reviews) != 3 || st.Reviews[2].Reviewer != reviewer || st.Reviews[2].State != claim.ReviewApproved {
		t.Fatalf("after an approval: approved=%v reviews %+v", st.Approved, st.Reviews)
	}

	// A new push makes the approval stale.
	oldHead = st.Target.HeadSHA
	f.pushFile(t, f.workers[1], branch, branch+"/third.txt", "third\n")
	st = eventually(t, read, func(st claim.TargetState) bool { return st.Target.HeadSHA != oldHead && !st.Approved }, "approval to go stale")
	review(gitea.ReviewStateApproved, "")
	if st = read(); !st.Approved {
		t.Fatalf("fresh approval not seen: %+v", st.Reviews)
	}

	// Gitea refuses to merge while a dependency is open; close it, then merge
	// (mergeability is checked asynchronously, so retry briefly).
	closedState := gitea.StateClosed
	if _, _, err := f.author.SDK(ctx).EditIssue(f.owner, f.name, dep.Number, gitea.EditIssueOption{State: &closedState}); err != nil {
		t.Fatal(err)
	}
	if st = read(); len(st.Dependencies) != 1 || st.Dependencies[0].State != "closed" {
		t.Fatalf("closed dependency reads as %+v", st.Dependencies)
	}
	var mergeErr error
	st = eventually(t, func() claim.TargetState {
		_, _, mergeErr = f.reviewer.SDK(ctxT(t)).MergePullRequest(f.owner, f.name, tg.Number,
			gitea.MergePullRequestOption{Style: gitea.MergeStyleMerge})
		return read()
	}, func(st claim.TargetState) bool { return st.Merged }, "merge")
	if mergeErr != nil {
		t.Logf("merge call answered %v, yet the pull request is merged", mergeErr)
	}
	if st.State != "closed" {
		t.Fatalf("merged pull request in state %q", st.State)
	}
	if st.MergedBy != reviewer || st.MergeCommit == "" || st.MergeCommit == st.Target.HeadSHA {
		t.Fatalf("merged by %q as %q (head %s), want by %s as a merge commit", st.MergedBy, st.MergeCommit, st.Target.HeadSHA, reviewer)
	}
}

// addDependency makes tg depend on dep. The SDK's IssueMeta lacks the owner
// and repo fields Gitea 1.26 needs, so this goes over plain HTTP.
func (f *fixture) addDependency(t *testing.T, tg, dep claim.Target) {
	t.Helper()
	body := map[string]any{"index": dep.Number, "owner": f.owner, "repo": f.name}
	if err := f.author.doJSON(ctxT(t), http.MethodPost, issuePath(f.owner, f.name, tg.Number)+"/dependencies", body, nil); err != nil {
		t.Fatalf("making #%d depend on #%d: %v", tg.Number, dep.Number, err)
	}
}

// eventually polls read until ok holds (or fails after 30 s).
func eventually(t *testing.T, read func() claim.TargetState, ok func(claim.TargetState) bool, what string) claim.TargetState {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := read()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last state %+v", what, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestPublishFileIsIdempotent(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	path := "policy/claim-rules-" + randomHex(2) + ".yaml"
	v1 := []byte("version: 1\nrules: []\n")
	first, err := f.admin.PublishFile(ctx, f.repo, path, v1, "Publish claim rules v1")
	if err != nil || !first.Changed || first.CommitSHA == "" || first.BlobSHA == "" {
		t.Fatalf("first PublishFile = %+v, %v", first, err)
	}
	same, err := f.admin.PublishFile(ctx, f.repo, path, v1, "Publish claim rules v1")
	if err != nil || same.Changed || same.CommitSHA != first.CommitSHA || same.BlobSHA != first.BlobSHA {
		t.Fatalf("unchanged PublishFile = %+v, %v; want no commit and %+v", same, err, first)
	}
	v2 := []byte("version: 2\nrules: [x]\n")
	second, err := f.admin.PublishFile(ctx, f.repo, path, v2, "Publish claim rules v2")
	if err != nil || !second.Changed || second.CommitSHA == first.CommitSHA {
		t.Fatalf("changed PublishFile = %+v, %v", second, err)
	}
	raw, _, err := f.reviewer.SDK(ctx).GetFile(f.owner, f.name, "main", path)
	if err != nil || string(raw) != string(v2) {
		t.Fatalf("file on main = %q, %v; want %q", raw, err, v2)
	}
	// A directory where the file belongs (a merged pull request replaced the file by
	// one) is replaced by the file: the path belongs to its publisher.
	dir := path + ".d"
	if _, err := f.admin.PublishFile(ctx, f.repo, dir+"/inner.txt", []byte("x\n"), "a directory in the way"); err != nil {
		t.Fatal(err)
	}
	replaced, err := f.admin.PublishFile(ctx, f.repo, dir, v1, "Publish claim rules v1 over a directory")
	if err != nil || !replaced.Changed {
		t.Fatalf("PublishFile onto a directory = %+v, %v; want the directory replaced by the file", replaced, err)
	}
	if raw, err := f.admin.ReadFile(ctx, f.repo, dir); err != nil || string(raw) != string(v1) {
		t.Fatalf("the file that replaced the directory reads %q, %v", raw, err)
	}
	if _, err := f.admin.ReadFile(ctx, f.repo, dir+"/inner.txt"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the directory's file is still there: %v", err)
	}
	if _, err := f.admin.PublishFile(ctx, "no-slash", path, v1, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("PublishFile to a bad repository name: err = %v", err)
	}
}

// commitAs commits a file to branch through c's account, with the commit's author and
// committer set to who (nil: c's own account) and the given message.
func (f *fixture) commitAs(t *testing.T, c *Client, branch, message string, who *gitea.Identity) {
	t.Helper()
	opts := gitea.FileOptions{Message: message, BranchName: branch}
	if who != nil {
		opts.Author, opts.Committer = *who, *who
	}
	path := branch + "/" + randomHex(3) + ".txt"
	if _, _, err := c.SDK(ctxT(t)).CreateFile(f.owner, f.name, path, gitea.CreateFileOptions{
		FileOptions: opts, Content: base64.StdEncoding.EncodeToString([]byte("content\n")),
	}); err != nil {
		t.Fatalf("committing %s to %s as %s: %v", path, branch, f.login(c), err)
	}
}

// TestReadTargetPushersFromTimeline: Gitea's own push records (pull_push timeline events)
// name the account that pushed, even when the commits it pushed claim another author and
// committer; Co-authored-by trailers name accounts through their e-mails, and a co-author
// e-mail no account owns (or one the reading token may not look up) fails closed.
func TestReadTargetPushersFromTimeline(t *testing.T) {
	f := giteaFixture(t)
	tg, branch := f.newPull(t, "pushers from the timeline")
	author := f.login(f.author)
	pusher, forged := f.login(f.workers[0]), f.login(f.workers[1])
	coPusher, coAuthor := f.login(f.workers[2]), f.login(f.workers[3])
	readAs := func(c *Client) func() claim.TargetState {
		return func() claim.TargetState {
			t.Helper()
			st, err := c.ReadTarget(ctxT(t), tg)
			if err != nil {
				t.Fatalf("ReadTarget: %v", err)
			}
			return st
		}
	}
	read := readAs(f.admin)
	head := read().Target.HeadSHA

	// workers[0] pushes a commit whose author and committer are workers[1]'s e-mail.
	f.commitAs(t, f.workers[0], branch, "Forged authorship", &gitea.Identity{Name: forged, Email: forged + "@example.invalid"})
	st := eventually(t, read, func(st claim.TargetState) bool {
		return st.Target.HeadSHA != head && slices.Contains(st.Pushers, pusher)
	}, "the push by "+pusher+" to show")
	if !slices.Contains(st.Pushers, forged) || !slices.Contains(st.Pushers, author) || len(st.UnmappedCommitEmails) != 0 {
		t.Fatalf("after a forged-author push: pushers %v, unmapped %v", st.Pushers, st.UnmappedCommitEmails)
	}
	if st.UnattributedPushes != 0 {
		t.Fatalf("unattributed pushes %d", st.UnattributedPushes)
	}

	// workers[2] pushes a commit co-authored by workers[3].
	head = st.Target.HeadSHA
	f.commitAs(t, f.workers[2], branch, "Pair work\n\nCo-authored-by: Someone <"+strings.ToUpper(coAuthor)+"@example.invalid>\n", nil)
	st = eventually(t, read, func(st claim.TargetState) bool { return st.Target.HeadSHA != head }, "the co-authored commit")
	if !slices.Contains(st.Pushers, coPusher) || !slices.Contains(st.Pushers, coAuthor) || len(st.UnmappedCommitEmails) != 0 {
		t.Fatalf("after a co-authored commit: pushers %v, unmapped %v", st.Pushers, st.UnmappedCommitEmails)
	}
	if err := claim.CheckIndependence(coAuthor, claim.RoleReviewer, st); !errors.Is(err, claim.ErrPusherConflict) {
		t.Fatalf("co-author reviewing: %v, want ErrPusherConflict", err)
	}
	if err := claim.CheckIndependence(pusher, claim.RoleReviewer, st); !errors.Is(err, claim.ErrPusherConflict) {
		t.Fatalf("pusher of forged commits reviewing: %v, want ErrPusherConflict", err)
	}

	// A token that may not search e-mails cannot map the co-author: fail closed.
	if nonAdmin := readAs(f.reviewer)(); !slices.Contains(nonAdmin.UnmappedCommitEmails, coAuthor+"@example.invalid") ||
		slices.Contains(nonAdmin.Pushers, coAuthor) {
		t.Fatalf("read without e-mail search: pushers %v, unmapped %v", nonAdmin.Pushers, nonAdmin.UnmappedCommitEmails)
	}

	// A co-author e-mail nobody owns, and a trailer without an e-mail, are unmappable.
	head = st.Target.HeadSHA
	nobody := "nobody-" + randomHex(3) + "@nowhere.invalid"
	f.commitAs(t, f.workers[2], branch, "More\n\nCo-authored-by: Ghost <"+nobody+">\nCo-Authored-By: just a name\n", nil)
	st = eventually(t, read, func(st claim.TargetState) bool { return st.Target.HeadSHA != head }, "the ghost-co-authored commit")
	if !slices.Equal(st.UnmappedCommitEmails, []string{"co-authored-by:just a name", nobody}) {
		t.Fatalf("unmapped %v", st.UnmappedCommitEmails)
	}
	if err := claim.CheckIndependence(f.login(f.reviewer), claim.RoleReviewer, st); !errors.Is(err, claim.ErrIndependenceUnprovable) {
		t.Fatalf("independence with an unmappable co-author: %v", err)
	}
}

// TestReadTargetReferencingPulls: a pull request whose body mentions the issue shows on
// the issue as a cross-reference naming the pull request, its author and creation time,
// while a claim record is in force on the issue (only a holder's completion uses it).
func TestReadTargetReferencingPulls(t *testing.T) {
	f := giteaFixture(t)
	ctx := ctxT(t)
	issue := f.newIssue(t, "to be fixed", "Body.")
	st, err := f.admin.ReadTarget(ctx, issue)
	if err != nil {
		t.Fatalf("ReadTarget: %v", err)
	}
	if len(st.ReferencingPulls) != 0 {
		t.Fatalf("fresh issue has references %+v", st.ReferencingPulls)
	}
	if _, err := f.workers[0].Publish(ctx, issue, f.record(f.workers[0], issue, "claim-referenced")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	before := time.Now().Add(-2 * time.Second)
	w := f.workers[0]
	branch := "fix-" + randomHex(4)
	if _, _, err := w.SDK(ctx).CreateFile(f.owner, f.name, branch+"/fix.txt", gitea.CreateFileOptions{
		FileOptions: gitea.FileOptions{Message: "Fix", BranchName: "main", NewBranchName: branch},
		Content:     base64.StdEncoding.EncodeToString([]byte("fix\n")),
	}); err != nil {
		t.Fatal(err)
	}
	pr, _, err := w.SDK(ctx).CreatePullRequest(f.owner, f.name, gitea.CreatePullRequestOption{
		Head: branch, Base: "main", Title: "A fix", Body: "Fixes #" + strconv.FormatInt(issue.Number, 10) + "\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	st = eventually(t, func() claim.TargetState {
		st, err := f.admin.ReadTarget(ctxT(t), issue)
		if err != nil {
			t.Fatalf("ReadTarget: %v", err)
		}
		return st
	}, func(st claim.TargetState) bool { return len(st.ReferencingPulls) > 0 }, "the cross-reference")
	ref := st.ReferencingPulls[0]
	if ref.Number != pr.Index || ref.Author != f.login(w) || !strings.EqualFold(ref.Repository, f.repo) ||
		ref.CreatedAt.Before(before) || ref.CreatedAt.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("reference %+v, want #%d by %s in %s", ref, pr.Index, f.login(w), f.repo)
	}
	// Once the record is no longer in force nobody's completion is due: the timeline is
	// not read.
	if _, err := f.workers[0].Clear(ctx, issue, "claim-referenced", claim.RecordStateReleased); err != nil {
		t.Fatalf("Clear: %v", err)
	}
	if st, err = f.admin.ReadTarget(ctx, issue); err != nil || len(st.ReferencingPulls) != 0 {
		t.Fatalf("without a record in force: refs %+v, err %v", st.ReferencingPulls, err)
	}
	// A pull request has no referencing pulls of its own, and its own mention is no push.
	pst, err := f.admin.ReadTarget(ctx, claim.Target{Repository: f.repo, Kind: claim.KindPullRequest, Number: pr.Index})
	if err != nil {
		t.Fatal(err)
	}
	if len(pst.ReferencingPulls) != 0 || !slices.Contains(pst.Pushers, f.login(w)) {
		t.Fatalf("pull request state: refs %+v pushers %v", pst.ReferencingPulls, pst.Pushers)
	}
}
