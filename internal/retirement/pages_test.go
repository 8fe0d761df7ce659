package retirement

import (
	"fmt"
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
