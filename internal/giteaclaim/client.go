package giteaclaim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 4 << 10

// Client talks to one Gitea server with one token. It is safe for concurrent
// use; WithSudo and WithToken return independent copies.
type Client struct {
	baseURL string
	token   string
	sudo    string
	http    *http.Client
	now     func() time.Time
	// repos caches repository metadata (the default branch) for repoTTL; shared by
	// every copy WithSudo and WithToken make.
	repos   *repoCache
	repoTTL time.Duration

	// afterRead, when set, runs in Publish between the issue read and the
	// guarded write with the content_version read. Tests use it to line
	// racers up on one version.
	afterRead func(contentVersion int64)
}

// Option configures a Client.
type Option func(*Client)

// DefaultRequestTimeout bounds each Gitea request of a client made without
// WithHTTPClient: a Gitea that stops answering fails the request (and the reconcile
// retries with backoff) instead of holding a worker of the controller forever.
const DefaultRequestTimeout = 30 * time.Second

// WithHTTPClient sets the HTTP client used for every request (SDK and plain).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithClock sets the clock used to decide whether a record is in force.
func WithClock(now func() time.Time) Option {
	return func(c *Client) {
		if now != nil {
			c.now = now
		}
	}
}

// WithRepositoryCacheTTL sets how long repository metadata (the default branch) is
// reused before it is read again (DefaultRepositoryCacheTTL by default; zero or less
// reads it every time). Nothing a claim decision pins is cached: the default branch
// only names the branch whose head is read fresh as the parity revision, and renaming
// the default branch is an administrative act, not a race a claim can win.
func WithRepositoryCacheTTL(d time.Duration) Option {
	return func(c *Client) { c.repoTTL = d }
}

// DefaultRepositoryCacheTTL is how long the default branch of a repository is reused.
const DefaultRepositoryCacheTTL = 30 * time.Second

// New returns a client for the Gitea server at baseURL (scheme and host, with
// or without a trailing slash) that authenticates with an access token.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: gitea base URL %q must be http(s)://host[:port][/path]", ErrInvalidArgument, baseURL)
	}
	if token == "" {
		return nil, fmt.Errorf("%w: gitea token is empty", ErrInvalidArgument)
	}
	c := &Client{baseURL: u.String(), token: token, http: &http.Client{Timeout: DefaultRequestTimeout}, now: time.Now,
		repos: &repoCache{entries: map[string]repoEntry{}}, repoTTL: DefaultRepositoryCacheTTL}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// WithSudo returns a copy of c whose requests act as login (Gitea's Sudo
// header; the token must belong to an administrator). An empty login acts as
// the token's owner again.
func (c *Client) WithSudo(login string) *Client {
	cp := *c
	cp.sudo = login
	return &cp
}

// WithToken returns a copy of c that authenticates with another token and
// acts as that token's owner.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token = token
	cp.sudo = ""
	return &cp
}

// SDK returns a Gitea SDK client bound to ctx, with c's token, Sudo user and
// HTTP client. The SDK keeps one context per client, so a fresh, cheap client
// is made per call; server version probing is switched off (this package
// targets Gitea ≥ 1.26) so construction does no I/O.
func (c *Client) SDK(ctx context.Context) *gitea.Client {
	opts := []gitea.ClientOption{
		gitea.SetGiteaVersion(""),
		gitea.SetToken(c.token),
		gitea.SetHTTPClient(c.http),
		gitea.SetContext(ctx),
	}
	if c.sudo != "" {
		opts = append(opts, gitea.SetSudo(c.sudo))
	}
	sdk, err := gitea.NewClient(c.baseURL, opts...)
	if err != nil {
		// None of the options above can fail; keep the client usable anyway.
		sdk = gitea.NewClientWithHTTP(c.baseURL, c.http)
	}
	return sdk
}

// sdkErr turns an SDK failure into an error that keeps the HTTP status
// reachable through *APIError.
func sdkErr(method, path string, resp *gitea.Response, err error) error {
	if err == nil {
		return nil
	}
	if resp != nil && resp.Response != nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
		return &APIError{Method: method, Path: path, StatusCode: resp.StatusCode, Message: err.Error()}
	}
	return fmt.Errorf("gitea %s %s: %w", method, path, err)
}

// transportError marks failures where no HTTP answer was received.
type transportError struct{ err error }

// Error implements error.
func (e *transportError) Error() string { return e.err.Error() }

// Unwrap exposes the underlying failure.
func (e *transportError) Unwrap() error { return e.err }

