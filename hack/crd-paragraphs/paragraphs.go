package main

import (
	"strings"
	"unicode"
)

// Paragraphs joins the lines of each paragraph of a doc comment into one line.
//
// A line break is kept where it carries structure that kubectl explain also keeps:
// before and after a blank line, before a list item ("- ", "* ", "1. ", "1) "), and
// before an indented (code) line. Every other break joins two lines of one sentence
// with a single space, a break after a colon included: in this API's comments a colon
// ends a clause more often than it opens a block.
func Paragraphs(s string) string {
	lines := strings.Split(s, "\n")
	var b strings.Builder
	for i, line := range lines {
		if i > 0 {
			if keepBreak(lines[i-1], line) {
				b.WriteByte('\n')
			} else {
				b.WriteByte(' ')
				line = strings.TrimLeft(line, " \t")
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

func keepBreak(prev, next string) bool {
	switch {
	case strings.TrimSpace(prev) == "", strings.TrimSpace(next) == "":
		return true
	case indented(next), listItem(next):
		return true
	}
	return false
}

// indented reports a code line: one that starts with a tab or at least two spaces
// (godoc's preformatted text, after controller-gen strips the comment's one space).
func indented(line string) bool {
	return strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "  ")
}

// listItem reports a line that starts a list item.
func listItem(line string) bool {
	t := strings.TrimLeft(line, " ")
	if strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") {
		return true
	}
	digits := strings.IndexFunc(t, func(r rune) bool { return !unicode.IsDigit(r) })
	if digits <= 0 || digits+1 >= len(t) {
		return false
	}
	return (t[digits] == '.' || t[digits] == ')') && t[digits+1] == ' '
}
