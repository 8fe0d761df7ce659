package claim

import (
	"path"
	"slices"
	"strconv"
	"strings"
)

// The gateway's route table: what each Gitea API request (method and path) means as an
// operation, and what its body must satisfy. internal/gateway matches every request here
// before it forwards anything; a request no row matches is refused.

// OpRead is the neutral read capability every registered worker holds: reads of the
// canonical repository. It is not a task operation and no capability lists it.
const OpRead = "read"

// Operations the gateway can name but no role is granted. Their routes are in the table so
// that a refusal names what was attempted; a role that needs one lists it in OperationsFor.
const (
	// OpLabel adds or removes labels.
	OpLabel = "label"
	// OpAssign changes assignees.
	OpAssign = "assign"
	// OpEditIssue edits an issue or pull request (title, body, state: closing): the claim
	// record lives in the body, so no worker may edit it.
	OpEditIssue = "edit_issue"
)

// BodyRule says what a mutation's body must satisfy besides its route.
type BodyRule string

const (
	// BodyAny: the body is not inspected (routes no role holds: they are never forwarded).
	BodyAny BodyRule = ""
	// BodyComment: a comment; only its text is forwarded.
	BodyComment BodyRule = "comment"
	// BodyReview: a review; its event decides review or approve, its commit_id must be the
	// bound head.
	BodyReview BodyRule = "review"
	// BodyMerge: a merge; its head_commit_id must be the bound head.
	BodyMerge BodyRule = "merge"
	// BodyOpenPull: a new pull request; its head must be the claim's work branch and its
	// title or body must reference the claimed issue as #N.
	BodyOpenPull BodyRule = "open_pull"
	// BodyReceivePack: a git push; every ref update must be the claim's work branch.
	BodyReceivePack BodyRule = "receive_pack"
	// BodyContents: a commit made through Gitea's contents API (create, update or delete
	// files): checked like a push, so the branch it writes must be the claim's work branch,
	// its message may reference only what the capability covers, and it may not touch
	// ProtectedDir. Author, committer and dates are Gitea's own (the caller's account, now).
	BodyContents BodyRule = "contents"
)

// Route is what a request's method and path mean.
type Route struct {
	// Operation is the operation the route performs (OpRead for reads). For BodyReview the
	// event decides: OpReview here stands for both review and approve.
	Operation string
	// Repository is the "owner/name" the path names ("" for reads outside repositories).
	Repository string
	// Number is the issue or pull request the path names (0 when none).
	Number int64
	// Kind is KindPullRequest for pull-request-only routes, "" when the number may be
	// either (Gitea numbers issues and pull requests in one sequence).
	Kind Kind
	// Body is the body rule.
	Body BodyRule
	// Git is set for git smart-HTTP routes.
	Git bool
	// Path is the file a contents API route names: what its pattern's final ** matched,
	// without the leading "/" ("" for every other route).
	Path string
}

// Mutation reports whether the route writes.
func (r Route) Mutation() bool { return r.Operation != OpRead }

// route is one row of the table. Pattern segments: {owner}, {repo}, {repo.git} (a
// repository name with or without ".git"), {n} (a positive number), ** (any rest,
// including nothing), or a literal.
type route struct {
	methods   []string
	pattern   string
	service   string // git: the ?service= value required ("" = none)
	operation string
	kind      Kind
	body      BodyRule
	git       bool
}

const apiRepo = "/api/v1/repos/{owner}/{repo}"

// HTTP methods of the table (the pure package does not import net/http).
const (
	methodGet    = "GET"
	methodHead   = "HEAD"
	methodPost   = "POST"
	methodPut    = "PUT"
	methodDelete = "DELETE"
	methodPatch  = "PATCH"
)

