package liveness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrMalformedStat is wrapped by every error ParseStat returns.
var ErrMalformedStat = errors.New("liveness: malformed /proc/<pid>/stat")

// startTimeField is the 1-based position of starttime in /proc/<pid>/stat.
const startTimeField = 22

// firstFieldAfterComm is the 1-based position of the first field after the
// command name (the one-letter process state).
const firstFieldAfterComm = 3

// ParseStat extracts the start time (field 22, clock ticks since boot) and the
// state letter (field 3) from the content of a /proc/<pid>/stat file.
//
// The command name (field 2) is enclosed in parentheses but may itself
// contain spaces, parentheses and even newlines, so it cannot be split on
// whitespace. The kernel writes nothing after it that contains ')', so the
// parser anchors on the last ')' of the text: what follows is a single space,
// the state letter, and space-separated numeric fields. The text before the
// command name must be the pid, in decimal, followed by " (". A single
// trailing newline is accepted.
func ParseStat(line string) (startTime int64, state byte, err error) {
	line = strings.TrimSuffix(line, "\n")

	open := strings.IndexByte(line, '(')
	if open < 2 || line[open-1] != ' ' || !allDigits(line[:open-1]) {
		return 0, 0, fmt.Errorf("%w: expected %q at the start", ErrMalformedStat, "<pid> (")
	}
	closing := strings.LastIndexByte(line, ')')
	if closing < open {
		return 0, 0, fmt.Errorf("%w: no ')' closing the command name", ErrMalformedStat)
	}
	rest := line[closing+1:]
	if !strings.HasPrefix(rest, " ") {
		return 0, 0, fmt.Errorf("%w: no space after the command name", ErrMalformedStat)
	}
	fields := strings.Split(rest[1:], " ")
	need := startTimeField - firstFieldAfterComm + 1
	if len(fields) < need {
		return 0, 0, fmt.Errorf("%w: %d fields after the command name, need at least %d",
			ErrMalformedStat, len(fields), need)
	}
	for i, f := range fields[:need] {
		if f == "" {
			return 0, 0, fmt.Errorf("%w: field %d is empty", ErrMalformedStat, i+firstFieldAfterComm)
		}
	}

	st := fields[0]
	if len(st) != 1 || !isASCIILetter(st[0]) {
		return 0, 0, fmt.Errorf("%w: state %q is not a single letter", ErrMalformedStat, st)
	}
	raw := fields[startTimeField-firstFieldAfterComm]
	if !allDigits(raw) {
		return 0, 0, fmt.Errorf("%w: start time %q is not a decimal number", ErrMalformedStat, raw)
	}
	startTime, err = strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: start time %q: %w", ErrMalformedStat, raw, err)
	}
	return startTime, st[0], nil
}

// ProcessStartTime reads <root>/proc/<pid>/stat and returns the process start
// time in clock ticks since boot. An empty root means "/". It is the value a
// launcher records as Target.StartTime.
func ProcessStartTime(root string, pid int64) (int64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("liveness: invalid pid %d", pid)
	}
	startTime, _, err := readStat(root, pid)
	return startTime, err
}

// readStat reads and parses <root>/proc/<pid>/stat. File errors are wrapped
// unchanged so callers can tell ENOENT from the rest.
func readStat(root string, pid int64) (startTime int64, state byte, err error) {
	path := statPath(root, pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, fmt.Errorf("liveness: read %s: %w", path, err)
	}
	startTime, state, err = ParseStat(string(data))
	if err != nil {
		return 0, 0, fmt.Errorf("liveness: parse %s: %w", path, err)
	}
	return startTime, state, nil
}

func statPath(root string, pid int64) string {
	return filepath.Join(rootOrSlash(root), "proc", strconv.FormatInt(pid, 10), "stat")
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isASCIILetter(b byte) bool {
	return ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z')
}
