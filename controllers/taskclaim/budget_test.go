package taskclaim_test

import (
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/controllers/taskclaim"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

// Gitea request budgets on the happy path (validation and claim together; a release).
// They are counts of requests, not timings: exceeding one is a behaviour change.
const (
	issueClaimBudget = 8
	pullClaimBudget  = 14
	releaseBudget    = 3
)

// requestLog records every request a Gitea client sends, as "METHOD /path" with numbers
// and hex ids folded, so a failure says which requests were made.
type requestLog struct {
	base http.RoundTripper
	mu   sync.Mutex
	reqs []string
}

var idSegment = regexp.MustCompile(`/(\d+|[0-9a-f]{40})(/|$)`)

func (l *requestLog) RoundTrip(req *http.Request) (*http.Response, error) {
	p := strings.TrimPrefix(req.URL.Path, "/api/v1")
	p = idSegment.ReplaceAllString(p, "/N$2")
	l.mu.Lock()
	l.reqs = append(l.reqs, req.Method+" "+p)
	l.mu.Unlock()
	return l.base.RoundTrip(req)
}

// take returns the requests recorded since the last take and forgets them.
func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.reqs
	l.reqs = nil
	sort.Strings(out)
	return out
}

var _ = Describe("Gitea request budget", Ordered, func() {
	var (
		r                *taskclaim.Reconciler
		calls            *requestLog
		author, reviewer *worker
	)

	BeforeAll(func() {
		base := srv.HTTP.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		calls = &requestLog{base: base}
		counted, err := giteaclaim.New(srv.URL, srv.Token,
			giteaclaim.WithHTTPClient(&http.Client{Transport: calls, Timeout: srv.HTTP.Timeout}))
		Expect(err).NotTo(HaveOccurred())
		r = directReconciler(counted, k8s, clock.RealClock{})
		// Once per process, not per claim: the rule set published and read back, and the
		// repository's metadata (default branch) read into its short-lived cache.
		r.Rules = &taskclaim.RulePublisher{Files: counted, Repository: repo}
		Expect(r.Rules.Sync(ctx)).To(Succeed())
		_, err = counted.ReadTarget(ctx, apiconv.Target(issueTarget(newIssue("budget: warm-up"))))
		Expect(err).NotTo(HaveOccurred())
		author, reviewer = newWorker(nsDirect), newWorker(nsDirect)
	})

	// claimAndRelease takes t for w by hand (validate, pin, claim) and gives it back,
	// returning the Gitea requests of the claim and of the release.
	claimAndRelease := func(w *worker, t fleetv1alpha1.TaskTarget) (claimReqs, releaseReqs []string) {
		GinkgoHelper()
		calls.take()
		tc := w.claim(t)
		_, err := reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseValidated), describe(fetch(tc)))
		w.pin(tc)
		_, err = reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive), describe(fetch(tc)))
		claimReqs = calls.take()
		// The assignment rides in the record's guarded write: it is inside the budget.
		Expect(assigneesOf(t)).To(HaveLen(1), "the claimed target is assigned to its holder")
		Expect(strings.EqualFold(assigneesOf(t)[0], w.identity)).To(BeTrue(), "assigned to %v", assigneesOf(t))

		w.release(tc)
		_, err = reconcileOnce(r, tc)
		Expect(err).NotTo(HaveOccurred())
		Expect(fetch(tc).Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseReleased), describe(fetch(tc)))
		releaseReqs = calls.take()
		Expect(assigneesOf(t)).To(BeEmpty(), "the release removes the assignment in the same write")
		Expect(eventsOf(transitionsOf(tc))).To(Equal([]string{"claimed", "released"}))
		return claimReqs, releaseReqs
	}

	It("validates and claims an issue in at most 8 Gitea requests and releases it in at most 3", func() {
		claimed, released := claimAndRelease(author, issueTarget(newIssue("budget: issue")))
		evidence("budget: issue claim %d requests (budget %d): %s", len(claimed), issueClaimBudget, strings.Join(claimed, ", "))
		evidence("budget: issue release %d requests (budget %d): %s", len(released), releaseBudget, strings.Join(released, ", "))
		Expect(len(claimed)).To(BeNumerically("<=", issueClaimBudget), "issue claim requests: %v", claimed)
		Expect(len(released)).To(BeNumerically("<=", releaseBudget), "release requests: %v", released)
	})

	It("validates and claims a pull request in at most 14 Gitea requests and releases it in at most 3", func() {
		pr := newPull(author.user(), "budget: pull request")
		claimed, released := claimAndRelease(reviewer, pullTarget(pr))
		evidence("budget: pull request claim %d requests (budget %d): %s", len(claimed), pullClaimBudget, strings.Join(claimed, ", "))
		evidence("budget: pull request release %d requests (budget %d): %s", len(released), releaseBudget, strings.Join(released, ", "))
		Expect(len(claimed)).To(BeNumerically("<=", pullClaimBudget), "pull request claim requests: %v", claimed)
		Expect(len(released)).To(BeNumerically("<=", releaseBudget), "release requests: %v", released)
	})
})
