package giteaclaim

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// The integration tests run against a real Gitea. With GITEA_URL and
// GITEA_TOKEN (an admin token) set they use that server; otherwise the first
// test that needs Gitea starts one through test/support/testgitea (hack/gitea.sh
// on a free port, building Gitea first when the cache is cold), and TestMain
// stops it at the end. A
// server that cannot be built or started fails those tests; it never skips
// them. Every run seeds its own users and repository under a random suffix,
// so a shared server can be reused.

// fixture is the seeded Gitea world shared by the integration tests.
type fixture struct {
	url        string
	admin      *Client
	adminLogin string
	suffix     string
	repo       string // owner/name, owned by the author
	owner      string
	name       string

	author   *Client
	workers  []*Client
	reviewer *Client
	logins   map[*Client]string
}

var (
	fixOnce  sync.Once
	fix      *fixture
	fixErr   error
	server   *testgitea.Server // set once the fixture tried to connect
	serverMu sync.Mutex
)

func TestMain(m *testing.M) {
	code := m.Run()
	serverMu.Lock()
	srv := server
	serverMu.Unlock()
	if srv.Started() {
		keep := code != 0
		if keep {
			// Keep the run directory (logs, database) after a failure.
			fmt.Fprintf(os.Stderr, "giteaclaim: tests failed; Gitea run directory kept: %s\n", srv.RunDir())
		}
		if err := srv.Stop(keep); err != nil {
			fmt.Fprintf(os.Stderr, "giteaclaim: %v\n", err)
		}
	}
	os.Exit(code)
}

// giteaFixture returns the seeded fixture, starting and seeding Gitea on first use.
// Failing to get one fails the test.
func giteaFixture(t *testing.T) *fixture {
	t.Helper()
	fixOnce.Do(func() { fix, fixErr = setupFixture() })
	if fixErr != nil {
		t.Fatalf("Gitea integration fixture unavailable: %v", fixErr)
	}
	return fix
}

// setupFixture connects to (or starts) Gitea and seeds users and a repository.
func setupFixture() (*fixture, error) {
	srv, err := testgitea.Start(context.Background())
	serverMu.Lock()
	server = srv
	serverMu.Unlock()
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	admin, err := New(srv.URL, srv.Token, WithHTTPClient(srv.HTTP))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := &fixture{url: srv.URL, admin: admin, adminLogin: srv.AdminLogin, suffix: testgitea.RandomHex(3), logins: map[*Client]string{}}
	newUser := func(role string) (*Client, error) {
		login := role + "-" + f.suffix
		token, err := srv.CreateUser(ctx, login)
		if err != nil {
			return nil, err
		}
		c := admin.WithToken(token)
		f.logins[c] = login
		return c, nil
	}
	if f.author, err = newUser("author"); err != nil {
		return nil, err
	}
	for i := 1; i <= 4; i++ {
		w, err := newUser("worker" + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		f.workers = append(f.workers, w)
	}
	if f.reviewer, err = newUser("reviewer"); err != nil {
		return nil, err
	}

	f.owner, f.name = f.logins[f.author], "fleet-"+f.suffix
	if f.repo, err = srv.CreateRepo(ctx, f.author.token, f.name); err != nil {
		return nil, err
	}
	for _, c := range append(append([]*Client{}, f.workers...), f.reviewer) {
		if err := srv.AddCollaborator(ctx, f.repo, f.logins[c]); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(os.Stderr, "giteaclaim: seeded users and %s in %s\n", f.repo, time.Since(begin).Round(10*time.Millisecond))
	return f, nil
}

func randomHex(n int) string { return testgitea.RandomHex(n) }

// login returns the Gitea login a fixture client acts as.
func (f *fixture) login(c *Client) string { return f.logins[c] }

// newIssue opens an issue as the author and returns its target.
func (f *fixture) newIssue(t *testing.T, title, body string) claim.Target {
	t.Helper()
	is, _, err := f.author.SDK(ctxT(t)).CreateIssue(f.owner, f.name, gitea.CreateIssueOption{Title: title, Body: body})
	if err != nil {
		t.Fatalf("creating issue %q: %v", title, err)
	}
	return claim.Target{Repository: f.repo, Kind: claim.KindIssue, Number: is.Index}
}

// newPull creates a branch with one file (committed by the author) and opens
// a pull request from it; it returns the target and the branch name.
func (f *fixture) newPull(t *testing.T, title string) (claim.Target, string) {
	t.Helper()
	ctx := ctxT(t)
	branch := "feature-" + randomHex(4)
	if _, _, err := f.author.SDK(ctx).CreateFile(f.owner, f.name, branch+"/change.txt", gitea.CreateFileOptions{
		FileOptions: gitea.FileOptions{Message: "Add change", BranchName: "main", NewBranchName: branch},
		Content:     base64.StdEncoding.EncodeToString([]byte("change on " + branch + "\n")),
	}); err != nil {
		t.Fatalf("creating branch %s: %v", branch, err)
	}
	pr, _, err := f.author.SDK(ctx).CreatePullRequest(f.owner, f.name, gitea.CreatePullRequestOption{
		Head: branch, Base: "main", Title: title, Body: "Pull request body.\n",
	})
	if err != nil {
		t.Fatalf("opening pull request from %s: %v", branch, err)
	}
	return claim.Target{Repository: f.repo, Kind: claim.KindPullRequest, Number: pr.Index}, branch
}

// pushFile commits a file to branch as c.
func (f *fixture) pushFile(t *testing.T, c *Client, branch, path, content string) {
	t.Helper()
	if _, _, err := c.SDK(ctxT(t)).CreateFile(f.owner, f.name, path, gitea.CreateFileOptions{
		FileOptions: gitea.FileOptions{Message: "Update " + path, BranchName: branch},
		Content:     base64.StdEncoding.EncodeToString([]byte(content)),
	}); err != nil {
		t.Fatalf("committing %s to %s as %s: %v", path, branch, f.login(c), err)
	}
}

// record returns an active record of c for target, valid for an hour.
func (f *fixture) record(c *Client, t claim.Target, claimID string) claim.Record {
	now := time.Now().UTC()
	return claim.Record{
		ClaimID: claimID, Worker: "reg-" + f.login(c), Identity: f.login(c), Role: "author",
		Repository: t.Repository, Kind: t.Kind, Number: t.Number, Generation: "1",
		Pin: "sha256:" + claimID, State: claim.RecordStateActive, ClaimedAt: now, ExpiresAt: now.Add(time.Hour),
	}
}

// ctxT is a per-test context bounded well below the suite budget.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
