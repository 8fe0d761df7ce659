package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// The request types below mirror Gitea 1.26's API option structs (modules/structs and
// services/forms), json tags included: they are what Gitea decodes a forwarded body into.

type giteaComment struct {
	Body string `json:"body"`
}

type giteaReviewComment struct {
	Path       string `json:"path"`
	Body       string `json:"body"`
	OldLineNum int64  `json:"old_position"`
	NewLineNum int64  `json:"new_position"`
}

type giteaReview struct {
	Event    string               `json:"event"`
	Body     string               `json:"body"`
	CommitID string               `json:"commit_id"`
	Comments []giteaReviewComment `json:"comments"`
}

// giteaMerge is MergePullRequestForm's UnmarshalJSON aux struct: both spellings of four
// fields, the lower-case one winning when both are set (util.IfZero).
type giteaMerge struct {
	Do1                    string `json:"do"`
	Do2                    string `json:"Do"`
	MergeTitleField1       string `json:"merge_title_field"`
	MergeTitleField2       string `json:"MergeTitleField"`
	MergeMessageField1     string `json:"merge_message_field"`
	MergeMessageField2     string `json:"MergeMessageField"`
	MergeCommitID1         string `json:"merge_commit_id"`
	MergeCommitID2         string `json:"MergeCommitID"`
	HeadCommitID           string `json:"head_commit_id"`
	ForceMerge             bool   `json:"force_merge"`
	MergeWhenChecksSucceed bool   `json:"merge_when_checks_succeed"`
	DeleteBranchAfterMerge *bool  `json:"delete_branch_after_merge"`
}

type giteaOpenPull struct {
	Head                string     `json:"head"`
	Base                string     `json:"base"`
	Title               string     `json:"title"`
	Body                string     `json:"body"`
	Assignee            string     `json:"assignee"`
	Assignees           []string   `json:"assignees"`
	Milestone           int64      `json:"milestone"`
	Labels              []int64    `json:"labels"`
	Deadline            *time.Time `json:"due_date"`
	Reviewers           []string   `json:"reviewers"`
	TeamReviewers       []string   `json:"team_reviewers"`
	AllowMaintainerEdit *bool      `json:"allow_maintainer_edit"`
}

type giteaIdentity struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

type giteaCommitDates struct {
	Author    time.Time `json:"author"`
	Committer time.Time `json:"committer"`
}

type giteaChangeFile struct {
	Operation string `json:"operation"`
	Path      string `json:"path"`
	Content   string `json:"content"`
	SHA       string `json:"sha"`
	FromPath  string `json:"from_path"`
}

// giteaContents is the union of the contents API's option structs (FileOptions, and the
// fields CreateFileOptions, UpdateFileOptions, DeleteFileOptions and ChangeFilesOptions
// add): each route's struct reads a subset of these names, and ignores the rest.
type giteaContents struct {
	Message   string            `json:"message"`
	Branch    string            `json:"branch"`
	NewBranch string            `json:"new_branch"`
	ForcePush bool              `json:"force_push"`
	Author    giteaIdentity     `json:"author"`
	Committer giteaIdentity     `json:"committer"`
	Dates     giteaCommitDates  `json:"dates"`
	Signoff   bool              `json:"signoff"`
	Content   string            `json:"content"`
	SHA       string            `json:"sha"`
	FromPath  string            `json:"from_path"`
	Files     []giteaChangeFile `json:"files"`
}

