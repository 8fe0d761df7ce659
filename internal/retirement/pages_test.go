package retirement

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

func TestPaginate(t *testing.T) {
	rows := func(n, detail int) []Assessment {
		out := make([]Assessment, n)
		for i := range out {
			out[i] = Assessment{WorkerIdentity: fmt.Sprintf("w-%05d", i), ReasonCode: ReasonEligibleStaleOrphan, Detail: strings.Repeat("d", detail)}
		}
		return out
	}
	cases := []struct {
		name              string
		rows              []Assessment
		maxRows, maxBytes int
		wantSizes         []int
	}{
		{"no rows, no pages", nil, 500, 1 << 20, nil},
		{"one short page", rows(3, 10), 500, 1 << 20, []int{3}},
		{"split by rows", rows(1201, 10), 500, 1 << 20, []int{500, 500, 201}},
		{"exactly full", rows(1000, 10), 500, 1 << 20, []int{500, 500}},
		{"split by bytes", rows(10, 1000), 500, 3 * 1100, []int{3, 3, 3, 1}},
		{"an oversized row has a page of its own", rows(2, 5000), 500, 1000, []int{1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pages := Paginate(c.rows, c.maxRows, c.maxBytes)
			var sizes []int
			var joined []Assessment
			for _, p := range pages {
				sizes = append(sizes, len(p))
				joined = append(joined, p...)
				size := 0
				for _, a := range p {
					size += AssessmentSize(a)
				}
				if len(p) > 1 && size > c.maxBytes {
					t.Errorf("a page of %d rows weighs %d bytes, over %d", len(p), size, c.maxBytes)
				}
			}
			if fmt.Sprint(sizes) != fmt.Sprint(c.wantSizes) {
				t.Errorf("page sizes %v, want %v", sizes, c.wantSizes)
			}
			if len(joined) != len(c.rows) {
				t.Fatalf("pages hold %d rows, want %d", len(joined), len(c.rows))
			}
			for i := range joined {
				if joined[i].WorkerIdentity != c.rows[i].WorkerIdentity {
					t.Fatalf("row %d is %s, want %s: pages must keep the order", i, joined[i].WorkerIdentity, c.rows[i].WorkerIdentity)
				}
			}
		})
	}
}

func TestPaginateDefaultsKeepAPageFarBelowTheObjectLimit(t *testing.T) {
	// The worst row the schema allows: a 1 KiB detail and a generous evidence map.
	worst := Assessment{WorkerIdentity: strings.Repeat("n", 253), ReasonCode: strings.Repeat("r", 64), Detail: strings.Repeat("d", 1024),
		Evidence: map[string]string{}}
	for i := range 12 {
		worst.Evidence[fmt.Sprintf("evidence-key-%02d", i)] = strings.Repeat("v", 80)
	}
	rows := make([]Assessment, 3000)
	for i := range rows {
		rows[i] = worst
	}
	for _, p := range Paginate(rows, PageMaxRows, PageMaxBytes) {
		size := 0
		for _, a := range p {
			size += AssessmentSize(a)
		}
		if size > PageMaxBytes {
			t.Fatalf("a page weighs %d bytes", size)
		}
	}
}

func TestCompactPageRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	pick := func(vals ...string) string { return vals[rng.Intn(len(vals))] }
	norm := func(rows []Assessment) []Assessment {
		out := make([]Assessment, len(rows))
		for i, a := range rows {
			if len(a.Evidence) == 0 {
				a.Evidence = nil
			}
			out[i] = a
		}
		return out
	}
	for round := 0; round < 2000; round++ {
		n := rng.Intn(6)
		rows := make([]Assessment, n)
		for i := range rows {
			ev := map[string]string{}
			for _, k := range []string{"hostID", "probeState", "pid", "rowBootID"} {
				if rng.Intn(4) > 0 {
					ev[k] = pick("a", "b", "")
				}
			}
			rows[i] = Assessment{WorkerIdentity: fmt.Sprintf("w-%d", i), ReasonCode: pick(ReasonEligibleStaleOrphan, ReasonPIDAlive),
				Detail: pick("", "the process is gone", "the process is alive"), Evidence: ev}
		}
		in := norm(rows)
		shared, own := CompactPage(rows)
		if got := norm(ExpandPage(shared, own)); !reflect.DeepEqual(got, in) {
			t.Fatalf("round %d: expanded %+v, want %+v (shared %+v, own %+v)", round, got, in, shared, own)
		}
		if !reflect.DeepEqual(norm(rows), in) {
			t.Fatalf("round %d: CompactPage changed its input", round)
		}
	}
}

