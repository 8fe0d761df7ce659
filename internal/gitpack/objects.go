package gitpack

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// parseCommit parses a commit's content. The returned Commit has no ID.
//
// It reads the headers the way git does: the first line must be "tree <id>",
// the "parent <id>" lines that directly follow it are the parents, and every
// other header is skipped, including the continuation lines (starting with a
// space) of multi-line headers such as gpgsig or mergetag. The headers end at
// the first empty line; the message is everything after it. The strings
// returned share memory with data.
func parseCommit(data string, h Hash) (Commit, error) {
	headers, msg, _ := strings.Cut(data, "\n\n")
	first, rest, _ := strings.Cut(headers, "\n")
	tree, ok := strings.CutPrefix(first, "tree ")
	if !ok {
		return Commit{}, fmt.Errorf("%w: commit does not start with a tree header", ErrMalformed)
	}
	c := Commit{Message: msg}
	var err error
	if c.Tree, err = hexID(tree, h); err != nil {
		return Commit{}, fmt.Errorf("%w: commit tree header: %w", ErrMalformed, err)
	}
	for rest != "" {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		parent, ok := strings.CutPrefix(line, "parent ")
		if !ok {
			break
		}
		id, err := hexID(parent, h)
		if err != nil {
			return Commit{}, fmt.Errorf("%w: commit parent header: %w", ErrMalformed, err)
		}
		c.Parents = append(c.Parents, id)
	}
	return c, nil
}

// hexID checks that s is an object id in hex and returns it in lowercase.
func hexID(s string, h Hash) (string, error) {
	if len(s) != 2*h.size() {
		return "", fmt.Errorf("id %q has %d characters, want %d", s, len(s), 2*h.size())
	}
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return "", fmt.Errorf("id %q is not hexadecimal", s)
		}
	}
	return strings.ToLower(s), nil
}

// parseTree parses a tree's content: a sequence of entries, each an octal
// mode, a space, a name, a NUL byte and the raw id. Names must be non-empty
// and free of '/', as git requires; a name with a slash could otherwise hide
// a path from a caller that walks the tree one level at a time.
func parseTree(data string, h Hash) ([]TreeEntry, error) {
	var entries []TreeEntry
	for data != "" {
		mode, rest, ok := strings.Cut(data, " ")
		if !ok || !isOctal(mode) {
			return nil, fmt.Errorf("%w: tree entry %d: bad mode", ErrMalformed, len(entries))
		}
		name, rest, ok := strings.Cut(rest, "\x00")
		if !ok || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("%w: tree entry %d: bad name %q", ErrMalformed, len(entries), name)
		}
		if len(rest) < h.size() {
			return nil, fmt.Errorf("%w: tree entry %d: id cut short", ErrMalformed, len(entries))
		}
		entries = append(entries, TreeEntry{Mode: mode, Name: name, ID: hex.EncodeToString([]byte(rest[:h.size()]))})
		data = rest[h.size():]
	}
	return entries, nil
}

// isOctal reports whether s is a non-empty string of octal digits.
func isOctal(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}