func ifZero(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// giteaReading is what Gitea takes from a body: the facts the gateway decides on, every
// text it stores, and the fields the gateway does not forward that it would act on.
type giteaReading struct {
	event, commit, head, base string
	branch, newBranch         string
	texts, commits, paths     []string
	acted                     []string
}

// decodeLikeGitea decodes b as Gitea does for rule, with one of the two decoders a Gitea
// build may run: exact (encoding/json/v2, as release builds: case-sensitive names,
// duplicates refused) or lenient (encoding/json v1: case-insensitive, last duplicate wins).
func decodeLikeGitea(b []byte, rule claim.BodyRule, exact bool) (giteaReading, error) {
	decode := json.Unmarshal
	if exact {
		decode = unmarshalExact
	}
	var r giteaReading
	switch rule {
	case claim.BodyComment:
		var v giteaComment
		if err := decode(b, &v); err != nil {
			return r, err
		}
		r.texts = []string{v.Body}
	case claim.BodyReview:
		var v giteaReview
		if err := decode(b, &v); err != nil {
			return r, err
		}
		r.event, r.commit, r.texts = v.Event, v.CommitID, []string{v.Body}
		for _, c := range v.Comments {
			r.texts = append(r.texts, c.Body)
		}
	case claim.BodyMerge:
		var v giteaMerge
		if err := decode(b, &v); err != nil {
			return r, err
		}
		r.commit = v.HeadCommitID
		r.texts = []string{ifZero(v.MergeTitleField1, v.MergeTitleField2), ifZero(v.MergeMessageField1, v.MergeMessageField2)}
		if style := ifZero(v.Do1, v.Do2); style != "" && !slices.Contains(mergeStyles, style) {
			r.acted = append(r.acted, "Do="+style)
		}
		for name, set := range map[string]bool{"merge_commit_id": ifZero(v.MergeCommitID1, v.MergeCommitID2) != "",
			"force_merge": v.ForceMerge, "merge_when_checks_succeed": v.MergeWhenChecksSucceed,
			"delete_branch_after_merge": v.DeleteBranchAfterMerge != nil && *v.DeleteBranchAfterMerge} {
			if set {
				r.acted = append(r.acted, name)
			}
		}
	case claim.BodyOpenPull:
		var v giteaOpenPull
		if err := decode(b, &v); err != nil {
			return r, err
		}
		r.head, r.base, r.texts = v.Head, v.Base, []string{v.Title, v.Body}
		for name, set := range map[string]bool{"assignee": v.Assignee != "", "assignees": len(v.Assignees) > 0,
			"milestone": v.Milestone != 0, "labels": len(v.Labels) > 0, "due_date": v.Deadline != nil,
			"reviewers": len(v.Reviewers) > 0, "team_reviewers": len(v.TeamReviewers) > 0,
			"allow_maintainer_edit": v.AllowMaintainerEdit != nil && *v.AllowMaintainerEdit} {
			if set {
				r.acted = append(r.acted, name)
			}
		}
	case claim.BodyContents:
		var v giteaContents
		if err := decode(b, &v); err != nil {
			return r, err
		}
		r.branch, r.newBranch, r.commits = v.Branch, v.NewBranch, []string{v.Message}
		r.paths = append(r.paths, v.FromPath)
		for _, f := range v.Files {
			r.paths = append(r.paths, f.Path, f.FromPath)
		}
		for _, id := range []giteaIdentity{v.Author, v.Committer} {
			for name, set := range map[string]bool{"name": id.Name != "", "email": id.Email != ""} {
				if set {
					r.acted = append(r.acted, name)
				}
			}
		}
		for name, set := range map[string]bool{"author": !v.Dates.Author.IsZero(), "committer": !v.Dates.Committer.IsZero(),
			"signoff": v.Signoff, "force_push": v.ForcePush} {
			if set {
				r.acted = append(r.acted, name)
			}
		}
	}
	return r, nil
}

// unmarshalExact models encoding/json/v2's defaults for a flat struct: one JSON object,
// names matched exactly, a duplicate name an error, unknown names ignored.
func unmarshalExact(b []byte, v any) error {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("not an object")
	}
	obj = map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name := t.(string)
		if _, dup := obj[name]; dup {
			return errors.New("duplicate name " + name)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		obj[name] = raw
	}
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		tag := strings.Split(rv.Type().Field(i).Tag.Get("json"), ",")[0]
		if raw, ok := obj[tag]; ok {
			if err := unmarshalExactValue(raw, rv.Field(i).Addr().Interface()); err != nil {
				return err
			}
		}
	}
	return nil
}

