package claim

import (
	"html"
	"regexp"
	"strconv"
)

// Gitea acts on the texts it stores. A reference to an issue or pull request ("#3", "!3",
// "owner/repo#3", or a link to /owner/repo/issues/3) in a pull request's title or body, a
// comment, a review, a merge message or a pushed commit message adds an entry to that
// item's timeline; preceded by a closing or reopening keyword ("fixes #3", "reopens #3")
// in a pull request or a commit that reaches the default branch, it closes or reopens the
// item; followed by a time-tracking marker ("#3 @1h") in a commit, it logs time on it.
// Each is a write to the item referenced, made on Gitea's own initiative.
//
// So a capability covers its own items only in the texts it forwards: every reference a
// text makes must name one of them. The rule does not depend on the keywords: whichever
// close and reopen words a Gitea server is configured with, a reference to another item
// is refused before any keyword could act on it, and a keyword next to a covered item acts
// only on that item.
//
// The scanner over-approximates Gitea's parser (modules/references): whatever Gitea could
// take for a reference, the scanner reports, and it may report more. It reads the text as
// written and with HTML character references decoded (Markdown renders "&#35;3" as
// "#3"); any character that is not a letter, digit, '_', '.' or '-' may open a reference
// (Gitea first strips Markdown, so "**#3**" is one); a number ends a reference unless an
// ASCII letter or '_' follows; and every /issues/N or /pulls/N path, on any host, counts.

// ItemRef is one reference a text makes.
type ItemRef struct {
	// Repository is the "owner/name" the reference names ("" for a bare "#N" or "!N",
	// which is the repository the text is written in).
	Repository string
	// Number is the issue or pull request number.
	Number int64
}

// String renders the reference as a worker would write it.
func (r ItemRef) String() string {
	return r.Repository + "#" + strconv.FormatInt(r.Number, 10)
}

// urlRef finds issue and pull request paths: .../owner/repo/issues/N or /pulls/N.
var urlRef = regexp.MustCompile(`([^/\s]*)/([^/\s]*)/(?:issues|pulls)/([0-9]+)`)

// FindReferences lists every reference text could make, in the order found (duplicates
// included). Numbers too large for an int64 are reported as -1: they name no item the
// caller could hold.
func FindReferences(text string) []ItemRef {
	out := scanReferences(nil, text)
	if dec := html.UnescapeString(text); dec != text {
		out = scanReferences(out, dec)
	}
	return out
}

func scanReferences(out []ItemRef, s string) []ItemRef {
	for i := 0; i < len(s); i++ {
		if s[i] != '#' && s[i] != '!' {
			continue
		}
		j := i + 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == i+1 || (j < len(s) && (isASCIILetter(s[j]) || s[j] == '_')) {
			continue // no number, or a word such as "#12abc" that Gitea does not link
		}
		if i > 0 && s[i-1] == '&' && s[i] == '#' && j < len(s) && s[j] == ';' {
			continue // a character reference ("&#39;"): read in its decoded form
		}
		n := parseNumber(s[i+1 : j])
		if i == 0 || !isNameByte(s[i-1]) {
			out = append(out, ItemRef{Number: n})
			continue
		}
		// Preceded by a name character: only "owner/repo#N" is a reference.
		repoStart := i
		for repoStart > 0 && isNameByte(s[repoStart-1]) {
			repoStart--
		}
		if repoStart == 0 || s[repoStart-1] != '/' {
			continue // "abc#3", "C#12": not a reference in Gitea
		}
		ownerStart := repoStart - 1
		for ownerStart > 0 && isNameByte(s[ownerStart-1]) {
			ownerStart--
		}
		owner, repo := s[ownerStart:repoStart-1], s[repoStart:i]
		if owner == "" {
			// "/repo#3": no owner, so no repository Gitea can resolve; count it as a
			// reference to an unknown one.
			out = append(out, ItemRef{Repository: "/" + repo, Number: n})
			continue
		}
		out = append(out, ItemRef{Repository: owner + "/" + repo, Number: n})
	}
	for _, m := range urlRef.FindAllStringSubmatch(s, -1) {
		repo := m[1] + "/" + m[2]
		if m[1] == "" || m[2] == "" {
			repo = "/" + repo // not an owner/name Gitea can resolve: never covered
		}
		out = append(out, ItemRef{Repository: repo, Number: parseNumber(m[3])})
	}
	return out
}

// ReferencesOnly reports whether every reference text makes names one of items, all in
// repository (a bare "#N" names an item of repository). A text without references is
// fine.
func ReferencesOnly(text, repository string, items ...int64) bool {
	return ForeignReference(text, repository, items...) == nil
}

// ForeignReference returns the first reference text makes to an item outside items of
// repository, or nil when there is none.
func ForeignReference(text, repository string, items ...int64) *ItemRef {
	for _, r := range FindReferences(text) {
		if r.Repository != "" && !sameRepository(r.Repository, repository) {
			return &r
		}
		covered := false
		for _, n := range items {
			if n > 0 && r.Number == n {
				covered = true
				break
			}
		}
		if !covered {
			return &r
		}
	}
	return nil
}

// References reports whether Gitea certainly links issue n of its own repository from
// text: "#n" as a whole number, with the boundaries Gitea's parser requires on both sides
// (white space, the start or end, brackets, quotes, or punctuation followed by space or
// the end). Where FindReferences reports what Gitea could link, References reports only
// what it will: a pull request must name its issue so that Gitea links it.
func References(text string, n int64) bool {
	re := regexp.MustCompile(`(?:\s|^|\(|\[|'|")#` + strconv.FormatInt(n, 10) + `(?:\s|$|\)|\]|'|"|[:;,.?!]\s|[:;,.?!]$)`)
	return re.MatchString(text)
}

// LinkedItems lists, once each and in the order found, the items of repository that text
// references (bare or by the repository's own name): a pull request's title and body name
// the issues it works on.
func LinkedItems(text, repository string) []int64 {
	var out []int64
	seen := map[int64]bool{}
	for _, r := range FindReferences(text) {
		if r.Number <= 0 || seen[r.Number] || (r.Repository != "" && !sameRepository(r.Repository, repository)) {
			continue
		}
		seen[r.Number] = true
		out = append(out, r.Number)
	}
	return out
}

func parseNumber(digits string) int64 {
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func isDigit(c byte) bool       { return c >= '0' && c <= '9' }
func isASCIILetter(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }

// isNameByte is a byte Gitea allows in an owner or repository name.
func isNameByte(c byte) bool {
	return isDigit(c) || isASCIILetter(c) || c == '_' || c == '.' || c == '-'
}
