package claim

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// giteaLinks is the table of what Gitea (v1.27) links, written from the patterns of its
// reference parser (modules/references) and its Markdown stripping; the gateway suite
// posts the same forms to a real server and reads the timelines back
// ("Gitea's reference parser" in internal/gateway). The scanner must report each, and may
// report more, which every "extra" column lists.
var giteaLinks = []struct {
	text  string
	gitea []ItemRef // what Gitea links
	extra []ItemRef // what the scanner adds (over-approximation)
}{
	{text: "Fixes #2", gitea: refs("#2")},
	{text: "fixes #2 and closes #3, resolves #1", gitea: refs("#2", "#3", "#1")},
	{text: "CLOSES #3", gitea: refs("#3")},
	{text: "reopens #4", gitea: refs("#4")},
	{text: "See !5.", gitea: refs("#5")},
	{text: "(#6)", gitea: refs("#6")},
	{text: "[#7]", gitea: refs("#7")},
	{text: "\"#8\"", gitea: refs("#8")},
	{text: "fixes #9: done", gitea: refs("#9")},
	{text: "#10, #11; #12?", gitea: refs("#10", "#11", "#12")},
	{text: "worked on #13 @1h30m", gitea: refs("#13")},
	{text: "see fleet/demo#14", gitea: refs("fleet/demo#14")},
	{text: "see other/repo!15", gitea: refs("other/repo#15")},
	{text: "http://gitea.local/fleet/demo/issues/16", gitea: refs("fleet/demo#16")},
	{text: "[link](http://gitea.local/fleet/demo/pulls/17)", gitea: refs("fleet/demo#17")},
	{text: "**#18**", gitea: refs("#18"), extra: nil},
	{text: "&#35;19", extra: refs("#19")}, // Gitea keeps the entity; Markdown renders it "#19"
	{text: "it&#39;s #2", gitea: refs("#2")},
	{text: "fixes #0020", gitea: refs("#20")},
	// Not references in Gitea; the scanner agrees.
	{text: "#abc"},
	{text: "C#12 is a language"},
	{text: "abc#3"},
	{text: "#12abc"},
	{text: "#_1"},
	{text: "# heading"},
	{text: "issue 3"},
	// Over-approximated: Gitea does not link these, the scanner reports them.
	{text: "x*#21", extra: refs("#21")},
	{text: "#22-a", extra: refs("#22")},
	{text: "#23.5", extra: refs("#23")},
	{text: "https://github.com/o/r/issues/24", extra: refs("o/r#24")},
	{text: "#25é", extra: refs("#25")},
	{text: "/repo#26", extra: refs("/repo#26")},
}

func refs(list ...string) []ItemRef {
	var out []ItemRef
	for _, s := range list {
		repo, num, _ := strings.Cut(s, "#")
		n, _ := strconv.ParseInt(num, 10, 64)
		out = append(out, ItemRef{Repository: repo, Number: n})
	}
	return out
}

func TestFindReferencesCoversGitea(t *testing.T) {
	for _, tc := range giteaLinks {
		got := FindReferences(tc.text)
		want := append(slices.Clone(tc.gitea), tc.extra...)
		if !sameRefs(got, want) {
			t.Errorf("FindReferences(%q) = %v, want %v", tc.text, got, want)
		}
	}
}

func sameRefs(got, want []ItemRef) bool {
	g, w := map[ItemRef]bool{}, map[ItemRef]bool{}
	for _, r := range got {
		g[r] = true
	}
	for _, r := range want {
		w[r] = true
	}
	if len(g) != len(w) {
		return false
	}
	for r := range w {
		if !g[r] {
			return false
		}
	}
	return true
}

func TestReferencesOnly(t *testing.T) {
	const repo = "fleet/demo"
	cases := []struct {
		text  string
		items []int64
		want  bool
	}{
		{"Fixes #2", []int64{2}, true},
		{"Fixes #2 … also closes #3, resolves #1", []int64{2}, false},
		{"closes FLEET/Demo#2", []int64{2}, true},
		{"closes fleet/other#2", []int64{2}, false},
		{"reopens #1", []int64{2}, false},
		{"spent time on #1 @1h", []int64{2}, false},
		{"looks good (#5), fixes #2", []int64{5, 2}, true},
		{"no references at all", []int64{2}, true},
		{"", []int64{2}, true},
		{"#99999999999999999999999", []int64{2}, false},
		{"see http://gitea/fleet/demo/issues/2", []int64{2}, true},
		{"see http://gitea/fleet/demo/issues/3", []int64{2}, false},
		{"&#35;3 decoded", []int64{2}, false},
		{"#2", nil, false},
	}
	for _, tc := range cases {
		if got := ReferencesOnly(tc.text, repo, tc.items...); got != tc.want {
			t.Errorf("ReferencesOnly(%q, %v) = %v, want %v", tc.text, tc.items, got, tc.want)
		}
	}
}

func TestReferencesAndLinkedItems(t *testing.T) {
	if !References("Fixes #12.", 12) || References("Fixes #123", 12) || References("x#12", 12) {
		t.Error("References must match #12 as a whole number only")
	}
	// Only what Gitea certainly links: an entity, Markdown emphasis or a loose boundary
	// may be read as a reference by the scanner, never as the pull request's own link.
	for _, text := range []string{"&#35;12", "**#12**", "#12-x", "x*#12"} {
		if References(text, 12) {
			t.Errorf("References(%q, 12) = true; Gitea does not link it as written", text)
		}
	}
	if got := LinkedItems("Fixes #2, see #2 and fleet/demo#3, not other/x#4", "fleet/demo"); !slices.Equal(got, []int64{2, 3}) {
		t.Errorf("LinkedItems = %v, want [2 3]", got)
	}
}

