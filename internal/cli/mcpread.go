package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"code.gitea.io/sdk/gitea"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The read tools give an agent what it reads before it chooses and while it works: the
// issues, pull requests, diffs, files, comments and timelines of its worker's repository,
// read straight from Gitea with the worker's read token (--gitea-url and its token, else
// through the gateway). The repository is always the worker's bound one (its
// registration's spec.repository): no argument names a repository, so no read reaches
// another.

// The caps of what one read returns, so that a large diff, file or discussion does not
// flood the agent's context. A result that was cut says so (truncated, bodyTruncated).
const (
	// maxTextBytes caps a diff and a file's content.
	maxTextBytes = 128 << 10
	// maxBodyBytes caps the body of an issue or pull request.
	maxBodyBytes = 32 << 10
	// maxCommentBytes caps the body of one comment.
	maxCommentBytes = 8 << 10
	// maxEventBytes caps the text of one timeline event.
	maxEventBytes = 1 << 10
	// maxItems caps a list (comments, timeline events, search results): one page at
	// Gitea's default largest page size (MAX_RESPONSE_ITEMS).
	maxItems = 50
)

// The closed sets of values the search input takes, as its input schema lists them.
var (
	searchStates = []any{string(gitea.StateOpen), string(gitea.StateClosed), string(gitea.StateAll)}
	searchEnums  = map[string][]any{"state": searchStates, "kind": {kindWordIssue, kindWordPR}}
)

// addReadTools registers the read tools, each read-only with a derived output schema.
func (t *mcpTools) addReadTools(s *mcp.Server) {
	addTool(s, &mcp.Tool{Name: "read_issue", Annotations: readOnly(), Description: "Read an issue (or pull request) of your repository: " +
		"title, body, state, labels, assignees, author and number of comments."}, t.readIssue)
	addTool(s, &mcp.Tool{Name: "read_pr", Annotations: readOnly(), Description: "Read a pull request of your repository: " +
		"what read_issue shows, plus head branch, head commit, base branch, whether it is mergeable and whether it is merged."}, t.readPR)
	addTool(s, &mcp.Tool{Name: "read_diff", Annotations: readOnly(), Description: "Read a pull request's unified diff " +
		"(cut at 128 KiB, and then marked truncated)."}, t.readDiff)
	addTool(s, &mcp.Tool{Name: "read_file", Annotations: readOnly(), Description: "Read a file of your repository at a branch, tag or commit " +
		"(default: the default branch; cut at 128 KiB, and then marked truncated)."}, t.readFile)
	addTool(s, &mcp.Tool{Name: "list_comments", Annotations: readOnly(), Description: "List the comments of an issue or pull request, oldest first: " +
		"author, time and body (the first 50; each body cut at 8 KiB)."}, t.listComments)
	addTool(s, &mcp.Tool{Name: "read_timeline", Annotations: readOnly(), Description: "List the timeline of an issue or pull request, oldest first: " +
		"each event's type, user and time (the first 50)."}, t.readTimeline)
	addTool(s, &mcp.Tool{Name: "search_issues", Annotations: readOnly(), InputSchema: inputSchema[SearchInput](searchEnums),
		Description: "Search the issues and pull requests of your repository by keyword (state open by default; kind issue or pr " +
			"narrows it): number, kind, title and state of each match (the first 50)."}, t.searchIssues)
}

// --- inputs and outputs -----------------------------------------------------------------

// NumberInput names an issue or pull request of the worker's repository.
type NumberInput struct {
	Number int64 `json:"number" jsonschema:"issue or pull request number in your repository"`
}

// PullInput names a pull request of the worker's repository.
type PullInput struct {
	Number int64 `json:"number" jsonschema:"pull request number in your repository"`
}

// ReadFileInput names a file of the worker's repository.
type ReadFileInput struct {
	Path string `json:"path" jsonschema:"file path from the repository root, such as README.md or cmd/main.go"`
	Ref  string `json:"ref,omitempty" jsonschema:"branch, tag or commit (default: the repository's default branch)"`
}

