// Package testgitea gives integration tests a real Gitea server: it reuses the one named by
// GITEA_URL and GITEA_TOKEN (an administrator's token) or starts a throwaway one with
// hack/gitea.sh on a free port, and it seeds users, repositories and pull requests through
// the Gitea API. Only tests import it. It deliberately depends on the Gitea SDK alone (not
// on internal/giteaclaim), so the tests of that package can use it without an import cycle.
//
// A server that cannot be built or started is an error for the caller to fail on; this
// package never skips anything.
package testgitea

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"
)

const (
	// UserPassword is the password of every user CreateUser makes.
	UserPassword = "Fleet-Us3r-Passw0rd"
	// StartTimeout covers a cold Gitea build (about ten minutes on two cores) plus startup.
	StartTimeout = 20 * time.Minute
)

// Server is a reachable Gitea server and its administrator token.
type Server struct {
	// URL is the server's base URL (scheme, host and port).
	URL string
	// Token is an all-scopes access token of an administrator.
	Token string
	// AdminLogin is the login Token belongs to.
	AdminLogin string
	// HTTP is the HTTP client every helper uses; it keeps enough idle connections for
	// concurrent tests.
	HTTP *http.Client

	script string // hack/gitea.sh
	port   string // set when this process started the server
}

// Start connects to the server named by GITEA_URL and GITEA_TOKEN, or, when either is
// unset, runs `hack/gitea.sh start` on a free port (building Gitea first when its cache is
// cold). The script is FLEET_GITEA_SCRIPT when set, else hack/gitea.sh found by walking up
// from the working directory. Call Stop when done.
func Start(ctx context.Context) (*Server, error) {
	s := &Server{HTTP: NewHTTPClient()}
	s.URL, s.Token = os.Getenv("GITEA_URL"), os.Getenv("GITEA_TOKEN")
	if s.URL == "" || s.Token == "" {
		script, err := findScript()
		if err != nil {
			return nil, err
		}
		s.script = script
		if err := s.startLocal(ctx); err != nil {
			return s, err // s.Stop still cleans up a half-started server
		}
	}
	s.URL = strings.TrimRight(s.URL, "/")
	me, _, err := s.SDK(ctx, s.Token).GetMyUserInfo()
	if err != nil {
		return s, fmt.Errorf("the Gitea admin token does not work on %s: %w", s.URL, err)
	}
	if !me.IsAdmin {
		return s, fmt.Errorf("the Gitea token for %s belongs to %s, who is not an administrator", s.URL, me.UserName)
	}
	s.AdminLogin = me.UserName
	return s, nil
}

// Started reports whether this process started the server (and Stop will stop it).
func (s *Server) Started() bool { return s != nil && s.port != "" }

// RunDir is the run directory (database, repositories, logs) of a server this process
// started, or "".
func (s *Server) RunDir() string {
	if !s.Started() {
		return ""
	}
	return filepath.Join(filepath.Dir(filepath.Dir(s.script)), ".cache", "gitea", "run-"+s.port)
}

// Stop stops a server this process started; with keepRunDir its run directory stays for
// inspection (use it when tests failed). It does nothing for a server it did not start.
func (s *Server) Stop(keepRunDir bool) error {
	if !s.Started() {
		return nil
	}
	args := []string{"stop"}
	if !keepRunDir {
		args = append(args, "--purge")
	}
	cmd := exec.Command(s.script, args...)
	cmd.Env = append(os.Environ(), "GITEA_PORT="+s.port)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("stopping Gitea on port %s: %w", s.port, err)
	}
	return nil
}

// startLocal runs the script on a free port and reads the env file it prints.
func (s *Server) startLocal(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	begin := time.Now()
	cmd := exec.CommandContext(ctx, s.script, "start")
	cmd.Env = append(os.Environ(), "GITEA_PORT="+port)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	s.port = port // stop even a half-started server
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s start (GITEA_PORT=%s): %w", s.script, port, err)
	}
	fmt.Fprintf(os.Stderr, "testgitea: Gitea ready on port %s after %s\n", port, time.Since(begin).Round(100*time.Millisecond))
	out := strings.TrimSpace(stdout.String())
	envFile := strings.TrimSpace(out[strings.LastIndex(out, "\n")+1:])
	vars, err := readEnvFile(envFile)
	if err != nil {
		return err
	}
	if vars["GITEA_URL"] == "" || vars["GITEA_TOKEN"] == "" {
		return fmt.Errorf("%s lacks GITEA_URL or GITEA_TOKEN", envFile)
	}
	s.URL, s.Token = vars["GITEA_URL"], vars["GITEA_TOKEN"]
	return nil
}

