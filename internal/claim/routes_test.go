package claim

import (
	"slices"
	"strings"
	"testing"
)

func TestMatchRoute(t *testing.T) {
	api := "/api/v1/repos/fleet/app"
	tests := []struct {
		name, method, path, service string
		want                        Route
		ok                          bool
	}{
		{"read of the repository", "GET", api + "/issues/42", "", Route{Operation: OpRead, Repository: fxRepo}, true},
		{"read of the repository itself", "GET", api, "", Route{Operation: OpRead, Repository: fxRepo}, true},
		{"head is a read", "HEAD", api + "/pulls/57", "", Route{Operation: OpRead, Repository: fxRepo}, true},
		{"version", "GET", "/api/v1/version", "", Route{Operation: OpRead}, true},
		{"own user", "GET", "/api/v1/user", "", Route{Operation: OpRead}, true},
		{"other users are not served", "GET", "/api/v1/users/alice/repos", "", Route{}, false},
		{"repository search is not served", "GET", "/api/v1/repos/search", "", Route{}, false},
		{"comment", "POST", api + "/issues/42/comments", "", Route{Operation: OpComment, Repository: fxRepo, Number: 42, Body: BodyComment}, true},
		{"comment on a number that is not one", "POST", api + "/issues/042/comments", "", Route{}, false},
		{"comment on zero", "POST", api + "/issues/0/comments", "", Route{}, false},
		{"review", "POST", api + "/pulls/57/reviews", "", Route{Operation: OpReview, Repository: fxRepo, Number: 57, Kind: KindPullRequest, Body: BodyReview}, true},
		{"merge", "POST", api + "/pulls/57/merge", "", Route{Operation: OpMerge, Repository: fxRepo, Number: 57, Kind: KindPullRequest, Body: BodyMerge}, true},
		{"cancel auto-merge is not served", "DELETE", api + "/pulls/57/merge", "", Route{}, false},
		{"open a pull request", "POST", api + "/pulls", "", Route{Operation: OpOpenPullRequest, Repository: fxRepo, Body: BodyOpenPull}, true},
		{"close or edit an issue", "PATCH", api + "/issues/42", "", Route{Operation: OpEditIssue, Repository: fxRepo, Number: 42}, true},
		{"labels", "POST", api + "/issues/42/labels", "", Route{Operation: OpLabel, Repository: fxRepo, Number: 42}, true},
		{"one label", "DELETE", api + "/issues/42/labels/7", "", Route{Operation: OpLabel, Repository: fxRepo, Number: 42}, true},
		{"assignees", "POST", api + "/issues/42/assignees", "", Route{Operation: OpAssign, Repository: fxRepo, Number: 42}, true},
		{"a commit of several files", "POST", api + "/contents", "", Route{Operation: OpPushBranch, Repository: fxRepo, Body: BodyContents}, true},
		{"a new file", "POST", api + "/contents/docs/RELEASING.md", "", Route{Operation: OpPushBranch, Repository: fxRepo, Body: BodyContents, Path: "docs/RELEASING.md"}, true},
		{"an updated file", "PUT", api + "/contents/README.md", "", Route{Operation: OpPushBranch, Repository: fxRepo, Body: BodyContents, Path: "README.md"}, true},
		{"a deleted file", "DELETE", api + "/contents/.fleet/claim-rules.json", "", Route{Operation: OpPushBranch, Repository: fxRepo, Body: BodyContents, Path: ".fleet/claim-rules.json"}, true},
		{"reading a file is a read", "GET", api + "/contents/README.md", "", Route{Operation: OpRead, Repository: fxRepo}, true},
		{"applying a patch is not served", "POST", api + "/diffpatch", "", Route{}, false},
		{"editing a comment is not served", "PATCH", api + "/issues/comments/9", "", Route{}, false},
		{"deleting the repository is not served", "DELETE", api, "", Route{}, false},
		{"submitting a pending review is not served", "POST", api + "/pulls/57/reviews/3", "", Route{}, false},
		{"fetch advertisement", "GET", "/fleet/app.git/info/refs", "git-upload-pack", Route{Operation: OpRead, Repository: fxRepo, Git: true}, true},
		{"fetch", "POST", "/fleet/app.git/git-upload-pack", "", Route{Operation: OpRead, Repository: fxRepo, Git: true}, true},
		{"fetch without .git", "POST", "/fleet/app/git-upload-pack", "", Route{Operation: OpRead, Repository: fxRepo, Git: true}, true},
		{"push advertisement", "GET", "/fleet/app.git/info/refs", "git-receive-pack", Route{Operation: OpRead, Repository: fxRepo, Git: true}, true},
		{"push", "POST", "/fleet/app.git/git-receive-pack", "", Route{Operation: OpPushBranch, Repository: fxRepo, Body: BodyReceivePack, Git: true}, true},
		{"info/refs with another service", "GET", "/fleet/app.git/info/refs", "git-upload-archive", Route{}, false},
		{"dot-dot is never matched", "GET", api + "/../../other/x", "", Route{}, false},
		{"double slash is never matched", "POST", "/api/v1/repos/fleet//app/issues/42/comments", "", Route{}, false},
		{"trailing slash is never matched", "POST", api + "/issues/42/comments/", "", Route{}, false},
		{"relative path", "GET", "api/v1/version", "", Route{}, false},
		{"unknown method", "PUT", api + "/issues/42/comments", "", Route{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := MatchRoute(tt.method, tt.path, tt.service)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("MatchRoute(%s %s ?service=%s) = %+v, %v; want %+v, %v", tt.method, tt.path, tt.service, got, ok, tt.want, tt.ok)
			}
			if ok && got.Mutation() != (tt.want.Operation != OpRead) {
				t.Fatalf("Mutation() = %v", got.Mutation())
			}
		})
	}
}