// SearchInput is a search of the worker's repository.
type SearchInput struct {
	Query string `json:"query" jsonschema:"keywords to match in titles, bodies and comments (empty: every item)"`
	State string `json:"state,omitempty" jsonschema:"open, closed or all (default open)"`
	Kind  string `json:"kind,omitempty" jsonschema:"issue or pr (default both)"`
}

// IssueOutput is an issue or pull request as Gitea shows it.
type IssueOutput struct {
	Repository    string    `json:"repository" jsonschema:"owner/name: your repository"`
	Number        int64     `json:"number"`
	Kind          string    `json:"kind" jsonschema:"issue or pr"`
	Title         string    `json:"title"`
	Body          string    `json:"body"`
	BodyTruncated bool      `json:"bodyTruncated,omitempty" jsonschema:"the body was cut at 32 KiB"`
	State         string    `json:"state" jsonschema:"open or closed"`
	Labels        []string  `json:"labels"`
	Assignees     []string  `json:"assignees"`
	Author        string    `json:"author"`
	Comments      int       `json:"comments" jsonschema:"number of comments"`
	Created       time.Time `json:"created"`
	Updated       time.Time `json:"updated"`
}

// PullOutput is a pull request: what IssueOutput shows, and its branches.
type PullOutput struct {
	IssueOutput
	HeadBranch string `json:"headBranch"`
	HeadSHA    string `json:"headSHA"`
	BaseBranch string `json:"baseBranch"`
	Mergeable  bool   `json:"mergeable" jsonschema:"Gitea can merge it into the base branch without conflicts"`
	Merged     bool   `json:"merged"`
}

// DiffOutput is a pull request's unified diff.
type DiffOutput struct {
	Repository string `json:"repository"`
	Number     int64  `json:"number"`
	Diff       string `json:"diff"`
	Bytes      int    `json:"bytes" jsonschema:"size of the whole diff in bytes"`
	Truncated  bool   `json:"truncated" jsonschema:"the diff was cut at 128 KiB, at a line end"`
}

// FileOutput is a file's content at a ref.
type FileOutput struct {
	Repository string `json:"repository"`
	Path       string `json:"path"`
	Ref        string `json:"ref" jsonschema:"the branch, tag or commit read"`
	Content    string `json:"content"`
	Truncated  bool   `json:"truncated" jsonschema:"the content was cut at 128 KiB, at a line end"`
	Binary     bool   `json:"binary,omitempty" jsonschema:"the file is not UTF-8 text; content is left empty"`
}

// CommentView is one comment.
type CommentView struct {
	ID            int64     `json:"id"`
	Author        string    `json:"author"`
	Created       time.Time `json:"created"`
	Body          string    `json:"body"`
	BodyTruncated bool      `json:"bodyTruncated,omitempty" jsonschema:"the body was cut at 8 KiB"`
}

// CommentsOutput is the comments of an issue or pull request.
type CommentsOutput struct {
	Repository string        `json:"repository"`
	Number     int64         `json:"number"`
	Comments   []CommentView `json:"comments"`
	Total      int           `json:"total,omitempty" jsonschema:"how many there are, when Gitea says"`
	Truncated  bool          `json:"truncated" jsonschema:"only the first 50 are listed"`
}

// EventView is one timeline event.
type EventView struct {
	Type    string    `json:"type" jsonschema:"Gitea's event type: comment, label, assignees, pull_push, review, close, reopen, commit_ref, ..."`
	User    string    `json:"user"`
	Created time.Time `json:"created"`
	Text    string    `json:"text,omitempty" jsonschema:"the event's text (a comment's body, cut at 1 KiB)"`
	Label   string    `json:"label,omitempty" jsonschema:"the label a label event added or removed"`
}

