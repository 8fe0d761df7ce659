package retirement

import "fmt"

// Page limits: a RetirementPlanPage holds at most PageMaxRows rows and about
// PageMaxBytes of them, well under etcd's 1.5 MiB object limit whatever a row's detail
// and evidence weigh (a row's detail is at most 1 KiB; its evidence is a few short
// observations).
const (
	PageMaxRows  = 500
	PageMaxBytes = 512 << 10
)

// Paginate splits a sorted list of verdicts into pages of at most maxRows rows and about
// maxBytes each (a row larger than maxBytes gets a page of its own). Order is kept, so
// the pages read in sequence are the list. An empty list has no pages.
func Paginate(rows []Assessment, maxRows, maxBytes int) [][]Assessment {
	var pages [][]Assessment
	start, size := 0, 0
	for i, a := range rows {
		n := AssessmentSize(a)
		if i > start && (i-start == maxRows || size+n > maxBytes) {
			pages = append(pages, rows[start:i:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(rows) {
		pages = append(pages, rows[start:len(rows):len(rows)])
	}
	return pages
}

// AssessmentSize estimates the bytes a verdict takes in a page's JSON: its strings plus
// the keys and punctuation around them.
func AssessmentSize(a Assessment) int {
	n := 64 + len(a.WorkerIdentity) + len(a.ReasonCode) + len(a.Detail)
	for k, v := range a.Evidence {
		n += 6 + len(k) + len(v)
	}
	return n
}

// CompactPage factors out of one page's rows what every one of them shares: the reason
// code and the detail when all rows have the same, and each evidence entry (key and
// value) that every row carries. The rows keep only what is their own. ExpandPage undoes
// it exactly, so a page stores every row's full verdict in far fewer bytes: the rows of a
// host plan share the host's observations, and candidates share their reason and detail.
// A page of one row keeps the row whole.
func CompactPage(rows []Assessment) (shared Assessment, own []Assessment) {
	if len(rows) < 2 {
		return Assessment{}, rows
	}
	first := rows[0]
	shared.ReasonCode, shared.Detail = first.ReasonCode, first.Detail
	common := map[string]string{}
	for k, v := range first.Evidence {
		common[k] = v
	}
	for _, a := range rows[1:] {
		if a.ReasonCode != shared.ReasonCode {
			shared.ReasonCode = ""
		}
		if a.Detail != shared.Detail {
			shared.Detail = ""
		}
		for k, v := range common {
			if w, ok := a.Evidence[k]; !ok || w != v {
				delete(common, k)
			}
		}
	}
	if len(common) > 0 {
		shared.Evidence = common
	}
	own = make([]Assessment, len(rows))
	for i, a := range rows {
		o := Assessment{WorkerIdentity: a.WorkerIdentity}
		if shared.ReasonCode == "" {
			o.ReasonCode = a.ReasonCode
		}
		if shared.Detail == "" {
			o.Detail = a.Detail
		}
		for k, v := range a.Evidence {
			if _, ok := common[k]; !ok {
				if o.Evidence == nil {
					o.Evidence = map[string]string{}
				}
				o.Evidence[k] = v
			}
		}
		own[i] = o
	}
	return shared, own
}

// ExpandPage is each row's full verdict on a page: its own fields, and what the page's
// shared block holds for a field the row leaves empty or an evidence key it does not
// carry.
func ExpandPage(shared Assessment, own []Assessment) []Assessment {
	out := make([]Assessment, len(own))
	for i, o := range own {
		a := o
		if a.ReasonCode == "" {
			a.ReasonCode = shared.ReasonCode
		}
		if a.Detail == "" {
			a.Detail = shared.Detail
		}
		if len(shared.Evidence) > 0 {
			ev := make(map[string]string, len(shared.Evidence)+len(o.Evidence))
			for k, v := range shared.Evidence {
				ev[k] = v
			}
			for k, v := range o.Evidence {
				ev[k] = v
			}
			a.Evidence = ev
		}
		out[i] = a
	}
	return out
}

// Reasons of a plan's PagesReady condition. A plan is planned, with its counts and the
// first rows of each list in status, before its pages are written: the pages follow, and
// PagesReady says when they hold every row.
const (
	// ConditionPagesWritten: every page is written; status.pages lists them (True).
	ConditionPagesWritten = "PagesWritten"
	// ConditionWritingPages: the plan is planned and its pages are being written (False).
	ConditionWritingPages = "WritingPages"
	// ConditionPagesNotWritten: the pages could not be written, or the agent that
	// planned stopped before it wrote them (False, final). The plan's counts, fingerprints
	// and status lists are unaffected; only the full per-row listing is missing.
	ConditionPagesNotWritten = "PagesNotWritten"
)

// PagesSettle is what an agent does with the pages it wrote or gave up (ours, a PagesReady
// reason) when it finds the plan's PagesReady already at recorded.
type PagesSettle int

const (
	// RecordPages: nothing is recorded yet (the plan still reads WritingPages): write ours.
	RecordPages PagesSettle = iota
	// KeepRecorded: the recorded report stands, and what ours left in place agrees with it.
	KeepRecorded
	// DropPages: an agent that took over reported the pages as not written while ours
	// were written: that report stands, and the pages just written are removed, since
	// a plan reported as not paged keeps no pages.
	DropPages
)

// SettlePages decides between recording ours and keeping the recorded report. Only one
// report is ever recorded: the first. A plan with no PagesReady at all is not being paged
// (not planned by this round), and nothing is recorded on it. A plan whose pages are reported as not written keeps
// none, so pages written after such a report go.
func SettlePages(ours, recorded string) PagesSettle {
	switch {
	case recorded == ConditionWritingPages:
		return RecordPages
	case recorded == ConditionPagesNotWritten && ours == ConditionPagesWritten:
		return DropPages
	default:
		return KeepRecorded
	}
}

// HostPages is what a fleet plan knows of one host plan's pages.
type HostPages struct {
	HostID string
	// State is the host plan's PagesReady reason; empty when it has none yet.
	State string
	// AgentLost says the host's agent went away: pages it had not written yet never come.
	AgentLost bool
}

// FleetPages is the fleet plan's PagesReady: written once every host plan's pages are,
// not written (final) as soon as one host plan's never will be, and writing otherwise.
// The message names the hosts that hold it back.
func FleetPages(hosts []HostPages) (reason, message string) {
	var missing, writing []string
	for _, h := range hosts {
		switch {
		case h.State == ConditionPagesWritten:
		case h.State == ConditionPagesNotWritten || h.AgentLost:
			missing = append(missing, h.HostID)
		default:
			writing = append(writing, h.HostID)
		}
	}
	switch {
	case len(missing) > 0:
		return ConditionPagesNotWritten, "No pages hold the rows of host(s) " + listHosts(missing) +
			"; their host plans' status keeps the counts and the first rows of each list"
	case len(writing) > 0:
		return ConditionWritingPages, "Waiting for the pages of host(s) " + listHosts(writing)
	}
	return ConditionPagesWritten, "Every row of the plan is in the pages status.pages.selector lists"
}

// listHosts names up to five hosts, then how many more.
func listHosts(hosts []string) string {
	const shown = 5
	out := ""
	for i, h := range hosts {
		if i == shown {
			return out + fmt.Sprintf(" and %d more", len(hosts)-shown)
		}
		if i > 0 {
			out += ", "
		}
		out += h
	}
	return out
}