// findScript locates hack/gitea.sh.
func findScript() (string, error) {
	if p := os.Getenv("FLEET_GITEA_SCRIPT"); p != "" {
		return filepath.Abs(p)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("locating hack/gitea.sh: %w", err)
	}
	for {
		p := filepath.Join(dir, "hack", "gitea.sh")
		if _, err := os.Stat(p); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("hack/gitea.sh not found above the working directory; set FLEET_GITEA_SCRIPT or GITEA_URL and GITEA_TOKEN")
		}
		dir = parent
	}
}

// readEnvFile parses the `export KEY=value` lines hack/gitea.sh writes.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the Gitea env file: %w", err)
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

// NewHTTPClient returns an HTTP client with enough idle connections per host for
// concurrency tests and a bounded request time.
func NewHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// RandomHex returns 2n random hex digits.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// SDK returns a Gitea SDK client bound to ctx that authenticates with token. Version
// probing is off, so making one does no I/O.
func (s *Server) SDK(ctx context.Context, token string) *gitea.Client {
	c, err := gitea.NewClient(s.URL, gitea.SetToken(token), gitea.SetHTTPClient(s.HTTP),
		gitea.SetContext(ctx), gitea.SetGiteaVersion(""))
	if err != nil {
		// None of the options can fail; keep a usable client anyway.
		return gitea.NewClientWithHTTP(s.URL, s.HTTP)
	}
	return c
}

// Admin returns an SDK client of the administrator.
func (s *Server) Admin(ctx context.Context) *gitea.Client { return s.SDK(ctx, s.Token) }

// CreateUser creates a user with UserPassword and the e-mail login@example.invalid, and
// returns a fresh all-scopes access token of that user.
func (s *Server) CreateUser(ctx context.Context, login string) (string, error) {
	mustChange := false
	if _, _, err := s.Admin(ctx).AdminCreateUser(gitea.CreateUserOption{
		Username: login, Email: login + "@example.invalid", Password: UserPassword,
		MustChangePassword: &mustChange,
	}); err != nil {
		return "", fmt.Errorf("creating Gitea user %s: %w", login, err)
	}
	basic, err := gitea.NewClient(s.URL, gitea.SetBasicAuth(login, UserPassword), gitea.SetContext(ctx),
		gitea.SetGiteaVersion(""), gitea.SetHTTPClient(s.HTTP))
	if err != nil {
		return "", err
	}
	tok, _, err := basic.CreateAccessToken(gitea.CreateAccessTokenOption{
		Name: "it-" + login, Scopes: []gitea.AccessTokenScope{gitea.AccessTokenScopeAll},
	})
	if err != nil {
		return "", fmt.Errorf("creating a token for %s: %w", login, err)
	}
	return tok.Token, nil
}

// CreateRepo creates the repository name owned by the token's user, initialised with a
// README on branch main, and returns its "owner/name".
func (s *Server) CreateRepo(ctx context.Context, ownerToken, name string) (string, error) {
	r, _, err := s.SDK(ctx, ownerToken).CreateRepo(gitea.CreateRepoOption{
		Name: name, AutoInit: true, DefaultBranch: "main", Readme: "Default",
		Description: "fleet-controller integration tests",
	})
	if err != nil {
		return "", fmt.Errorf("creating repository %s: %w", name, err)
	}
	return r.FullName, nil
}