// unmarshalExactValue decodes one value, recursing into structs (a commit's author or
// dates) and slices of structs (review comments, the files of a commit) exactly too.
func unmarshalExactValue(raw json.RawMessage, p any) error {
	rv := reflect.ValueOf(p).Elem()
	isStruct := func(t reflect.Type) bool { return t.Kind() == reflect.Struct && t != reflect.TypeFor[time.Time]() }
	switch {
	case string(raw) == "null":
		return nil
	case isStruct(rv.Type()):
		return unmarshalExact(raw, p)
	case rv.Kind() == reflect.Slice && isStruct(rv.Type().Elem()):
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return err
		}
		for _, it := range items {
			item := reflect.New(rv.Type().Elem())
			if err := unmarshalExact(it, item.Interface()); err != nil {
				return err
			}
			rv.Set(reflect.Append(rv, item.Elem()))
		}
		return nil
	}
	return json.Unmarshal(raw, p)
}

// giteaBinding is how Gitea's binding picks a reader for a POST by its Content-Type.
func giteaBinding(contentType string) string {
	switch {
	case strings.Contains(contentType, "form-urlencoded"):
		return "form" // reads the URL query (and a form body)
	case strings.Contains(contentType, "multipart/form-data"):
		return "multipart"
	case strings.Contains(contentType, "json"):
		return "json"
	}
	return "refused"
}

var ruleRoutes = []claim.Route{
	{Operation: claim.OpComment, Body: claim.BodyComment},
	{Operation: claim.OpReview, Body: claim.BodyReview, Kind: claim.KindPullRequest},
	{Operation: claim.OpMerge, Body: claim.BodyMerge, Kind: claim.KindPullRequest},
	{Operation: claim.OpOpenPullRequest, Body: claim.BodyOpenPull},
	{Operation: claim.OpPushBranch, Body: claim.BodyContents},
}

// checkAgreement is the property: a request the gateway reads and forwards is read by
// Gitea exactly as the gateway read it, under either decoder, and Gitea binds it as JSON
// with no query to read.
func checkAgreement(t *testing.T, contentType, rawQuery string, body []byte, rt claim.Route) {
	t.Helper()
	w := claim.Write{Route: rt}
	if !JSONContentType(contentType) || decodeBody(body, &w) != nil {
		return // refused: nothing reaches Gitea
	}
	out, err := http.NewRequest(http.MethodPost, "http://gitea.invalid/api/v1/repos/o/r/issues/1/comments?"+rawQuery, bytes.NewReader(body))
	if err != nil {
		return
	}
	out.Header.Set("Content-Type", contentType)
	asRead(out, rt)
	if got := giteaBinding(out.Header.Get("Content-Type")); got != "json" {
		t.Fatalf("forwarded Content-Type %q is bound by Gitea as %s", out.Header.Get("Content-Type"), got)
	}
	if out.URL.RawQuery != "" || len(out.URL.Query()) != 0 {
		t.Fatalf("forwarded query %q", out.URL.RawQuery)
	}
	for _, exact := range []bool{true, false} {
		g, err := decodeLikeGitea(body, rt.Body, exact)
		if err != nil {
			continue // Gitea refuses the body (422): nothing is written
		}
		if g.event != w.Event || g.commit != w.CommitID || g.head != w.PullHead || g.base != w.PullBase ||
			g.branch != w.Branch || g.newBranch != w.NewBranch {
			t.Fatalf("exact=%v: Gitea reads event=%q commit=%q head=%q base=%q branch=%q new_branch=%q, "+
				"the gateway event=%q commit=%q head=%q base=%q branch=%q new_branch=%q (body %q)",
				exact, g.event, g.commit, g.head, g.base, g.branch, g.newBranch, w.Event, w.CommitID, w.PullHead, w.PullBase, w.Branch, w.NewBranch, body)
		}
		for _, msg := range g.commits {
			if msg != "" && !slices.Contains(w.Commits, msg) {
				t.Fatalf("exact=%v: Gitea commits with message %q the gateway did not read (body %q)", exact, msg, body)
			}
		}
		for _, p := range g.paths {
			if p != "" && !slices.Contains(w.ChangedPaths, p) {
				t.Fatalf("exact=%v: Gitea writes path %q the gateway did not read (body %q)", exact, p, body)
			}
		}
		for _, text := range g.texts {
			if text != "" && !slices.Contains(w.Text, text) {
				t.Fatalf("exact=%v: Gitea stores text %q the gateway did not read (body %q)", exact, text, body)
			}
		}
		slices.Sort(g.acted)
		forbidden := slices.Clone(w.Forbidden)
		slices.Sort(forbidden)
		if !slices.Equal(g.acted, forbidden) {
			t.Fatalf("exact=%v: Gitea acts on %v, the gateway refuses %v (body %q)", exact, g.acted, forbidden, body)
		}
	}
}

