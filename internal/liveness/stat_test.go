package liveness

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	realLine := "24540 (cat) R 24535 24535 21011 0 -1 4194304 101 0 0 0 0 0 0 0 20 0 1 0 68997 3133440 379 " +
		"18446744073709551615 93954025324544 93954025344425 140733314724704 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	// A command name that imitates the tail of a stat line: only the last ')'
	// may be trusted.
	forged := "7 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 111) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 222 0\n"

	tests := []struct {
		name      string
		line      string
		wantStart int64
		wantState byte
		wantErr   bool
	}{
		{name: "real line", line: realLine, wantStart: 68997, wantState: 'R'},
		{name: "no trailing newline", line: strings.TrimSuffix(realLine, "\n"), wantStart: 68997, wantState: 'R'},
		{name: "exactly 22 fields", line: "1 (init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", wantStart: 5, wantState: 'S'},
		{name: "command with space", line: statLine(42, "x y", 'S', 1234), wantStart: 1234, wantState: 'S'},
		{name: "command with parens and spaces", line: statLine(42, "a) b (c", 'S', 77), wantStart: 77, wantState: 'S'},
		{name: "command is a closing paren", line: statLine(42, ")", 'R', 8), wantStart: 8, wantState: 'R'},
		{name: "command is an opening paren", line: statLine(42, "(", 'R', 8), wantStart: 8, wantState: 'R'},
		{name: "command with doubled parens", line: statLine(42, "((x))", 'D', 9), wantStart: 9, wantState: 'D'},
		{name: "command with newline", line: statLine(42, "a\nb) c", 'S', 10), wantStart: 10, wantState: 'S'},
		{name: "empty command", line: statLine(42, "", 'S', 11), wantStart: 11, wantState: 'S'},
		{name: "forged fields in command", line: forged, wantStart: 222, wantState: 'S'},
		{name: "zombie", line: statLine(42, "defunct", 'Z', 12), wantStart: 12, wantState: 'Z'},
		{name: "idle kernel thread", line: statLine(42, "kworker/0:1", 'I', 0), wantStart: 0, wantState: 'I'},
		{name: "max start time", line: statLine(42, "x", 'S', 1<<63-1), wantStart: 1<<63 - 1, wantState: 'S'},

		{name: "empty", line: "", wantErr: true},
		{name: "only newline", line: "\n", wantErr: true},
		{name: "no parens", line: "42 cat R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", wantErr: true},
		{name: "no closing paren", line: "42 (cat R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", wantErr: true},
		{name: "closing before opening", line: "42 )cat( R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", wantErr: true},
		{name: "pid not numeric", line: "x4 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", wantErr: true},
		{name: "pid missing", line: " (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", wantErr: true},
		{name: "no space before paren", line: "42(cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", wantErr: true},
		{name: "too few fields", line: "42 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0", wantErr: true},
		{name: "nothing after command", line: "42 (cat)", wantErr: true},
		{name: "no space after command", line: "42 (cat)R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", wantErr: true},
		{name: "double space shifts fields", line: "42 (cat) R  1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", wantErr: true},
		{name: "state two letters", line: "42 (cat) RS 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", wantErr: true},
		{name: "state not a letter", line: "42 (cat) 1 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", wantErr: true},
		{name: "negative start time", line: statLine(42, "x", 'S', -5), wantErr: true},
		{name: "signed start time", line: "42 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 +5", wantErr: true},
		{name: "start time not numeric", line: "42 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5x", wantErr: true},
		{name: "start time overflows", line: "42 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9223372036854775808", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start, state, err := ParseStat(tc.line)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseStat(%q) = %d, %q, want an error", tc.line, start, state)
				}
				if !errors.Is(err, ErrMalformedStat) {
					t.Fatalf("error %v does not wrap ErrMalformedStat", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseStat(%q) error: %v", tc.line, err)
			}
			if start != tc.wantStart || state != tc.wantState {
				t.Fatalf("ParseStat(%q) = %d, %q, want %d, %q", tc.line, start, state, tc.wantStart, tc.wantState)
			}
		})
	}
}

func TestProcessStartTime(t *testing.T) {
	f := newFakeRoot(t, testHost, testBoot)
	f.process(42, "a) b (c", 'S', 4242)
	f.write("proc/43/stat", "garbage")

	tests := []struct {
		name       string
		pid        int64
		want       int64
		wantErr    bool
		wantNotExt bool
	}{
		{name: "present", pid: 42, want: 4242},
		{name: "missing", pid: 44, wantErr: true, wantNotExt: true},
		{name: "garbage", pid: 43, wantErr: true},
		{name: "zero pid", pid: 0, wantErr: true},
		{name: "negative pid", pid: -1, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ProcessStartTime(f.root, tc.pid)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ProcessStartTime(%d) = %d, want an error", tc.pid, got)
				}
				if tc.wantNotExt && !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("error %v does not wrap os.ErrNotExist", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ProcessStartTime(%d) = %d, %v, want %d", tc.pid, got, err, tc.want)
			}
		})
	}
}
