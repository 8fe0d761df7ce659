package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"code.gitea.io/sdk/gitea"
	"github.com/google/jsonschema-go/jsonschema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// TestTruncate: what a read tool returns is cut to its cap, says it was cut, never splits
// a character, and ends on a whole line when one ends in the second half of the cap.
func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		n        int
		want     string
		cut      bool
	}{
		{"short", "abc\n", 10, "abc\n", false},
		{"exactly the cap", "abcd", 4, "abcd", false},
		{"at the last line end", "line one\nline two\nline three\n", 22, "line one\nline two\n", true},
		{"no line end in the second half", "a\nbcdefghijklmnop", 10, "a\nbcdefghi", true},
		{"no line end at all", "abcdefghij", 4, "abcd", true},
		{"not inside a character", "aaé", 3, "aa", true}, // é is two bytes: a cut at 3 would split it
		{"not inside a four-byte character", "a😀b", 3, "a", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := truncate(tc.in, tc.n)
			if got != tc.want || cut != tc.cut {
				t.Errorf("truncate(%q, %d) = %q, %v; want %q, %v", tc.in, tc.n, got, cut, tc.want, tc.cut)
			}
			if len(got) > tc.n || !utf8.ValidString(got) {
				t.Errorf("truncate(%q, %d) = %q: longer than the cap or not valid UTF-8", tc.in, tc.n, got)
			}
		})
	}
	big := strings.Repeat("+a line of a large diff\n", maxTextBytes/10)
	got, cut := truncate(big, maxTextBytes)
	if !cut || len(got) > maxTextBytes || len(got) < maxTextBytes/2 || !strings.HasSuffix(got, "\n") {
		t.Errorf("a %d-byte diff cut at %d: %d bytes, cut %v, want whole lines within the cap", len(big), maxTextBytes, len(got), cut)
	}
}

// TestRepoPath: a file path or ref names something inside the worker's repository and
// cannot climb out of the request's path.
func TestRepoPath(t *testing.T) {
	for _, ok := range []string{"README.md", "docs/kubectl-fleet.md", "a/b.c/d", "v1.2.3", "fleet/ns/claim-1", ".github/workflows/ci.yml", "a..b"} {
		if got, err := repoPath("path", ok); err != nil || got != ok {
			t.Errorf("repoPath(%q) = %q, %v; want it as it is", ok, got, err)
		}
	}
	for _, bad := range []string{"", "..", "../other/repo", "a/../../b", "a/./b", "a//b", "a/", "/", `a\b`, "a\x00b", "a\nb"} {
		if _, err := repoPath("path", bad); err == nil {
			t.Errorf("repoPath(%q) accepted a path that may leave the repository", bad)
		}
	}
}

// TestListed: a capped list says how many Gitea counts and whether some were left out.
func TestListed(t *testing.T) {
	withTotal := func(total string) *gitea.Response {
		h := http.Header{}
		if total != "" {
			h.Set("X-Total-Count", total)
		}
		return &gitea.Response{Response: &http.Response{Header: h}}
	}
	for _, tc := range []struct {
		name            string
		resp            *gitea.Response
		returned, shown int
		total           int
		truncated       bool
	}{
		{"all shown", withTotal("3"), 3, 3, 3, false},
		{"Gitea counts more", withTotal("120"), 50, 50, 120, true},
		{"more returned than shown", withTotal(""), 70, 50, 0, true},
		{"no count, all shown", withTotal(""), 7, 7, 0, false},
		{"no response", nil, 2, 2, 0, false},
	} {
		total, truncated := listed(tc.resp, tc.returned, tc.shown)
		if total != tc.total || truncated != tc.truncated {
			t.Errorf("%s: listed = %d, %v; want %d, %v", tc.name, total, truncated, tc.total, tc.truncated)
		}
	}
}

// TestMCPOutputsMatchTheirSchemas: the structured content of each tool, with its lists
// empty or unset and its timestamps set or not, is valid against the output schema the
// tool advertises (the SDK refuses to send content that is not).
func TestMCPOutputsMatchTheirSchemas(t *testing.T) {
	now := metav1.Now()
	check := func(name string, schema *jsonschema.Schema, v any) {
		t.Helper()
		r, err := schema.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(doc); err != nil {
			t.Errorf("%s: %s does not match its schema: %v", name, b, err)
		}
	}
	capability := fleetv1alpha1.TaskCapability{Worker: "w", Role: "author", ExpiresAt: now, Target: fleetv1alpha1.ClaimTargetRef{Kind: "Issue", Number: 3}}
	check("claim", outputSchema[ClaimOutput](), ClaimOutput{Claim: "c", Capability: capability, WorkBranch: "fleet/ns/c"})
	check("claim, no expiry", outputSchema[ClaimOutput](), ClaimOutput{Claim: "c"})
	check("inspect", outputSchema[InspectOutput](), InspectOutput{Claims: []ClaimView{{Name: "c", Capability: &capability,
		Result: &fleetv1alpha1.ClaimResult{Outcome: "acquired"}}}, Target: &TargetView{Kind: "issue", Number: 3}})
	check("inspect, nothing", outputSchema[InspectOutput](), InspectOutput{})
	check("release", outputSchema[EndOutput](), EndOutput{Claim: "c", Phase: "Released"})
	check("comment", outputSchema[WriteOutput](), WriteOutput{Done: "commented", Number: 3})
	issue := IssueOutput{Repository: "o/r", Number: 3, Kind: "issue", Created: time.Now()}
	check("read_issue", outputSchema[IssueOutput](), issue)
	check("read_pr", outputSchema[PullOutput](), PullOutput{IssueOutput: issue, HeadSHA: "abc", Mergeable: true})
	check("read_diff", outputSchema[DiffOutput](), DiffOutput{Diff: "x", Truncated: true})
	check("read_file", outputSchema[FileOutput](), FileOutput{Binary: true})
	check("list_comments", outputSchema[CommentsOutput](), CommentsOutput{Comments: []CommentView{{ID: 1}}})
	check("read_timeline", outputSchema[TimelineOutput](), TimelineOutput{Events: []EventView{{Type: "label", Label: "x"}}})
	check("search_issues", outputSchema[SearchOutput](), SearchOutput{})
}
