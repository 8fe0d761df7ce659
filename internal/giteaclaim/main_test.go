package giteaclaim

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"
)

// The integration tests run against a real Gitea. With GITEA_URL and
// GITEA_TOKEN (an admin token) set they use that server; otherwise the first
// test that needs Gitea runs `hack/gitea.sh start` on a free port (building
// Gitea first when the cache is cold), and TestMain stops it at the end. A
// server that cannot be built or started fails those tests; it never skips
// them. Every run seeds its own users and repository under a random suffix,
// so a shared server can be reused.

const (
	userPassword = "Fleet-Us3r-Passw0rd"
	// serverStartTimeout covers a cold Gitea build (about 10 minutes on 2 cores).
	serverStartTimeout = 20 * time.Minute
)

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
	fixOnce   sync.Once
	fix       *fixture
	fixErr    error
	startedOn string // GITEA_PORT of a server this test binary started
	serverMu  sync.Mutex
)

func TestMain(m *testing.M) {
	code := m.Run()
	serverMu.Lock()
	port := startedOn
	serverMu.Unlock()
	if port != "" {
		args := []string{"stop", "--purge"}
		runDir := filepath.Join("..", "..", ".cache", "gitea", "run-"+port)
		if _, err := os.Stat(runDir); code != 0 && err == nil {
			args = args[:1] // keep the run directory (logs, database) after a failure
			fmt.Fprintf(os.Stderr, "giteaclaim: tests failed; Gitea run directory kept: %s\n", runDir)
		}
		cmd := exec.Command(giteaScript(), args...)
		cmd.Env = append(os.Environ(), "GITEA_PORT="+port)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "giteaclaim: stopping Gitea on port %s: %v\n", port, err)
		}
	}
	os.Exit(code)
}

// giteaScript is the path of hack/gitea.sh relative to this package.
func giteaScript() string {
	p, err := filepath.Abs(filepath.Join("..", "..", "hack", "gitea.sh"))
	if err != nil {
		return filepath.Join("..", "..", "hack", "gitea.sh")
	}
	return p
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
	url, token := os.Getenv("GITEA_URL"), os.Getenv("GITEA_TOKEN")
	if url == "" || token == "" {
		var err error
		if url, token, err = startServer(); err != nil {
			return nil, err
		}
	}
	begin := time.Now()
	admin, err := New(url, token, WithHTTPClient(newHTTPClient()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	me, _, err := admin.SDK(ctx).GetMyUserInfo()
	if err != nil {
		return nil, fmt.Errorf("GITEA_TOKEN does not work on %s: %w", url, err)
	}
	f := &fixture{url: url, admin: admin, adminLogin: me.UserName, suffix: randomHex(3), logins: map[*Client]string{}}
	newUser := func(role string) (*Client, error) {
		login := role + "-" + f.suffix
		c, err := f.createUser(ctx, login)
		if err == nil {
			f.logins[c] = login
		}
		return c, err
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
	f.repo = f.owner + "/" + f.name
	if _, _, err := f.author.SDK(ctx).CreateRepo(gitea.CreateRepoOption{
		Name: f.name, AutoInit: true, DefaultBranch: "main", Readme: "Default",
		Description: "giteaclaim integration tests",
	}); err != nil {
		return nil, fmt.Errorf("creating repository %s: %w", f.repo, err)
	}
	write := gitea.AccessModeWrite
	for _, c := range append(append([]*Client{}, f.workers...), f.reviewer) {
		if _, err := f.author.SDK(ctx).AddCollaborator(f.owner, f.name, f.logins[c],
			gitea.AddCollaboratorOption{Permission: &write}); err != nil {
			return nil, fmt.Errorf("adding collaborator %s: %w", f.logins[c], err)
		}
	}
	fmt.Fprintf(os.Stderr, "giteaclaim: seeded users and %s in %s\n", f.repo, time.Since(begin).Round(10*time.Millisecond))
	return f, nil
}

// startServer runs hack/gitea.sh start on a free port and reads its env file.
func startServer() (url, token string, err error) {
	port, err := freePort()
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), serverStartTimeout)
	defer cancel()
	begin := time.Now()
	cmd := exec.CommandContext(ctx, giteaScript(), "start")
	cmd.Env = append(os.Environ(), "GITEA_PORT="+port)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	serverMu.Lock()
	startedOn = port // stop even a half-started server
	serverMu.Unlock()
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("hack/gitea.sh start (GITEA_PORT=%s): %w", port, err)
	}
	fmt.Fprintf(os.Stderr, "giteaclaim: Gitea ready on port %s after %s\n", port, time.Since(begin).Round(100*time.Millisecond))
	envFile := strings.TrimSpace(lastLine(stdout.String()))
	vars, err := readEnvFile(envFile)
	if err != nil {
		return "", "", err
	}
	if vars["GITEA_URL"] == "" || vars["GITEA_TOKEN"] == "" {
		return "", "", fmt.Errorf("%s lacks GITEA_URL or GITEA_TOKEN", envFile)
	}
	return vars["GITEA_URL"], vars["GITEA_TOKEN"], nil
}

