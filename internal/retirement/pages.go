package retirement

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