// AddCollaborator gives login write access to repo ("owner/name").
func (s *Server) AddCollaborator(ctx context.Context, repo, login string) error {
	owner, name, err := split(repo)
	if err != nil {
		return err
	}
	write := gitea.AccessModeWrite
	if _, err := s.Admin(ctx).AddCollaborator(owner, name, login, gitea.AddCollaboratorOption{Permission: &write}); err != nil {
		return fmt.Errorf("adding collaborator %s to %s: %w", login, repo, err)
	}
	return nil
}

// CreateIssue opens an issue as the token's user and returns its number.
func (s *Server) CreateIssue(ctx context.Context, token, repo, title, body string) (int64, error) {
	owner, name, err := split(repo)
	if err != nil {
		return 0, err
	}
	is, _, err := s.SDK(ctx, token).CreateIssue(owner, name, gitea.CreateIssueOption{Title: title, Body: body})
	if err != nil {
		return 0, fmt.Errorf("creating issue %q in %s: %w", title, repo, err)
	}
	return is.Index, nil
}

// CommitFile commits content at path as the token's user. With newBranch set, the commit
// starts that branch from branch; otherwise it lands on branch. It returns the commit id.
func (s *Server) CommitFile(ctx context.Context, token, repo, branch, newBranch, path, content string) (string, error) {
	owner, name, err := split(repo)
	if err != nil {
		return "", err
	}
	fr, _, err := s.SDK(ctx, token).CreateFile(owner, name, path, gitea.CreateFileOptions{
		FileOptions: gitea.FileOptions{Message: "Add " + path, BranchName: branch, NewBranchName: newBranch},
		Content:     base64.StdEncoding.EncodeToString([]byte(content)),
	})
	if err != nil {
		return "", fmt.Errorf("committing %s to %s in %s: %w", path, branch, repo, err)
	}
	if fr.Commit == nil || fr.Commit.SHA == "" {
		return "", fmt.Errorf("committing %s in %s: Gitea returned no commit id", path, repo)
	}
	return fr.Commit.SHA, nil
}

// Commit commits content at path on branch as the token's user (the pusher), with the
// given commit message and, when who is set, that author and committer instead of the
// token's user. It returns the commit id.
func (s *Server) Commit(ctx context.Context, token, repo, branch, path, content, message string, who *gitea.Identity) (string, error) {
	owner, name, err := split(repo)
	if err != nil {
		return "", err
	}
	opts := gitea.FileOptions{Message: message, BranchName: branch}
	if who != nil {
		opts.Author, opts.Committer = *who, *who
	}
	fr, _, err := s.SDK(ctx, token).CreateFile(owner, name, path, gitea.CreateFileOptions{
		FileOptions: opts, Content: base64.StdEncoding.EncodeToString([]byte(content)),
	})
	if err != nil {
		return "", fmt.Errorf("committing %s to %s in %s: %w", path, branch, repo, err)
	}
	if fr.Commit == nil || fr.Commit.SHA == "" {
		return "", fmt.Errorf("committing %s in %s: Gitea returned no commit id", path, repo)
	}
	return fr.Commit.SHA, nil
}

// Merge merges a pull request (merge commit style) as the token's user.
func (s *Server) Merge(ctx context.Context, token, repo string, number int64) error {
	owner, name, err := split(repo)
	if err != nil {
		return err
	}
	if _, _, err := s.SDK(ctx, token).MergePullRequest(owner, name, number,
		gitea.MergePullRequestOption{Style: gitea.MergeStyleMerge}); err != nil {
		return fmt.Errorf("merging %s#%d: %w", repo, number, err)
	}
	return nil
}

// PullRequest is a pull request CreatePull opened.
type PullRequest struct {
	// Number is the pull request's number.
	Number int64
	// Branch is its head branch.
	Branch string
	// HeadSHA is its head commit.
	HeadSHA string
}

// CreatePull starts a new branch from main with one commit and opens a pull request from
// it, both as the token's user.
func (s *Server) CreatePull(ctx context.Context, token, repo, title string) (PullRequest, error) {
	return s.CreatePullWithBody(ctx, token, repo, title, "Pull request body.\n")
}