// TestRouteTableDocumented: every row of the table is in docs/gateway.md, so the
// documented table cannot drift from the code.
func TestRouteTableDocumented(t *testing.T) {
	doc := readDoc(t, "../../docs/gateway.md")
	for _, r := range RouteTable() {
		needle := "`" + r.Pattern + "`"
		if !strings.Contains(doc, needle) {
			t.Errorf("docs/gateway.md lacks route %s", needle)
		}
		if r.Operation != OpRead && !strings.Contains(doc, "`"+r.Operation+"`") {
			t.Errorf("docs/gateway.md lacks operation %s", r.Operation)
		}
	}
}

// TestRouteOperationsAreExplained: every operation the route table names is a read, held
// by a role (and then a refusal under another role names it), or held by none and refused
// with its own reason, whose message says so; and every refusal reason the gateway gives
// is in the list of docs/gateway.md.
func TestRouteOperationsAreExplained(t *testing.T) {
	for _, r := range RouteTable() {
		if r.Operation == OpRead {
			continue
		}
		held := slices.ContainsFunc(grantableRoles, func(role Role) bool { return slices.Contains(OperationsFor(role), r.Operation) })
		reason, none := noRoleReasons[r.Operation]
		switch {
		case held && none:
			t.Errorf("%s is held by a role and refused as held by none (%s)", r.Operation, reason)
		case held && operationPhrases[r.Operation] == "":
			t.Errorf("%s is held by a role, but a refusal under another role cannot say what it does", r.Operation)
		case !held && !none:
			t.Errorf("%s (%s) is held by no role and has no refusal of its own", r.Operation, r.Pattern)
		case none && !strings.HasPrefix(RefusalMessage(reason), "no role may"):
			t.Errorf("%s: the message of %s does not say that no role may: %q", r.Operation, reason, RefusalMessage(reason))
		}
	}
	doc := readDoc(t, "../../docs/gateway.md")
	for reason := range refusalMessages {
		if reason == ReasonRevoked {
			continue // the gateway never answers it: a revoked capability's claim is not Active
		}
		if !strings.Contains(doc, "| `"+reason+"` |") {
			t.Errorf("docs/gateway.md does not list the refusal reason %s", reason)
		}
	}
}

func TestReviewOperation(t *testing.T) {
	for event, want := range map[string]string{"APPROVED": OpApprove, "approved": "", " APPROVED": "", "Comment": "", "COMMENT": OpReview,
		"REQUEST_CHANGES": OpReview, "PENDING": "", "": "", "REQUEST_REVIEW": ""} {
		got, ok := ReviewOperation(event)
		if got != want || ok != (want != "") {
			t.Errorf("ReviewOperation(%q) = %q, %v; want %q", event, got, ok, want)
		}
	}
}