// TimelineOutput is the timeline of an issue or pull request.
type TimelineOutput struct {
	Repository string      `json:"repository"`
	Number     int64       `json:"number"`
	Events     []EventView `json:"events"`
	Total      int         `json:"total,omitempty" jsonschema:"how many there are, when Gitea says"`
	Truncated  bool        `json:"truncated" jsonschema:"only the first 50 are listed"`
}

// SearchItem is one search result.
type SearchItem struct {
	Number int64  `json:"number"`
	Kind   string `json:"kind" jsonschema:"issue or pr"`
	Title  string `json:"title"`
	State  string `json:"state"`
}

// SearchOutput is the result of a search.
type SearchOutput struct {
	Repository string       `json:"repository"`
	Items      []SearchItem `json:"items"`
	Total      int          `json:"total,omitempty" jsonschema:"how many match, when Gitea says"`
	Truncated  bool         `json:"truncated" jsonschema:"only the first 50 are listed"`
}

// --- the reads --------------------------------------------------------------------------

// readIssue reads an issue (or a pull request, as an issue).
func (t *mcpTools) readIssue(ctx context.Context, in NumberInput) (*IssueOutput, error) {
	r, err := t.reader(ctx, in.Number)
	if err != nil {
		return nil, err
	}
	is, resp, err := r.sdk.GetIssue(r.owner, r.name, in.Number)
	if err != nil {
		return nil, r.failed("", in.Number, false, resp, err)
	}
	out := &IssueOutput{Repository: r.repo, Number: is.Index, Kind: kindWordIssue, Title: is.Title, State: string(is.State),
		Labels: labelNames(is.Labels), Assignees: logins(is.Assignees), Author: login(is.Poster), Comments: is.Comments,
		Created: is.Created, Updated: is.Updated}
	if is.PullRequest != nil {
		out.Kind = kindWordPR
	}
	out.Body, out.BodyTruncated = truncate(is.Body, maxBodyBytes)
	return out, nil
}

// readPR reads a pull request.
func (t *mcpTools) readPR(ctx context.Context, in PullInput) (*PullOutput, error) {
	r, err := t.reader(ctx, in.Number)
	if err != nil {
		return nil, err
	}
	pr, resp, err := r.sdk.GetPullRequest(r.owner, r.name, in.Number)
	if err != nil {
		return nil, r.failed("pull request", in.Number, true, resp, err)
	}
	out := &PullOutput{IssueOutput: IssueOutput{Repository: r.repo, Number: pr.Index, Kind: kindWordPR, Title: pr.Title,
		State: string(pr.State), Labels: labelNames(pr.Labels), Assignees: logins(pr.Assignees), Author: login(pr.Poster),
		Comments: pr.Comments, Created: deref(pr.Created), Updated: deref(pr.Updated)},
		Mergeable: pr.Mergeable, Merged: pr.HasMerged}
	out.Body, out.BodyTruncated = truncate(pr.Body, maxBodyBytes)
	if pr.Head != nil {
		out.HeadBranch, out.HeadSHA = pr.Head.Ref, pr.Head.Sha
	}
	if pr.Base != nil {
		out.BaseBranch = pr.Base.Ref
	}
	return out, nil
}

// readDiff reads a pull request's unified diff.
func (t *mcpTools) readDiff(ctx context.Context, in PullInput) (*DiffOutput, error) {
	r, err := t.reader(ctx, in.Number)
	if err != nil {
		return nil, err
	}
	b, resp, err := r.sdk.GetPullRequestDiff(r.owner, r.name, in.Number, gitea.PullRequestDiffOptions{})
	if err != nil {
		return nil, r.failed("the diff", in.Number, true, resp, err)
	}
	out := &DiffOutput{Repository: r.repo, Number: in.Number, Bytes: len(b)}
	out.Diff, out.Truncated = truncate(string(b), maxTextBytes)
	return out, nil
}