// CreatePullWithBody is CreatePull with the pull request's body (a body mentioning "#N"
// makes Gitea cross-reference issue N).
func (s *Server) CreatePullWithBody(ctx context.Context, token, repo, title, body string) (PullRequest, error) {
	owner, name, err := split(repo)
	if err != nil {
		return PullRequest{}, err
	}
	branch := "feature-" + RandomHex(4)
	head, err := s.CommitFile(ctx, token, repo, "main", branch, branch+"/change.txt", "change on "+branch+"\n")
	if err != nil {
		return PullRequest{}, err
	}
	pr, _, err := s.SDK(ctx, token).CreatePullRequest(owner, name, gitea.CreatePullRequestOption{
		Head: branch, Base: "main", Title: title, Body: body,
	})
	if err != nil {
		return PullRequest{}, fmt.Errorf("opening a pull request from %s in %s: %w", branch, repo, err)
	}
	return PullRequest{Number: pr.Index, Branch: branch, HeadSHA: head}, nil
}

// PullHead returns the head commit Gitea currently records for a pull request.
func (s *Server) PullHead(ctx context.Context, repo string, number int64) (string, error) {
	owner, name, err := split(repo)
	if err != nil {
		return "", err
	}
	pr, _, err := s.Admin(ctx).GetPullRequest(owner, name, number)
	if err != nil {
		return "", fmt.Errorf("reading pull request %s#%d: %w", repo, number, err)
	}
	if pr.Head == nil {
		return "", nil
	}
	return pr.Head.Sha, nil
}

// Review submits a pull request review as the token's user: gitea.ReviewStateApproved,
// ReviewStateComment or ReviewStateRequestChanges.
func (s *Server) Review(ctx context.Context, token, repo string, number int64, state gitea.ReviewStateType, body string) error {
	owner, name, err := split(repo)
	if err != nil {
		return err
	}
	if _, _, err := s.SDK(ctx, token).CreatePullReview(owner, name, number,
		gitea.CreatePullReviewOptions{State: state, Body: body}); err != nil {
		return fmt.Errorf("reviewing %s#%d (%s): %w", repo, number, state, err)
	}
	return nil
}

// SetState opens or closes an issue or pull request (as the administrator).
func (s *Server) SetState(ctx context.Context, repo string, number int64, state gitea.StateType) error {
	owner, name, err := split(repo)
	if err != nil {
		return err
	}
	if _, _, err := s.Admin(ctx).EditIssue(owner, name, number, gitea.EditIssueOption{State: &state}); err != nil {
		return fmt.Errorf("setting %s#%d to %s: %w", repo, number, state, err)
	}
	return nil
}

// CloseOpenPulls closes every open pull request of repo (as the administrator) and
// returns how many it closed. Gitea tests every open pull request into a branch again
// each time that branch moves, so a suite that leaves its pull requests open pays for
// all of them at every later merge or commit to the default branch.
func (s *Server) CloseOpenPulls(ctx context.Context, repo string) (int, error) {
	owner, name, err := split(repo)
	if err != nil {
		return 0, err
	}
	closed := gitea.StateClosed
	n := 0
	for range 100 {
		// Always the first page: each pass closes what it lists.
		open, _, err := s.Admin(ctx).ListRepoPullRequests(owner, name, gitea.ListPullRequestsOptions{
			ListOptions: gitea.ListOptions{Page: 1, PageSize: 50}, State: gitea.StateOpen})
		if err != nil {
			return n, fmt.Errorf("listing the open pull requests of %s: %w", repo, err)
		}
		if len(open) == 0 {
			return n, nil
		}
		for _, pr := range open {
			if _, _, err := s.Admin(ctx).EditPullRequest(owner, name, pr.Index, gitea.EditPullRequestOption{State: &closed}); err != nil {
				return n, fmt.Errorf("closing %s#%d: %w", repo, pr.Index, err)
			}
			n++
		}
	}
	return n, fmt.Errorf("%s still has open pull requests after closing %d", repo, n)
}

// Assign assigns an issue or pull request to logins (as the administrator).
func (s *Server) Assign(ctx context.Context, repo string, number int64, logins ...string) error {
	owner, name, err := split(repo)
	if err != nil {
		return err
	}
	if _, _, err := s.Admin(ctx).EditIssue(owner, name, number, gitea.EditIssueOption{Assignees: logins}); err != nil {
		return fmt.Errorf("assigning %s#%d to %v: %w", repo, number, logins, err)
	}
	return nil
}