func TestJSONContentType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                          true,
		"application/json; charset=utf-8":           true,
		"Application/JSON; charset=UTF-8":           true,
		"application/json; charset=form-urlencoded": false, // Gitea binds the query
		"application/json; x=multipart/form-data":   false,
		"application/json; charset=latin1":          false,
		"application/json;charset=utf-8;a=b":        false,
		"application/x-www-form-urlencoded":         false,
		"text/json":                                 false,
		"application/jsonx":                         false,
		"":                                          false,
		"application/json, text/plain":              false,
	} {
		if got := JSONContentType(ct); got != want {
			t.Errorf("JSONContentType(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestDecodeBody(t *testing.T) {
	review, merge, pull, comment, contents := ruleRoutes[1], ruleRoutes[2], ruleRoutes[3], ruleRoutes[0], ruleRoutes[4]
	// What the Gitea Go SDK sends for CreateFile: every option, empty.
	sdkFile := `{"message":"Add a.md","branch":"fleet/ns/tc","new_branch":"","author":{"name":"","email":""},` +
		`"committer":{"name":"","email":""},"dates":{"author":"0001-01-01T00:00:00Z","committer":"0001-01-01T00:00:00Z"},` +
		`"signoff":false,"content":"aGk="}`
	sdkPull := `{"head":"fleet/ns/tc","base":"main","title":"t","body":"Fixes #4","assignee":"","assignees":null,` +
		`"reviewers":null,"team_reviewers":null,"milestone":0,"labels":null,"due_date":null}`
	sdkMerge := `{"Do":"merge","MergeCommitID":"","MergeTitleField":"","MergeMessageField":"","force_merge":false,` +
		`"head_commit_id":"abc","merge_when_checks_succeed":false}`
	tests := []struct {
		name      string
		rt        claim.Route
		body      string
		ok        bool
		forbidden []string
		check     func(claim.Write) bool
	}{
		{name: "comment", rt: comment, body: `{"body":"hello"}`, ok: true,
			check: func(w claim.Write) bool { return slices.Equal(w.Text, []string{"hello"}) }},
		{name: "comment with an unknown field", rt: comment, body: `{"body":"x","token":"t"}`},
		{name: "review", rt: review, body: `{"event":"COMMENT","commit_id":"abc","body":"b","comments":[{"path":"a.go","body":"c","new_position":3}]}`, ok: true,
			check: func(w claim.Write) bool {
				return w.Event == "COMMENT" && w.CommitID == "abc" && slices.Contains(w.Text, "c")
			}},
		{name: "review with event twice", rt: review, body: `{"event":"COMMENT","event":"APPROVED","commit_id":"abc"}`},
		{name: "review with an escaped duplicate", rt: review, body: `{"event":"COMMENT","\u0065vent":"APPROVED"}`},
		{name: "review with a case variant", rt: review, body: `{"event":"APPROVED","EVENT":"COMMENT"}`},
		{name: "review with a case variant alone", rt: review, body: `{"Event":"APPROVED","commit_id":"abc"}`},
		{name: "review with trailing data", rt: review, body: `{"event":"COMMENT"}{"event":"APPROVED"}`},
		{name: "review with a comment's unknown field", rt: review, body: `{"event":"COMMENT","comments":[{"body":"c","Body":"d"}]}`},
		{name: "review with a number for the event", rt: review, body: `{"event":1}`},
		{name: "not an object", rt: review, body: `["event"]`},
		{name: "invalid UTF-8", rt: comment, body: "{\"body\":\"\xff\"}"},
		{name: "SDK merge", rt: merge, body: sdkMerge, ok: true, check: func(w claim.Write) bool { return w.CommitID == "abc" }},
		{name: "merge with both spellings of do", rt: merge, body: `{"Do":"merge","do":"squash","head_commit_id":"abc"}`},
		{name: "scheduled merge", rt: merge, body: `{"Do":"merge","head_commit_id":"abc","merge_when_checks_succeed":true}`, ok: true,
			forbidden: []string{"merge_when_checks_succeed"}},
		{name: "forced merge", rt: merge, body: `{"Do":"merge","head_commit_id":"abc","force_merge":true}`, ok: true, forbidden: []string{"force_merge"}},
		{name: "manual merge", rt: merge, body: `{"Do":"manually-merged","MergeCommitID":"abc","head_commit_id":"abc"}`, ok: true,
			forbidden: []string{"Do=manually-merged", "merge_commit_id"}},
		{name: "SDK pull request", rt: pull, body: sdkPull, ok: true,
			check: func(w claim.Write) bool { return w.PullHead == "fleet/ns/tc" && w.PullBase == "main" }},
		{name: "pull request with labels and assignees", rt: pull, body: `{"head":"h","base":"main","title":"t","labels":[1],"assignees":["x"]}`, ok: true,
			forbidden: []string{"labels", "assignees"}},
		{name: "SDK file", rt: contents, body: sdkFile, ok: true,
			check: func(w claim.Write) bool {
				return w.Branch == "fleet/ns/tc" && w.NewBranch == "" && slices.Equal(w.Commits, []string{"Add a.md"})
			}},
		{name: "file moved onto a new branch", rt: contents, body: `{"branch":"main","new_branch":"fleet/ns/tc","from_path":"old.md","sha":"abc","content":"aGk="}`, ok: true,
			check: func(w claim.Write) bool {
				return w.Branch == "main" && w.NewBranch == "fleet/ns/tc" && slices.Equal(w.ChangedPaths, []string{"old.md"})
			}},
		{name: "commit of several files", rt: contents, body: `{"branch":"fleet/ns/tc","message":"m","files":[` +
			`{"operation":"create","path":"a.md","content":"aGk="},{"operation":"update","path":"b.md","from_path":".fleet/x","sha":"s"}]}`, ok: true,
			check: func(w claim.Write) bool { return slices.Equal(w.ChangedPaths, []string{"a.md", "b.md", ".fleet/x"}) }},
		{name: "file with its own author and dates", rt: contents,
			body: `{"branch":"b","author":{"name":"Someone","email":"someone@example.com"},"dates":{"author":"2020-01-01T00:00:00Z"}}`, ok: true,
			forbidden: []string{"name", "email", "author"}},
		{name: "file pushed by force, signed off", rt: contents, body: `{"branch":"b","force_push":true,"signoff":true}`, ok: true,
			forbidden: []string{"force_push", "signoff"}},
		{name: "file with a case variant of branch", rt: contents, body: `{"branch":"fleet/ns/tc","Branch":"main"}`},
		{name: "file with a case variant in its author", rt: contents, body: `{"branch":"b","author":{"Name":"x"}}`},
		{name: "file with a file's unknown field", rt: contents, body: `{"branch":"b","files":[{"path":"a","Path":".fleet/x"}]}`},
		{name: "file with branch twice", rt: contents, body: `{"branch":"fleet/ns/tc","branch":"main"}`},
		{name: "pull request with reviewers and a milestone", rt: pull, body: `{"head":"h","base":"main","title":"t","reviewers":["x"],"milestone":2}`, ok: true,
			forbidden: []string{"reviewers", "milestone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := claim.Write{Route: tt.rt}
			err := decodeBody([]byte(tt.body), &w)
			if (err == nil) != tt.ok {
				t.Fatalf("decodeBody = %v, want ok=%v", err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, errBody) {
					t.Fatalf("error %v is not errBody", err)
				}
				return
			}
			if len(w.Forbidden)+len(tt.forbidden) > 0 && !slices.Equal(w.Forbidden, tt.forbidden) {
				t.Fatalf("forbidden = %v, want %v", w.Forbidden, tt.forbidden)
			}
			if tt.check != nil && !tt.check(w) {
				t.Fatalf("write = %+v", w)
			}
			checkAgreement(t, "application/json", "", []byte(tt.body), tt.rt)
		})
	}
}

// FuzzBodyAgreesWithGitea sends random Content-Types, queries and bodies (duplicate and
// case-variant names among the seeds) through the gateway's reader and checks that
// whatever it forwards, Gitea reads exactly as the gateway did.
func FuzzBodyAgreesWithGitea(f *testing.F) {
	seeds := []struct {
		ct, query, body string
		rule            uint8
	}{
		{"application/json; charset=form-urlencoded", "event=APPROVED", `{"event":"COMMENT","commit_id":"a"}`, 1},
		{"application/json", "", `{"event":"APPROVED","EVENT":"COMMENT","commit_id":"a"}`, 1},
		{"application/json", "", `{"event":"COMMENT","event":"APPROVED"}`, 1},
		{"application/json", "sudo=admin&token=x", `{"body":"hi"}`, 0},
		{"application/json", "", `{"Do":"merge","do":"manually-merged","head_commit_id":"a"}`, 2},
		{"application/json", "", `{"Do":"merge","head_commit_id":"a","merge_when_checks_succeed":true}`, 2},
		{"application/json", "", `{"head":"fleet/n/c","base":"main","title":"Fixes #1","labels":[3],"Labels":[]}`, 3},
		{"application/json", "", `{"head":"fleet/n/c","base":"main","title":"t","body":"<!-- fleet-claim:v1 {} -->"}`, 3},
		{"application/json;charset=UTF-8", "head=main", `{"head":"fleet/n/c","base":"main","title":"t"}`, 3},
		{"multipart/form-data; boundary=x", "", `{"body":"x"}`, 0},
		{"text/plain", "", `{"body":"x"}`, 0},
		{"application/json", "", `{"event":"COMMENT","comments":[{"body":"a","BODY":"b"}]}`, 1},
		{"application/json", "", `{"branch":"fleet/n/c","new_branch":"","message":"m","content":"aGk=","author":{"name":"","email":""}}`, 4},
		{"application/json", "", `{"branch":"fleet/n/c","files":[{"operation":"delete","path":".fleet/claim-rules.json"}],"dates":{"author":null}}`, 4},
	}
	for _, s := range seeds {
		f.Add(s.ct, s.query, []byte(s.body), s.rule)
	}
	f.Fuzz(func(t *testing.T, contentType, rawQuery string, body []byte, rule uint8) {
		if _, err := url.ParseQuery(rawQuery); err != nil {
			rawQuery = url.QueryEscape(rawQuery)
		}
		checkAgreement(t, contentType, rawQuery, body, ruleRoutes[int(rule)%len(ruleRoutes)])
	})
}

func TestFillHead(t *testing.T) {
	const head = "0123456789abcdef0123456789abcdef01234567"
	for _, tt := range []struct {
		name string
		rule claim.BodyRule
		body string
	}{
		{"review without commit_id", claim.BodyReview, `{"event":"COMMENT","body":"fine \u00e9 <b>"}`},
		{"review with a null commit_id", claim.BodyReview, `{"commit_id":null,"event":"APPROVED"}`},
		{"review with an empty commit_id", claim.BodyReview, `{"event":"COMMENT","commit_id":""}`},
		{"merge without head_commit_id", claim.BodyMerge, `{"Do":"squash","merge_message_field":"Squashed"}`},
		{"empty merge", claim.BodyMerge, `{}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := claim.Write{Route: claim.Route{Body: tt.rule}}
			if err := decodeBody([]byte(tt.body), &before); err != nil {
				t.Fatalf("the body does not decode to start with: %v", err)
			}
			out, err := fillHead([]byte(tt.body), tt.rule, head)
			if err != nil {
				t.Fatal(err)
			}
			after := claim.Write{Route: claim.Route{Body: tt.rule}}
			if err := decodeBody(out, &after); err != nil {
				t.Fatalf("the filled body %s does not decode: %v", out, err)
			}
			if after.CommitID != head {
				t.Fatalf("filled body %s names commit %q, want %q", out, after.CommitID, head)
			}
			// Everything else reads as before.
			after.CommitID = before.CommitID
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("filling the head changed the write: %+v, want %+v", after, before)
			}
		})
	}
	if _, err := fillHead([]byte(`{"body":"x"}`), claim.BodyComment, head); err == nil {
		t.Fatal("a comment got a head filled in")
	}
}
