package taskclaim

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// DefaultConcurrency is how many TaskClaims the manager reconciles at once unless told
// otherwise (cmd's --taskclaim-concurrency). A claim reconcile spends almost all its time
// waiting for Gitea and the API server, so claims made at the same moment should overlap
// that waiting, but not so many that one Gitea server drowns: in test/bench, 64
// simultaneous claims on distinct targets finished in 21.6 s at 4, 17.6 s at 16 and
// 34.6 s at 64 (docs/taskclaim.md). Exclusivity never rests on this number (the
// per-target Lease compare-and-swap admits one claim).
const DefaultConcurrency = 16

// Contention paths: where a claim that lost to another one found out. They are the
// values of the path label of fleet_taskclaim_contention_total.
const (
	// ContentionRecordInForce: the claim's own re-read showed another claim's record in
	// force in Gitea.
	ContentionRecordInForce = "record_in_force"
	// ContentionLeaseHeld: the claim's own re-read showed the lock held by another
	// claim, or advanced past the pinned generation.
	ContentionLeaseHeld = "lease_held"
	// ContentionLeaseConflict: the compare-and-swap on the lock Lease lost (the API
	// server refused the create or the guarded update).
	ContentionLeaseConflict = "lease_conflict"
	// ContentionGiteaConflict: the guarded write of the Gitea record lost (Gitea
	// answered 409 to the content_version).
	ContentionGiteaConflict = "gitea_conflict"
	// ContentionReadBack: the publication or its read-back showed another holder (a
	// foreign record or assignee) or a lock no longer this claim's.
	ContentionReadBack = "read_back"
)

// ContentionMetric is the name of the contention counter in the controller-runtime
// metrics registry.
const ContentionMetric = "fleet_taskclaim_contention_total"

var contentionLosses = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: ContentionMetric,
	Help: "TaskClaim contention losses, by the path on which the claim found out it lost " +
		"(record_in_force, lease_held, lease_conflict, gitea_conflict, read_back).",
}, []string{"path"})

func init() {
	metrics.Registry.MustRegister(contentionLosses)
	for _, p := range []string{ContentionRecordInForce, ContentionLeaseHeld, ContentionLeaseConflict,
		ContentionGiteaConflict, ContentionReadBack} {
		contentionLosses.WithLabelValues(p) // every path is exported, at zero until it happens
	}
}

// contentionPath is the path a refusal of the claim step lost on ("" when it is not a
// contention loss).
func contentionPath(res claim.Result) string {
	if res.Class != claim.ClassContention {
		return ""
	}
	switch res.FailedPredicate {
	case "claim_record_foreign":
		return ContentionRecordInForce
	case "lease_held_foreign", claim.PredicateClaimGenerationAdvanced:
		return ContentionLeaseHeld
	case claim.PredicateLeaseCASConflict:
		return ContentionLeaseConflict
	case claim.PredicateContentVersionConflict:
		return ContentionGiteaConflict
	}
	return ContentionReadBack
}

// countContention counts a refusal of the claim step by its contention path.
func countContention(res claim.Result) {
	if p := contentionPath(res); p != "" {
		contentionLosses.WithLabelValues(p).Inc()
	}
}