// EnsureLabel returns the id of the label name in repo, creating it when missing.
func (s *Server) EnsureLabel(ctx context.Context, repo, label string) (int64, error) {
	owner, name, err := split(repo)
	if err != nil {
		return 0, err
	}
	sdk := s.Admin(ctx)
	labels, _, err := sdk.ListRepoLabels(owner, name, gitea.ListLabelsOptions{ListOptions: gitea.ListOptions{PageSize: 50}})
	if err != nil {
		return 0, fmt.Errorf("listing labels of %s: %w", repo, err)
	}
	for _, l := range labels {
		if l.Name == label {
			return l.ID, nil
		}
	}
	l, _, err := sdk.CreateLabel(owner, name, gitea.CreateLabelOption{Name: label, Color: "#e11d21"})
	if err != nil {
		return 0, fmt.Errorf("creating label %s in %s: %w", label, repo, err)
	}
	return l.ID, nil
}

// AddLabel puts the label on an issue or pull request (as the administrator).
func (s *Server) AddLabel(ctx context.Context, repo string, number, labelID int64) error {
	owner, name, err := split(repo)
	if err != nil {
		return err
	}
	if _, _, err := s.Admin(ctx).AddIssueLabels(owner, name, number, gitea.IssueLabelsOption{Labels: []int64{labelID}}); err != nil {
		return fmt.Errorf("labelling %s#%d: %w", repo, number, err)
	}
	return nil
}

// EditBody replaces the body of an issue or pull request (as the administrator, with no
// content_version guard).
func (s *Server) EditBody(ctx context.Context, repo string, number int64, body string) error {
	owner, name, err := split(repo)
	if err != nil {
		return err
	}
	if _, _, err := s.Admin(ctx).EditIssue(owner, name, number, gitea.EditIssueOption{Body: &body}); err != nil {
		return fmt.Errorf("editing the body of %s#%d: %w", repo, number, err)
	}
	return nil
}

// Body returns the body of an issue or pull request.
func (s *Server) Body(ctx context.Context, repo string, number int64) (string, error) {
	owner, name, err := split(repo)
	if err != nil {
		return "", err
	}
	is, _, err := s.Admin(ctx).GetIssue(owner, name, number)
	if err != nil {
		return "", fmt.Errorf("reading %s#%d: %w", repo, number, err)
	}
	return is.Body, nil
}

// ReadFile returns the content of path on branch ref of repo.
func (s *Server) ReadFile(ctx context.Context, repo, ref, path string) ([]byte, error) {
	owner, name, err := split(repo)
	if err != nil {
		return nil, err
	}
	b, _, err := s.Admin(ctx).GetFile(owner, name, ref, path)
	if err != nil {
		return nil, fmt.Errorf("reading %s at %s in %s: %w", path, ref, repo, err)
	}
	return b, nil
}

// AddDependency makes issue number of repo depend on (be blocked by) depNumber of depRepo.
// The SDK's IssueMeta lacks the owner and repo fields Gitea 1.26 needs, so this goes over
// plain HTTP.
func (s *Server) AddDependency(ctx context.Context, repo string, number int64, depRepo string, depNumber int64) error {
	owner, name, err := split(repo)
	if err != nil {
		return err
	}
	depOwner, depName, err := split(depRepo)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"index": depNumber, "owner": depOwner, "repo": depName})
	path := fmt.Sprintf("%s/api/v1/repos/%s/%s/issues/%d/dependencies", s.URL, url.PathEscape(owner), url.PathEscape(name), number)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "token "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("adding dependency %s#%d -> %s#%d: %w", repo, number, depRepo, depNumber, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return fmt.Errorf("adding dependency %s#%d -> %s#%d: %s: %s", repo, number, depRepo, depNumber, resp.Status, msg)
	}
	return nil
}

// split splits "owner/name".
func split(repo string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("repository %q is not owner/name", repo)
	}
	return owner, name, nil
}