// readFile reads a file at a ref, the default branch when none is given.
func (t *mcpTools) readFile(ctx context.Context, in ReadFileInput) (*FileOutput, error) {
	path, err := repoPath("path", strings.TrimLeft(in.Path, "/"))
	if err != nil {
		return nil, err
	}
	if in.Ref != "" {
		if _, err := repoPath("ref", in.Ref); err != nil {
			return nil, err
		}
	}
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	ref := in.Ref
	if ref == "" {
		repo, _, err := r.sdk.GetRepo(r.owner, r.name)
		if err != nil {
			return nil, fmt.Errorf("reading %s from Gitea for its default branch: %w", r.repo, err)
		}
		ref = repo.DefaultBranch
	}
	rc, resp, err := r.sdk.GetFileReader(r.owner, r.name, ref, path)
	if rc != nil {
		defer func() { _ = rc.Close() }()
	}
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%s has no file %s at %s: give a file's path from the repository root, and a branch, tag or commit that has it", r.repo, path, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s at %s in %s from Gitea: %w", path, ref, r.repo, err)
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxTextBytes+utf8.UTFMax))
	if err != nil {
		return nil, fmt.Errorf("reading %s at %s in %s from Gitea: %w", path, ref, r.repo, err)
	}
	out := &FileOutput{Repository: r.repo, Path: path, Ref: ref}
	out.Content, out.Truncated = truncate(string(b), maxTextBytes)
	if !utf8.ValidString(out.Content) {
		out.Content, out.Binary = "", true
	}
	return out, nil
}

// listComments lists the comments of an issue or pull request.
func (t *mcpTools) listComments(ctx context.Context, in NumberInput) (*CommentsOutput, error) {
	r, err := t.reader(ctx, in.Number)
	if err != nil {
		return nil, err
	}
	cs, resp, err := r.sdk.ListIssueComments(r.owner, r.name, in.Number,
		gitea.ListIssueCommentOptions{ListOptions: gitea.ListOptions{Page: 1, PageSize: maxItems}})
	if err != nil {
		return nil, r.failed("the comments", in.Number, false, resp, err)
	}
	out := &CommentsOutput{Repository: r.repo, Number: in.Number, Comments: []CommentView{}}
	for _, c := range cs[:min(len(cs), maxItems)] {
		v := CommentView{ID: c.ID, Author: login(c.Poster), Created: c.Created}
		v.Body, v.BodyTruncated = truncate(c.Body, maxCommentBytes)
		out.Comments = append(out.Comments, v)
	}
	out.Total, out.Truncated = listed(resp, len(cs), len(out.Comments))
	return out, nil
}

// readTimeline lists the timeline events of an issue or pull request.
func (t *mcpTools) readTimeline(ctx context.Context, in NumberInput) (*TimelineOutput, error) {
	r, err := t.reader(ctx, in.Number)
	if err != nil {
		return nil, err
	}
	evs, resp, err := r.timeline(ctx, in.Number)
	if err != nil {
		return nil, r.failed("the timeline", in.Number, false, resp, err)
	}
	out := &TimelineOutput{Repository: r.repo, Number: in.Number, Events: []EventView{}}
	for _, e := range evs[:min(len(evs), maxItems)] {
		v := EventView{Type: e.Type, User: login(e.User), Created: e.Created}
		if e.Type == "comment" || e.Type == "review" {
			v.Text, _ = truncate(e.Body, maxEventBytes)
		}
		if e.Label != nil {
			v.Label = e.Label.Name
		}
		out.Events = append(out.Events, v)
	}
	out.Total, out.Truncated = listed(resp, len(evs), len(out.Events))
	return out, nil
}