// doJSON sends one API request (path below /api/v1) with an optional JSON
// body and decodes a 2xx JSON answer into out (when non-nil). Non-2xx answers
// are *APIError; failures before an answer arrived are *transportError.
func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+"/api/v1"+path, body)
	if err != nil {
		return fmt.Errorf("gitea %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "token "+c.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.sudo != "" {
		req.Header.Set("Sudo", c.sudo)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &transportError{fmt.Errorf("gitea %s %s: %w", method, path, err)}
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		msg := strings.TrimSpace(string(raw))
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Message != "" {
			msg = e.Message
		}
		return &APIError{Method: method, Path: path, StatusCode: resp.StatusCode, Message: msg}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return &transportError{fmt.Errorf("gitea %s %s: decoding answer: %w", method, path, err)}
	}
	return nil
}

// isTransport reports whether err happened before Gitea answered.
func isTransport(err error) bool {
	var t *transportError
	return errors.As(err, &t)
}

// issuePath is the API path of an issue (or pull request as an issue).
func issuePath(owner, name string, number int64) string {
	return fmt.Sprintf("/repos/%s/%s/issues/%d", url.PathEscape(owner), url.PathEscape(name), number)
}

// rawIssue is the part of Gitea's issue JSON this package reads over plain
// HTTP. ContentVersion is a pointer so a server without it is detected.
type rawIssue struct {
	Number         int64  `json:"number"`
	Title          string `json:"title"`
	Body           string `json:"body"`
	State          string `json:"state"`
	ContentVersion *int64 `json:"content_version"`
	User           struct {
		Login string `json:"login"`
	} `json:"user"`
	Assignees []struct {
		Login string `json:"login"`
	} `json:"assignees"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
	PullRequest *struct {
		Merged bool `json:"merged"`
	} `json:"pull_request"`
}

// assigneeLogins lists the logins the issue is assigned to.
func (i *rawIssue) assigneeLogins() []string {
	out := make([]string, 0, len(i.Assignees))
	for _, a := range i.Assignees {
		out = append(out, a.Login)
	}
	return out
}

// readIssue reads the issue behind t over plain HTTP and checks its kind.
func (c *Client) readIssue(ctx context.Context, t claim.Target) (*rawIssue, error) {
	owner, name, err := validateTarget(t)
	if err != nil {
		return nil, err
	}
	var is rawIssue
	if err := c.doJSON(ctx, http.MethodGet, issuePath(owner, name, t.Number), nil, &is); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("reading %s: %w: %w", t, ErrNoSuchItem, err)
		}
		return nil, fmt.Errorf("reading %s: %w", t, err)
	}
	if is.ContentVersion == nil {
		return nil, fmt.Errorf("reading %s: %w", t, ErrUnsupportedServer)
	}
	isPull := is.PullRequest != nil
	if isPull != (t.Kind == claim.KindPullRequest) {
		actual := claim.KindIssue
		if isPull {
			actual = claim.KindPullRequest
		}
		return nil, fmt.Errorf("%s: %w: Gitea has a %s under that number", t, ErrKindMismatch, actual)
	}
	return &is, nil
}

// repoCache remembers repository metadata for a short while.
type repoCache struct {
	mu      sync.Mutex
	entries map[string]repoEntry
}

// repoEntry is one repository's cached default branch.
type repoEntry struct {
	defaultBranch string
	readAt        time.Time
}

// defaultBranch returns the repository's default branch, from the cache while it is
// younger than the client's TTL. The cache is keyed by repository only: the default
// branch is the same whoever asks.
func (c *Client) defaultBranch(ctx context.Context, owner, name string) (string, error) {
	key := strings.ToLower(owner + "/" + name)
	now := c.now()
	if c.repoTTL > 0 {
		c.repos.mu.Lock()
		e, ok := c.repos.entries[key]
		c.repos.mu.Unlock()
		if ok && now.Sub(e.readAt) < c.repoTTL && now.Sub(e.readAt) >= 0 {
			return e.defaultBranch, nil
		}
	}
	repoInfo, resp, err := c.SDK(ctx).GetRepo(owner, name)
	if err != nil {
		return "", sdkErr("GET", repoPath(owner, name), resp, err)
	}
	if c.repoTTL > 0 && repoInfo.DefaultBranch != "" {
		c.repos.mu.Lock()
		c.repos.entries[key] = repoEntry{defaultBranch: repoInfo.DefaultBranch, readAt: now}
		c.repos.mu.Unlock()
	}
	return repoInfo.DefaultBranch, nil
}
