package liveness

import (
	"strconv"
	"strings"
	"testing"
)

func FuzzParseStat(f *testing.F) {
	f.Add("24540 (cat) R 24535 24535 21011 0 -1 4194304 101 0 0 0 0 0 0 0 20 0 1 0 68997 3133440 379\n")
	f.Add(statLine(42, "a) b (c", 'S', 77))
	f.Add(statLine(42, "x y", 'Z', 0))
	f.Add(statLine(42, ") S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 (", 'S', 1))
	f.Add("1 () S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5")
	f.Add("")
	f.Add("1 (")
	f.Add("42 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9223372036854775808")

	f.Fuzz(func(t *testing.T, line string) {
		start, state, err := ParseStat(line)
		if err != nil {
			return
		}
		trimmed := strings.TrimSuffix(line, "\n")
		last := strings.LastIndexByte(trimmed, ')')
		if last < 0 || last+2 >= len(trimmed) {
			t.Fatalf("accepted %q without room for a state after the last ')'", line)
		}
		if trimmed[last+1] != ' ' || trimmed[last+2] != state {
			t.Fatalf("state %q is not the byte after the last ') ' in %q", state, line)
		}
		if !isASCIILetter(state) {
			t.Fatalf("state %q is not a letter", state)
		}
		if start < 0 {
			t.Fatalf("negative start time %d from %q", start, line)
		}
		fields := strings.Split(trimmed[last+2:], " ")
		if len(fields) < 20 {
			t.Fatalf("accepted %q with %d fields after the command name", line, len(fields))
		}
		if v, perr := strconv.ParseInt(fields[19], 10, 64); perr != nil || v != start {
			t.Fatalf("start time %d is not field 22 of %q", start, line)
		}
		if !strings.HasPrefix(trimmed, strings.SplitN(trimmed, " ", 2)[0]+" (") {
			t.Fatalf("accepted %q without a pid prefix", line)
		}
	})
}

// FuzzParseStatRoundTrip renders a stat line with an arbitrary command name
// and checks that the start time and state come back unchanged.
func FuzzParseStatRoundTrip(f *testing.F) {
	f.Add("a) b (c", int64(77), byte('S'))
	f.Add("x y", int64(0), byte('Z'))
	f.Add(") R 1 2 3", int64(1<<62), byte('R'))
	f.Add("\n)\n", int64(5), byte('D'))

	f.Fuzz(func(t *testing.T, comm string, start int64, state byte) {
		if start < 0 || !isASCIILetter(state) {
			return
		}
		line := statLine(1234, comm, state, start)
		gotStart, gotState, err := ParseStat(line)
		if err != nil {
			t.Fatalf("ParseStat(%q): %v", line, err)
		}
		if gotStart != start || gotState != state {
			t.Fatalf("ParseStat(%q) = %d, %q, want %d, %q", line, gotStart, gotState, start, state)
		}
	})
}