// searchIssues searches the issues and pull requests of the worker's repository.
func (t *mcpTools) searchIssues(ctx context.Context, in SearchInput) (*SearchOutput, error) {
	opt := gitea.ListIssueOption{ListOptions: gitea.ListOptions{Page: 1, PageSize: maxItems}, KeyWord: strings.TrimSpace(in.Query),
		State: gitea.StateOpen}
	switch in.State {
	case "":
	case string(gitea.StateOpen), string(gitea.StateClosed), string(gitea.StateAll):
		opt.State = gitea.StateType(in.State)
	default:
		return nil, fmt.Errorf("state %q: use open, closed or all", in.State)
	}
	switch in.Kind {
	case "":
	case kindWordIssue:
		opt.Type = gitea.IssueTypeIssue
	case kindWordPR:
		opt.Type = gitea.IssueTypePull
	default:
		return nil, fmt.Errorf("kind %q: use issue or pr", in.Kind)
	}
	r, err := t.reader(ctx)
	if err != nil {
		return nil, err
	}
	found, resp, err := r.sdk.ListRepoIssues(r.owner, r.name, opt)
	if err != nil {
		return nil, fmt.Errorf("searching %s in Gitea: %w", r.repo, err)
	}
	out := &SearchOutput{Repository: r.repo, Items: []SearchItem{}}
	for _, is := range found[:min(len(found), maxItems)] {
		kind := kindWordIssue
		if is.PullRequest != nil {
			kind = kindWordPR
		}
		out.Items = append(out.Items, SearchItem{Number: is.Index, Kind: kind, Title: is.Title, State: string(is.State)})
	}
	out.Total, out.Truncated = listed(resp, len(found), len(out.Items))
	return out, nil
}

// --- reading the worker's repository ----------------------------------------------------

// repoReader reads one repository, the worker's.
type repoReader struct {
	sdk               *gitea.Client
	repo, owner, name string
	// base and token are where sdk reads and as whom, for the one read it cannot do
	// (timeline).
	base, token string
}

// reader returns a reader of the worker's bound repository (its registration's
// spec.repository), after checking the number of the item to read, if the read names one.
func (t *mcpTools) reader(ctx context.Context, number ...int64) (*repoReader, error) {
	for _, n := range number {
		if n < 1 {
			return nil, fmt.Errorf("number %d: give the number of an issue or pull request in your repository (1 or more)", n)
		}
	}
	wr, err := t.o.worker(ctx, t.cfg.Client, t.cfg.Namespace, t.cfg.Worker)
	if err != nil {
		return nil, err
	}
	if !repoPattern.MatchString(wr.Spec.Repository) {
		return nil, fmt.Errorf("worker %s has no owner/name repository binding (spec.repository %q): register it with --repository", wr.Name, wr.Spec.Repository)
	}
	r := &repoReader{repo: wr.Spec.Repository}
	r.owner, r.name, _ = strings.Cut(wr.Spec.Repository, "/")
	if r.base, r.token, err = t.readAccess(ctx); err != nil {
		return nil, err
	}
	if r.sdk, err = newGiteaClient(ctx, r.base, r.token, nil); err != nil {
		return nil, err
	}
	return r, nil
}

// readAccess is where and as whom the worker reads Gitea, as claim does: --gitea-url
// with the worker's read token; else the gateway with a gateway token; else --gitea-url
// without a token.
func (t *mcpTools) readAccess(ctx context.Context) (base, token string, err error) {
	base = strings.TrimRight(t.cfg.GiteaURL, "/")
	if base != "" && (t.cfg.GiteaToken != "" || t.cfg.GatewayURL == "") {
		return base, t.cfg.GiteaToken, nil
	}
	if t.cfg.GatewayURL == "" {
		return "", "", errors.New("no Gitea to read: pass --gitea-url (with its token in " + EnvGiteaToken + ") or --gateway-url")
	}
	token, err = t.gatewayToken(ctx)
	return t.cfg.GatewayURL, token, err
}

// timelineEvent is one event of Gitea's issue timeline.
type timelineEvent struct {
	Type    string       `json:"type"`
	User    *gitea.User  `json:"user"`
	Created time.Time    `json:"created_at"`
	Body    string       `json:"body"`
	Label   *gitea.Label `json:"label"`
}