func TestProtectedPath(t *testing.T) {
	for p, want := range map[string]bool{
		".fleet": true, ".fleet/claim-rules.json": true, "/.fleet/x": true, ".FLEET/x": true,
		".fleetx": false, "docs/.fleet": false, "README.md": false,
	} {
		if got := ProtectedPath(p); got != want {
			t.Errorf("ProtectedPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestProtectedDirChanged(t *testing.T) {
	const tree, other = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	readme := TreeEntry{Name: "README.md", Mode: "100644", ID: other}
	fleet := TreeEntry{Name: ".fleet", Mode: "40000", ID: tree}
	cases := []struct {
		name       string
		root       []TreeEntry
		mode, id   string
		wantChange bool
	}{
		{"unchanged", []TreeEntry{readme, fleet}, "40000", tree, false},
		{"unchanged, mode with a leading zero", []TreeEntry{readme, fleet}, "040000", tree, false},
		{"edited", []TreeEntry{readme, {Name: ".fleet", Mode: "40000", ID: other}}, "40000", tree, true},
		{"replaced by a file", []TreeEntry{readme, {Name: ".fleet", Mode: "100644", ID: tree}}, "40000", tree, true},
		{"deleted", []TreeEntry{readme}, "40000", tree, true},
		{"added where there was none", []TreeEntry{readme, fleet}, "", "", true},
		{"absent on both", []TreeEntry{readme}, "", "", false},
		{"a second spelling", []TreeEntry{readme, fleet, {Name: ".FLEET", Mode: "40000", ID: other}}, "40000", tree, true},
	}
	for _, tc := range cases {
		if got := ProtectedDirChanged(tc.root, tc.mode, tc.id); got != tc.wantChange {
			t.Errorf("%s: ProtectedDirChanged = %v, want %v", tc.name, got, tc.wantChange)
		}
	}
}

// The oracle below is a strict reading of what Gitea links (written from its behaviour:
// the boundaries before and after a reference, cross-repository names, links to issues on
// the server itself, here http://gitea.local).
// FuzzFindReferences checks that the scanner reports everything the oracle finds.
var (
	oracleLocal = regexp.MustCompile(`(?:\s|^|\(|\[|'|")([#!][0-9]+)(?:\s|$|\)|\]|'|"|[:;,.?!]\s|[:;,.?!]$)`)
	oracleCross = regexp.MustCompile(`(?:\s|^|\(|\[)([0-9a-zA-Z-_\.]+/[0-9a-zA-Z-_\.]+[#!][0-9]+)(?:\s|$|\)|\]|[:;,.?!]\s|[:;,.?!]$)`)
	oracleURL   = regexp.MustCompile(`(?:\s|^|\(|\[)https?://gitea\.local/([0-9a-zA-Z-_\.]+/[0-9a-zA-Z-_\.]+)/(?:issues|pulls)/([0-9]+)(?:\s|$|\)|\]|[:;,.?!]\s|[:;,.?!]$)`)
)

// oracle lists what the strict reading finds, scanning again after each match as Gitea
// does (a match's closing boundary may open the next one).
func oracle(text string) []ItemRef {
	var out []ItemRef
	for _, re := range []*regexp.Regexp{oracleLocal, oracleCross} {
		for pos := 0; pos < len(text); {
			m := re.FindStringSubmatchIndex(text[pos:])
			if m == nil {
				break
			}
			ref := text[pos+m[2] : pos+m[3]]
			i := strings.LastIndexAny(ref, "#!")
			n, err := strconv.ParseInt(ref[i+1:], 10, 64)
			if err != nil {
				n = -1
			}
			out = append(out, ItemRef{Repository: ref[:i], Number: n})
			pos += m[3]
		}
	}
	for _, m := range oracleURL.FindAllStringSubmatch(text, -1) {
		n, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			n = -1
		}
		out = append(out, ItemRef{Repository: m[1], Number: n})
	}
	return out
}

func TestOracleMatchesTable(t *testing.T) {
	for _, tc := range giteaLinks {
		if strings.Contains(tc.text, "&#") || strings.Contains(tc.text, "**") || strings.Contains(tc.text, "](") {
			continue // Gitea strips Markdown and decodes entities first; the oracle does not
		}
		if got := oracle(tc.text); !sameRefs(got, tc.gitea) {
			t.Errorf("oracle(%q) = %v, want %v", tc.text, got, tc.gitea)
		}
	}
}

func FuzzFindReferences(f *testing.F) {
	for _, tc := range giteaLinks {
		f.Add(tc.text)
	}
	f.Add("Fixes #2 … also closes #3, resolves #1\nreopens !4 @1h (fleet/demo#5) [x/y!6]")
	f.Add("ＦＩＸＥＳ ＃3 and #３ and \u00a0#4\u2003#5")
	f.Fuzz(func(t *testing.T, text string) {
		found := FindReferences(text)
		have := map[ItemRef]bool{}
		for _, r := range found {
			have[ItemRef{Repository: strings.ToLower(r.Repository), Number: r.Number}] = true
		}
		for _, r := range oracle(text) {
			if !have[ItemRef{Repository: strings.ToLower(r.Repository), Number: r.Number}] {
				t.Fatalf("Gitea would link %v in %q; the scanner found only %v", r, text, found)
			}
			// A text the scanner passes for an item must not make this reference.
			if r.Number > 0 && ReferencesOnly(text, "fleet/demo", r.Number+1) {
				t.Fatalf("ReferencesOnly passed %q for #%d although it links %v", text, r.Number+1, r)
			}
		}
	})
}