// readEnvFile parses the `export KEY=value` lines hack/gitea.sh writes.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading Gitea env file: %w", err)
	}
	defer func() { _ = f.Close() }()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	return vars, sc.Err()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// newHTTPClient allows enough idle connections for the concurrency tests.
func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createUser creates a user through the admin API and returns a client that
// authenticates with a fresh all-scopes token of that user.
func (f *fixture) createUser(ctx context.Context, login string) (*Client, error) {
	mustChange := false
	if _, _, err := f.admin.SDK(ctx).AdminCreateUser(gitea.CreateUserOption{
		Username: login, Email: login + "@example.invalid", Password: userPassword,
		MustChangePassword: &mustChange,
	}); err != nil {
		return nil, fmt.Errorf("creating user %s: %w", login, err)
	}
	basic, err := gitea.NewClient(f.url, gitea.SetBasicAuth(login, userPassword), gitea.SetContext(ctx),
		gitea.SetGiteaVersion(""), gitea.SetHTTPClient(f.admin.http))
	if err != nil {
		return nil, err
	}
	tok, _, err := basic.CreateAccessToken(gitea.CreateAccessTokenOption{
		Name: "it-" + login, Scopes: []gitea.AccessTokenScope{gitea.AccessTokenScopeAll},
	})
	if err != nil {
		return nil, fmt.Errorf("creating token for %s: %w", login, err)
	}
	return f.admin.WithToken(tok.Token), nil
}

// login returns the Gitea login a fixture client acts as.
func (f *fixture) login(c *Client) string { return f.logins[c] }

// newIssue opens an issue as the author and returns its target.
func (f *fixture) newIssue(t *testing.T, title, body string) Target {
	t.Helper()
	is, _, err := f.author.SDK(ctxT(t)).CreateIssue(f.owner, f.name, gitea.CreateIssueOption{Title: title, Body: body})
	if err != nil {
		t.Fatalf("creating issue %q: %v", title, err)
	}
	return Target{Repository: f.repo, Kind: KindIssue, Number: is.Index}
}

// newPull creates a branch with one file (committed by the author) and opens
// a pull request from it; it returns the target and the branch name.
func (f *fixture) newPull(t *testing.T, title string) (Target, string) {
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
	return Target{Repository: f.repo, Kind: KindPullRequest, Number: pr.Index}, branch
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
func (f *fixture) record(c *Client, t Target, claimID string) Record {
	now := time.Now().UTC()
	return Record{
		ClaimID: claimID, Worker: "reg-" + f.login(c), Identity: f.login(c), Role: "author",
		Repository: t.Repository, Kind: t.Kind, Number: t.Number, Generation: "1",
		Pin: "sha256:" + claimID, State: StateActive, ClaimedAt: now, ExpiresAt: now.Add(time.Hour),
	}
}

// ctxT is a per-test context bounded well below the suite budget.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