// timeline reads the first page of an issue's timeline. It is the one read not made with
// the SDK: the SDK's TimelineComment takes "label" as a list, where Gitea sends the one
// label an event added or removed, so any timeline with a label event fails to decode.
func (r *repoReader) timeline(ctx context.Context, number int64) ([]timelineEvent, *gitea.Response, error) {
	u := fmt.Sprintf("%s/api/v1/repos/%s/%s/issues/%d/timeline?page=1&limit=%d", r.base, url.PathEscape(r.owner), url.PathEscape(r.name), number, maxItems)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &bearer{token: r.token, next: http.DefaultTransport}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	gr := &gitea.Response{Response: resp}
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return nil, gr, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	var evs []timelineEvent
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&evs); err != nil {
		return nil, gr, fmt.Errorf("decoding the timeline: %w", err)
	}
	return evs, gr, nil
}

// failed explains a failed read of number: Gitea's 404 as notFound says, any other
// failure as Gitea's error.
func (r *repoReader) failed(what string, number int64, wantPR bool, resp *gitea.Response, err error) error {
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return r.notFound(number, wantPR)
	}
	if what != "" {
		what += " of "
	}
	return fmt.Errorf("reading %s%s#%d from Gitea: %w", what, r.repo, number, err)
}

// notFound says what Gitea's 404 for number means: no such item in the repository, or
// an issue where a pull request was asked for (wantPR).
func (r *repoReader) notFound(number int64, wantPR bool) error {
	is, _, err := r.sdk.GetIssue(r.owner, r.name, number)
	switch {
	case err != nil:
		return fmt.Errorf("%s has no issue or pull request #%d: search_issues lists what it has", r.repo, number)
	case wantPR && is.PullRequest == nil:
		return fmt.Errorf("%s#%d is an issue, not a pull request: use read_issue", r.repo, number)
	}
	return fmt.Errorf("%s#%d exists, but Gitea found nothing more to read for it", r.repo, number)
}

// --- pure helpers -----------------------------------------------------------------------

// truncate cuts s to at most n bytes and says whether it cut. It cuts at a rune boundary,
// and at the end of the last whole line when that keeps at least half of n, so that a
// cut diff or file ends on a complete line.
func truncate(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if i := strings.LastIndexByte(s[:cut], '\n'); i >= n/2 {
		cut = i + 1
	}
	return s[:cut], true
}

// repoPath checks a file path or ref (what names it): relative, made of non-empty
// segments, none of them "." or "..", and no control characters or backslashes. So it
// names something inside the worker's repository and cannot climb out of the request's
// path to another.
func repoPath(what, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s is empty: give a path from the repository root, such as README.md", what)
	}
	if strings.ContainsFunc(p, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) {
		return "", fmt.Errorf("%s %q has a backslash or a control character: use forward slashes, such as docs/README.md", what, p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("%s %q has an empty, \".\" or \"..\" segment: give it from the repository root, such as docs/README.md", what, p)
		}
	}
	return p, nil
}

// listed is what a capped list reports: the total Gitea counts (its X-Total-Count
// header; 0 when it sends none), and whether items were left out (more were returned
// than shown, or Gitea counts more).
func listed(resp *gitea.Response, returned, shown int) (total int, truncated bool) {
	if resp != nil && resp.Response != nil {
		total, _ = strconv.Atoi(resp.Header.Get("X-Total-Count"))
	}
	return total, returned > shown || total > shown
}

// labelNames are the names of labels.
func labelNames(ls []*gitea.Label) []string {
	out := []string{}
	for _, l := range ls {
		if l != nil {
			out = append(out, l.Name)
		}
	}
	return out
}

// logins are the logins of users.
func logins(us []*gitea.User) []string {
	out := []string{}
	for _, u := range us {
		if u != nil {
			out = append(out, u.UserName)
		}
	}
	return out
}

// login is a user's login ("" for none).
func login(u *gitea.User) string {
	if u == nil {
		return ""
	}
	return u.UserName
}

// deref is the time p points at (the zero time for nil).
func deref(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return *p
}