func TestCompactPageFactorsWhatEveryRowShares(t *testing.T) {
	host := map[string]string{"hostID": "h", "hostBootID": "b", "probeState": "gone"}
	row := func(name, pid string) Assessment {
		ev := map[string]string{"pid": pid}
		for k, v := range host {
			ev[k] = v
		}
		return Assessment{WorkerIdentity: name, ReasonCode: ReasonEligibleStaleOrphan, Detail: "every eligibility check passed", Evidence: ev}
	}
	rows := []Assessment{row("a", "1"), row("b", "2"), row("c", "3")}
	shared, own := CompactPage(rows)
	want := Assessment{ReasonCode: ReasonEligibleStaleOrphan, Detail: "every eligibility check passed", Evidence: host}
	if !reflect.DeepEqual(shared, want) {
		t.Errorf("shared %+v, want %+v", shared, want)
	}
	for i, o := range own {
		if o.ReasonCode != "" || o.Detail != "" || !reflect.DeepEqual(o.Evidence, map[string]string{"pid": fmt.Sprint(i + 1)}) {
			t.Errorf("row %s keeps %+v, want only its pid", o.WorkerIdentity, o)
		}
	}
	rows[1].Evidence["probeState"] = "unknown"
	rows[2].ReasonCode = ReasonPIDAlive
	shared, own = CompactPage(rows)
	if shared.ReasonCode != "" || shared.Evidence["probeState"] != "" || own[1].Evidence["probeState"] != "unknown" || own[2].ReasonCode != ReasonPIDAlive {
		t.Errorf("a field one row differs in stayed shared: shared %+v, own %+v", shared, own)
	}
	if s, o := CompactPage(rows[:1]); s.ReasonCode != "" || !reflect.DeepEqual(o, rows[:1]) {
		t.Errorf("a page of one row is not kept whole: %+v %+v", s, o)
	}
}

func TestFleetPages(t *testing.T) {
	written := HostPages{HostID: "a", State: ConditionPagesWritten}
	for _, tc := range []struct {
		name        string
		hosts       []HostPages
		want        string
		mentions    []string
		notMentions []string
	}{
		{name: "no host plan: only the fleet plan's own pages, written at fan-out", want: ConditionPagesWritten},
		{name: "every host plan written", hosts: []HostPages{written, {HostID: "b", State: ConditionPagesWritten}}, want: ConditionPagesWritten},
		{name: "a host plan still writing", hosts: []HostPages{written, {HostID: "b", State: ConditionWritingPages}},
			want: ConditionWritingPages, mentions: []string{"b"}, notMentions: []string{"a"}},
		{name: "a host plan with no PagesReady yet counts as writing", hosts: []HostPages{{HostID: "b"}},
			want: ConditionWritingPages, mentions: []string{"b"}},
		{name: "one host plan's pages never come: final, even while another still writes",
			hosts: []HostPages{{HostID: "b", State: ConditionWritingPages}, {HostID: "c", State: ConditionPagesNotWritten}},
			want:  ConditionPagesNotWritten, mentions: []string{"c"}, notMentions: []string{"b"}},
		{name: "a lost host's unwritten pages never come", hosts: []HostPages{written, {HostID: "b", State: ConditionWritingPages, AgentLost: true}},
			want: ConditionPagesNotWritten, mentions: []string{"b"}},
		{name: "a lost host whose pages were written is fine", hosts: []HostPages{{HostID: "b", State: ConditionPagesWritten, AgentLost: true}},
			want: ConditionPagesWritten},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := FleetPages(tc.hosts)
			if got != tc.want {
				t.Fatalf("FleetPages = %q (%s), want %q", got, msg, tc.want)
			}
			for _, h := range tc.mentions {
				if !strings.Contains(msg, h) {
					t.Errorf("message %q does not name host %q", msg, h)
				}
			}
			for _, h := range tc.notMentions {
				if strings.Contains(msg, "host(s) "+h) {
					t.Errorf("message %q names host %q", msg, h)
				}
			}
		})
	}
}

func TestListHostsStopsAtFive(t *testing.T) {
	got := listHosts([]string{"h1", "h2", "h3", "h4", "h5", "h6", "h7"})
	if want := "h1, h2, h3, h4, h5 and 2 more"; got != want {
		t.Fatalf("listHosts = %q, want %q", got, want)
	}
}

func TestSettlePages(t *testing.T) {
	for _, tc := range []struct {
		ours, recorded string
		want           PagesSettle
	}{
		{ConditionPagesWritten, ConditionWritingPages, RecordPages},
		{ConditionPagesNotWritten, ConditionWritingPages, RecordPages},
		{ConditionPagesWritten, "", KeepRecorded},
		// A takeover reported them not written first: ours go.
		{ConditionPagesWritten, ConditionPagesNotWritten, DropPages},
		// Ours removed its pages already, as the recorded report says.
		{ConditionPagesNotWritten, ConditionPagesNotWritten, KeepRecorded},
		{ConditionPagesNotWritten, ConditionPagesWritten, KeepRecorded},
		{ConditionPagesWritten, ConditionPagesWritten, KeepRecorded},
	} {
		if got := SettlePages(tc.ours, tc.recorded); got != tc.want {
			t.Errorf("SettlePages(%q, %q) = %d, want %d", tc.ours, tc.recorded, got, tc.want)
		}
	}
}