// routes is the gateway's one table, first match wins; docs/gateway.md renders it.
var routes = []route{
	// Neutral reads.
	{methods: []string{methodGet, methodHead}, pattern: "/api/v1/version", operation: OpRead},
	{methods: []string{methodGet, methodHead}, pattern: "/api/v1/user", operation: OpRead},
	{methods: []string{methodGet, methodHead}, pattern: "/api/v1/settings/**", operation: OpRead},
	{methods: []string{methodGet, methodHead}, pattern: apiRepo + "/**", operation: OpRead},
	{methods: []string{methodGet}, pattern: "/{owner}/{repo.git}/info/refs", service: "git-upload-pack", operation: OpRead, git: true},
	{methods: []string{methodPost}, pattern: "/{owner}/{repo.git}/git-upload-pack", operation: OpRead, git: true},
	// The push advertisement is a read; the push itself is checked ref by ref.
	{methods: []string{methodGet}, pattern: "/{owner}/{repo.git}/info/refs", service: "git-receive-pack", operation: OpRead, git: true},
	{methods: []string{methodPost}, pattern: "/{owner}/{repo.git}/git-receive-pack", operation: OpPushBranch, body: BodyReceivePack, git: true},
	// Task mutations.
	{methods: []string{methodPost}, pattern: apiRepo + "/issues/{n}/comments", operation: OpComment, body: BodyComment},
	{methods: []string{methodPost}, pattern: apiRepo + "/pulls/{n}/reviews", operation: OpReview, kind: KindPullRequest, body: BodyReview},
	{methods: []string{methodPost}, pattern: apiRepo + "/pulls/{n}/merge", operation: OpMerge, kind: KindPullRequest, body: BodyMerge},
	{methods: []string{methodPost}, pattern: apiRepo + "/pulls", operation: OpOpenPullRequest, body: BodyOpenPull},
	// A commit through the contents API is a push to the branch it names.
	{methods: []string{methodPost}, pattern: apiRepo + "/contents", operation: OpPushBranch, body: BodyContents},
	{methods: []string{methodPost, methodPut, methodDelete}, pattern: apiRepo + "/contents/**", operation: OpPushBranch, body: BodyContents},
	// Named so refusals are precise; no role holds these operations.
	{methods: []string{methodPost, methodPut, methodDelete}, pattern: apiRepo + "/issues/{n}/labels/**", operation: OpLabel},
	{methods: []string{methodPost, methodDelete}, pattern: apiRepo + "/issues/{n}/assignees", operation: OpAssign},
	{methods: []string{methodPatch}, pattern: apiRepo + "/issues/{n}", operation: OpEditIssue},
	{methods: []string{methodPatch}, pattern: apiRepo + "/pulls/{n}", operation: OpEditIssue, kind: KindPullRequest},
}

// RouteRow is one row of the route table, for documentation and tests.
type RouteRow struct {
	Methods   []string
	Pattern   string
	Service   string
	Operation string
	Kind      Kind
	Body      BodyRule
}

// RouteTable returns the gateway's route table in match order.
func RouteTable() []RouteRow {
	out := make([]RouteRow, 0, len(routes))
	for _, r := range routes {
		out = append(out, RouteRow{Methods: slices.Clone(r.methods), Pattern: r.pattern, Service: r.service,
			Operation: r.operation, Kind: r.kind, Body: r.body})
	}
	return out
}

// MatchRoute maps a request to its route: method, the request path as the server will
// route it (already unescaped, and refused by the caller when it needed escaping) and the
// git ?service= query value. A path that is not clean (".", "..", "//", a trailing "/")
// matches nothing, so a prefix can never be walked out of. ok is false for every request
// the gateway does not forward.
func MatchRoute(method, urlPath, service string) (Route, bool) {
	if urlPath == "" || urlPath[0] != '/' || path.Clean(urlPath) != urlPath || strings.ContainsAny(urlPath, "\\\x00") {
		return Route{}, false
	}
	segs := strings.Split(urlPath[1:], "/")
	for _, r := range routes {
		if !slices.Contains(r.methods, method) || r.service != service {
			continue
		}
		if m, ok := match(strings.Split(r.pattern[1:], "/"), segs); ok {
			m.Operation, m.Kind, m.Body, m.Git = r.operation, r.kind, r.body, r.git
			if r.body != BodyContents {
				m.Path = "" // only a contents route names a file
			}
			return m, true
		}
	}
	return Route{}, false
}

func match(pattern, segs []string) (Route, bool) {
	var m Route
	var owner, repo string
	for i, p := range pattern {
		if p == "**" {
			if i < len(segs) {
				m.Path = strings.Join(segs[i:], "/")
			}
			break
		}
		if i >= len(segs) || segs[i] == "" {
			return Route{}, false
		}
		s := segs[i]
		switch p {
		case "{owner}":
			owner = s
		case "{repo}":
			repo = s
		case "{repo.git}":
			repo = strings.TrimSuffix(s, ".git")
		case "{n}":
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n <= 0 || strconv.FormatInt(n, 10) != s {
				return Route{}, false
			}
			m.Number = n
		default:
			if p != s {
				return Route{}, false
			}
		}
	}
	if last := pattern[len(pattern)-1]; last != "**" && len(segs) != len(pattern) {
		return Route{}, false
	} else if last == "**" && len(segs) < len(pattern)-1 {
		return Route{}, false
	}
	if owner != "" || repo != "" {
		if owner == "" || repo == "" {
			return Route{}, false
		}
		m.Repository = owner + "/" + repo
	}
	return m, true
}

// ReviewOperation maps a review's event to its operation: APPROVED is approve, COMMENT and
// REQUEST_CHANGES are review. The spelling must be exact, as Gitea compares it: anything
// else (a pending draft, an unknown or differently spelt event, which Gitea stores as a
// pending draft) is no operation at all.
func ReviewOperation(event string) (string, bool) {
	switch event {
	case ReviewApproved:
		return OpApprove, true
	case ReviewComment, ReviewRequestChanges:
		return OpReview, true
	}
	return "", false
}
