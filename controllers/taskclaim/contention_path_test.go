package taskclaim

import (
	"testing"

	"github.com/giteatools/fleet-controller/internal/claim"
)

func TestContentionPath(t *testing.T) {
	target := claim.Target{Repository: "o/r", Kind: claim.KindIssue, Number: 1}
	for _, tc := range []struct {
		name string
		res  claim.Result
		want string
	}{
		{"lease compare-and-swap lost", claim.ContentionLoss(claim.PredicateLeaseCASConflict, target), ContentionLeaseConflict},
		{"gitea 409", claim.ContentionLoss(claim.PredicateContentVersionConflict, target), ContentionGiteaConflict},
		{"publication refused as conflict", claim.PublicationRefusal(claim.PublishConflict, target), ContentionGiteaConflict},
		{"generation advanced", claim.ContentionLoss(claim.PredicateClaimGenerationAdvanced, target), ContentionLeaseHeld},
		{"read-back shows another record", claim.ContentionLoss(claim.PredicateClaimRecordNotOurs, target), ContentionReadBack},
		{"read-back shows another lease holder", claim.ContentionLoss(claim.PredicateLeaseNotHeld, target), ContentionReadBack},
		{"publication refused as foreign", claim.PublicationRefusal(claim.PublishForeign, target), ContentionReadBack},
		{"publication unavailable is no contention", claim.PublicationRefusal(claim.PublishUnavailable, target), ""},
		{"rule set unpublished is no contention", claim.RuleSetUnpublished(target), ""},
	} {
		if got := contentionPath(tc.res); got != tc.want {
			t.Errorf("%s: contentionPath(%s/%s) = %q, want %q", tc.name, tc.res.Class, tc.res.FailedPredicate, got, tc.want)
		}
	}
	for _, predicate := range []string{"claim_record_foreign", "lease_held_foreign"} {
		r, ok := ruleOf(predicate)
		if !ok || r.Class != claim.ClassContention {
			t.Fatalf("rule %s: %+v, %t; want a contention rule", predicate, r, ok)
		}
		want := map[string]string{"claim_record_foreign": ContentionRecordInForce, "lease_held_foreign": ContentionLeaseHeld}[predicate]
		if got := contentionPath(claim.Result{Class: r.Class, FailedPredicate: r.Predicate}); got != want {
			t.Errorf("contentionPath(%s) = %q, want %q", predicate, got, want)
		}
	}
}

// ruleOf finds a rule of the published rule set by predicate.
func ruleOf(predicate string) (claim.Rule, bool) {
	_, rs := claim.RuleSet()
	for _, r := range rs.Rules {
		if r.Predicate == predicate {
			return r, true
		}
	}
	return claim.Rule{}, false
}
