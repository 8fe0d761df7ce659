package claim

import (
	"github.com/giteatools/fleet-controller/internal/fleet"

	"testing"
	"time"
)

// claimBase returns a validated PR claim whose claim input, unmodified,
// clears all five clauses.
func claimBase(t *testing.T) (ValidateInput, Validation, ClaimInput) {
	t.Helper()
	vin := prIn()
	vin.State.Dependencies = []DependencyEdge{{Repository: fxRepo, Number: 3, State: StateClosed}}
	v := mustValidate(t, vin)
	return vin, v, fxClaimInput(vin, v)
}

func assertLoss(t *testing.T, r Result, in ClaimInput, predicate string, class Class) {
	t.Helper()
	if r.Outcome != OutcomeNotAcquired || r.FailedPredicate != predicate || r.Class != class {
		t.Fatalf("got %s %s %s, want not_acquired %s %s", r.Outcome, r.Class, r.FailedPredicate, class, predicate)
	}
	assertTypedLoss(t, r, in.Spec)
}

// assertTypedLoss is clause (e): a loss is typed, final, names only the
// requested target, flags contention as normal and requires fresh inspection.
func assertTypedLoss(t *testing.T, r Result, requested Target) {
	t.Helper()
	rule, ok := ruleByPredicate(r.FailedPredicate)
	switch {
	case !ok || rule.ID != r.RuleID || rule.Message != r.Message || rule.Class != r.Class || rule.Blocker != r.Blocker:
		t.Fatalf("loss does not come from its rule: %+v", r)
	case r.RetryPermitted:
		t.Fatal("loss permits retry")
	case !r.ReassessFromFreshState:
		t.Fatal("loss does not require fresh inspection")
	case r.ContentionIsNormal != (r.Class == ClassContention):
		t.Fatalf("contention flag %v for class %s", r.ContentionIsNormal, r.Class)
	case r.Target != requested:
		t.Fatalf("loss names %+v, requested %+v", r.Target, requested)
	case r.RuleSetDigest != RuleSetDigest():
		t.Fatal("loss lacks the rule set digest")
	}
}

func TestDecideClaimBaseline(t *testing.T) {
	_, v, in := claimBase(t)
	acq, r := DecideClaim(in)
	if r.Outcome != OutcomeValidated || r.Refused() {
		t.Fatalf("baseline refused: %+v", r)
	}
	if acq.Validation.Pin != v.Pin || acq.ExpectedGeneration != "200" || acq.AlreadyHeld {
		t.Fatalf("acquisition %+v", acq)
	}
}

// Clause (a): no claim proceeds without the issued pin.
func TestClausePinRequired(t *testing.T) {
	_, v, base := claimBase(t)
	tampered := v
	tampered.ParityRevision = "abc1234" // components changed, pin kept
	tests := []struct {
		name  string
		mut   func(*ClaimInput)
		pred  string
		class Class
	}{
		{"no pin", func(in *ClaimInput) { in.PinnedValue = "" }, "pin_missing", ClassPolicy},
		{"blank pin", func(in *ClaimInput) { in.PinnedValue = "  " }, "pin_missing", ClassPolicy},
		{"other pin", func(in *ClaimInput) { in.PinnedValue = "sha256:" + fxHead + fxHead[:24] }, "pin_mismatch", ClassStaleState},
		{"no validation issued", func(in *ClaimInput) { in.Validated = Validation{} }, "pin_mismatch", ClassStaleState},
		{"issued components tampered", func(in *ClaimInput) { in.Validated = tampered }, "pin_mismatch", ClassStaleState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			tt.mut(&in)
			if id := clausePinRequired(in.PinnedValue, in.Validated); id == "" {
				t.Fatal("clause (a) passed")
			}
			_, r := DecideClaim(in)
			assertLoss(t, r, in, tt.pred, tt.class)
		})
	}
	if id := clausePinRequired(base.PinnedValue, base.Validated); id != "" {
		t.Fatalf("clause (a) refused the issued pin: %s", id)
	}
}

// Clause (d) and the time-of-check/time-of-use attempt: after validating one
// target, the claim names another (kind, number, repository or head changed)
// while presenting the first target's pin, and the fresh state read is that
// of the substituted target, so everything else looks consistent.
func TestClauseNoSubstitution(t *testing.T) {
	vin, v, base := claimBase(t)
	tests := []struct {
		name string
		sub  func(*Target)
	}{
		{"kind", func(tg *Target) { tg.Kind, tg.HeadSHA = KindIssue, "" }},
		{"number", func(tg *Target) { tg.Number = 7777 }},
		{"repository", func(tg *Target) { tg.Repository = "fleet/ops" }},
		{"head", func(tg *Target) { tg.HeadSHA = fxOtherHead }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			tt.sub(&in.Spec)
			in.Fresh = vin.State
			in.Fresh.Target = in.Spec
			if id := clauseNoSubstitution(in.Spec, v); id != ruleTargetSubstituted {
				t.Fatalf("clause (d) = %q", id)
			}
			acq, r := DecideClaim(in)
			assertLoss(t, r, in, "target_substituted", ClassStaleState)
			if r.Blocker != BlockerStale || acq.Validation.Pin != "" {
				t.Fatalf("substitution not blocked: %+v %+v", r, acq)
			}
		})
	}
	if id := clauseNoSubstitution(base.Spec, v); id != "" {
		t.Fatalf("identical target refused: %s", id)
	}
	// Same item written in another case is not a substitution.
	same := base.Spec
	same.Repository, same.HeadSHA = "Fleet/App", "C0FFEE0C0FFEE0C0FFEE0C0FFEE0C0FFEE0C0FFE"
	if id := clauseNoSubstitution(same, v); id != "" {
		t.Fatalf("case-only difference refused: %s", id)
	}
}

// Clause (b): every pinned component is re-read at claim time and a move
// names the component.
func TestClauseRevalidate(t *testing.T) {
	_, v, base := claimBase(t)
	otherDigest := v
	otherDigest.RuleSetDigest = "sha256:" + fxParity + fxParity[:24]
	otherDigest.Pin = ComputePin(otherDigest.PinComponents)
	tests := []struct {
		name  string
		mut   func(*ClaimInput)
		pred  string
		class Class
	}{
		{"rule set changed", func(in *ClaimInput) { in.Validated, in.PinnedValue = otherDigest, otherDigest.Pin }, "rule_set_changed", ClassStaleState},
		{"worker changed", func(in *ClaimInput) { in.Worker.Name = "w2" }, "worker_changed", ClassStaleState},
		{"identity changed", func(in *ClaimInput) { in.Worker.Identity = "dave" }, "identity_changed", ClassStaleState},
		{"binding changed", func(in *ClaimInput) { in.Worker.Repository = "fleet/ops" }, "repository_binding_changed", ClassStaleState},
		{"binding now resolves to a GiteaRepository", func(in *ClaimInput) { in.Where = RepositoryKey{Server: "gitea-b", ID: 7} },
			"repository_binding_changed", ClassStaleState},
		{"verdict changed", func(in *ClaimInput) { in.CapabilityVerdict = "denied" }, "capability_verdict_changed", ClassStaleState},
		{"head moved", func(in *ClaimInput) { in.Fresh.Target.HeadSHA = fxOtherHead }, "head_sha_moved", ClassStaleState},
		{"parity moved", func(in *ClaimInput) { in.Fresh.ParityRevision = "abc1234" }, "parity_revision_moved", ClassStaleState},
		{"dependency reopened", func(in *ClaimInput) {
			in.Fresh.Dependencies = []DependencyEdge{{Repository: fxRepo, Number: 3, State: StateOpen}}
		}, "dependency_state_moved", ClassStaleState},
		{"dependency added", func(in *ClaimInput) {
			in.Fresh.Dependencies = append(in.Fresh.Dependencies, DependencyEdge{Repository: fxRepo, Number: 4, State: StateClosed})
		}, "dependency_state_moved", ClassStaleState},
		{"dependency removed", func(in *ClaimInput) { in.Fresh.Dependencies = nil }, "dependency_state_moved", ClassStaleState},
		{"role moved", func(in *ClaimInput) { in.Fresh.Reviewed = true }, "role_moved", ClassStaleState},
		{"state read of another item", func(in *ClaimInput) { in.Fresh.Target.Number = 58 }, "target_state_mismatch", ClassStaleState},
		{"target closed meanwhile", func(in *ClaimInput) { in.Fresh.State = StateClosed }, "target_terminal", ClassEligibility},
		{"worker retired meanwhile", func(in *ClaimInput) { in.Worker.Phase = fleet.Retired }, "worker_retired", ClassAuthority},
		{"worker went stale meanwhile", func(in *ClaimInput) { in.Worker.OwnershipState = fleet.Stale }, "worker_not_live", ClassAuthority},
		{"blocked meanwhile", func(in *ClaimInput) { in.Fresh.Labels = []string{LabelBlocked} }, "target_blocked", ClassEligibility},
		{"claimed by another meanwhile", func(in *ClaimInput) { in.Fresh.ClaimRecord = foreignRecord() }, "claim_record_foreign", ClassContention},
		{"assigned meanwhile", func(in *ClaimInput) { in.Fresh.Assignees = []string{"rivalperson"} }, "assignee_foreign", ClassContention},
		{"worker pushed meanwhile", func(in *ClaimInput) { in.Fresh.Pushers = append(in.Fresh.Pushers, "carol") }, "pusher_independence", ClassAuthority},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			in.Fresh.Dependencies = append([]DependencyEdge(nil), base.Fresh.Dependencies...)
			in.Fresh.Pushers = append([]string(nil), base.Fresh.Pushers...)
			tt.mut(&in)
			if _, id := clauseRevalidate(in); id == "" {
				t.Fatal("clause (b) passed")
			}
			_, r := DecideClaim(in)
			assertLoss(t, r, in, tt.pred, tt.class)
		})
	}
	if _, id := clauseRevalidate(base); id != "" {
		t.Fatalf("clause (b) refused unchanged state: %s", id)
	}
}

// Clause (c) and "a generation advanced between pin and claim": the Lease
// moved although nothing else did; the claim loses deterministically.
func TestClauseCompareAndSwap(t *testing.T) {
	_, _, base := claimBase(t)
	tests := []struct {
		name string
		gen  string
	}{
		{"advanced", "201"},
		{"recreated", "17"},
		{"deleted", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			in.Fresh.LeaseGeneration = tt.gen
			if _, _, id := clauseCompareAndSwap(in); id != ruleClaimGenerationAdvanced {
				t.Fatalf("clause (c) = %q", id)
			}
			for range 3 { // deterministic: the same answer every time
				_, r := DecideClaim(in)
				assertLoss(t, r, in, "claim_generation_advanced", ClassContention)
				if !r.ContentionIsNormal || r.Blocker != BlockerForeignClaimed {
					t.Fatalf("%+v", r)
				}
			}
		})
	}
	t.Run("lease absent at validation must still be absent", func(t *testing.T) {
		vin := prIn()
		vin.State.LeaseGeneration = ""
		v := mustValidate(t, vin)
		in := fxClaimInput(vin, v)
		acq, r := DecideClaim(in)
		if r.Outcome != OutcomeValidated || acq.ExpectedGeneration != "" {
			t.Fatalf("%+v %+v", acq, r)
		}
		in.Fresh.LeaseGeneration = "1"
		_, r = DecideClaim(in)
		assertLoss(t, r, in, "claim_generation_advanced", ClassContention)
	})
	t.Run("already held by this claim", func(t *testing.T) {
		in := base
		in.Fresh.LeaseGeneration, in.Fresh.LeaseHolder = "201", in.ClaimID
		in.Fresh.ClaimRecord = &Record{ClaimID: in.ClaimID, Worker: in.Worker.Name, Identity: in.Worker.Identity,
			ExpiresAt: in.Now.Add(time.Hour), State: RecordStateActive}
		acq, r := DecideClaim(in)
		if r.Outcome != OutcomeValidated || !acq.AlreadyHeld || acq.ExpectedGeneration != "201" {
			t.Fatalf("%+v %+v", acq, r)
		}
	})
}

// Clause (e): every refusal DecideClaim can produce is typed and final.
func TestClauseTypedContention(t *testing.T) {
	_, _, base := claimBase(t)
	muts := []func(*ClaimInput){
		func(in *ClaimInput) { in.PinnedValue = "" },
		func(in *ClaimInput) { in.Spec.Number = 7777 },
		func(in *ClaimInput) { in.Fresh.ParityRevision = "abc1234" },
		func(in *ClaimInput) { in.Fresh.LeaseGeneration = "999" },
		func(in *ClaimInput) { in.Fresh.LeaseHolder = "rival-claim-9191" },
		func(in *ClaimInput) { in.Fresh.State = StateClosed },
	}
	for i, mut := range muts {
		in := base
		mut(&in)
		_, r := DecideClaim(in)
		if !r.Refused() {
			t.Fatalf("case %d not refused", i)
		}
		assertTypedLoss(t, r, in.Spec)
	}
}

func TestContentionLoss(t *testing.T) {
	tg := fxPR()
	tests := []struct {
		predicate string
		want      string
	}{
		{PredicateLeaseCASConflict, "lease_cas_conflict"},
		{PredicateContentVersionConflict, "content_version_conflict"},
		{PredicateClaimCASConflict, "claim_cas_conflict"},
		{PredicateClaimGenerationAdvanced, "claim_generation_advanced"},
		{PredicateClaimRecordNotOurs, "claim_record_not_ours"},
		{PredicateLeaseNotHeld, "lease_not_held"},
		{"", "claim_cas_conflict"},
		{"pin_missing", "claim_cas_conflict"},
		{"try fleet/app#99 instead", "claim_cas_conflict"},
	}
	for _, tt := range tests {
		r := ContentionLoss(tt.predicate, tg)
		if r.FailedPredicate != tt.want || r.Class != ClassContention || r.Outcome != OutcomeNotAcquired {
			t.Errorf("ContentionLoss(%q) = %+v", tt.predicate, r)
		}
		assertTypedLoss(t, r, tg)
	}
}

// A publication that failed without another claim winning is not contention: the result
// says nothing was published, forbids retry and names only the requested target.
func TestPublicationFailedIsNotContention(t *testing.T) {
	r := PublicationFailed(fxIssue())
	if r.Outcome != OutcomeNotAcquired || r.Class != ClassStaleState || r.Blocker != BlockerStale ||
		r.FailedPredicate != "claim_not_published" || r.ContentionIsNormal || !r.ReassessFromFreshState || r.RetryPermitted {
		t.Fatalf("PublicationFailed = %+v", r)
	}
	if r.Target != fxIssue() || r.RuleSetDigest != RuleSetDigest() {
		t.Fatalf("PublicationFailed names %+v under %s", r.Target, r.RuleSetDigest)
	}
}

func TestRuleSetUnpublishedIsAFinalPolicyRefusal(t *testing.T) {
	r := RuleSetUnpublished(fxIssue())
	if r.Class != ClassPolicy || r.Blocker != BlockerNone || r.FailedPredicate != "rule_set_unpublished" ||
		r.Outcome != OutcomeNotAcquired || r.RetryPermitted || !r.ReassessFromFreshState || r.ContentionIsNormal {
		t.Fatalf("RuleSetUnpublished = %+v", r)
	}
	if r.Target != fxIssue() || r.RuleSetDigest != RuleSetDigest() {
		t.Fatalf("RuleSetUnpublished names %+v under %s", r.Target, r.RuleSetDigest)
	}
}

// LockPlan, made from the Lease alone, is the swap DecideClaim's Acquisition asks for on
// the same Lease whenever the full decision lets the claim through.
func TestLockPlanIsDecideClaimsSwap(t *testing.T) {
	_, _, base := claimBase(t)
	tests := []struct {
		name     string
		mut      func(*ClaimInput)
		expected string
		held     bool
	}{
		{"pinned generation", func(*ClaimInput) {}, base.Validated.ClaimGeneration, false},
		{"already held by this claim", func(in *ClaimInput) { in.Fresh.LeaseGeneration, in.Fresh.LeaseHolder = "201", in.ClaimID }, "201", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			tt.mut(&in)
			if _, lost := PrecheckClaim(in); lost {
				t.Fatal("the precheck refuses the fixture")
			}
			plan := LockPlan(in)
			if plan.ExpectedGeneration != tt.expected || plan.AlreadyHeld != tt.held {
				t.Fatalf("LockPlan = %+v, want generation %q held %t", plan, tt.expected, tt.held)
			}
			acq, res := DecideClaim(in)
			if res.Refused() {
				t.Fatalf("DecideClaim refused %+v", res)
			}
			if acq.ExpectedGeneration != plan.ExpectedGeneration || acq.AlreadyHeld != plan.AlreadyHeld {
				t.Fatalf("DecideClaim swaps %q held %t, LockPlan %q held %t", acq.ExpectedGeneration, acq.AlreadyHeld,
					plan.ExpectedGeneration, plan.AlreadyHeld)
			}
		})
	}
}

// PrecheckClaim refuses from the Lease alone what DecideClaim would refuse for the same
// clause, and lets everything else through to DecideClaim.
func TestPrecheckClaim(t *testing.T) {
	_, _, base := claimBase(t)
	leaseOnly := func(in ClaimInput) ClaimInput {
		// Only the claim object and the Lease are known before Gitea is read.
		return ClaimInput{PinnedValue: in.PinnedValue, Validated: in.Validated, Spec: in.Spec, ClaimID: in.ClaimID, Now: in.Now,
			Fresh: TargetState{LeaseGeneration: in.Fresh.LeaseGeneration, LeaseHolder: in.Fresh.LeaseHolder,
				LeaseExpiresAt: in.Fresh.LeaseExpiresAt}}
	}
	tests := []struct {
		name  string
		mut   func(*ClaimInput)
		pred  string // "" = let through
		class Class
	}{
		{"baseline", func(*ClaimInput) {}, "", ""},
		{"held by this claim after an advance", func(in *ClaimInput) {
			in.Fresh.LeaseGeneration, in.Fresh.LeaseHolder = "201", in.ClaimID
		}, "", ""},
		{"held by another claim", func(in *ClaimInput) {
			in.Fresh.LeaseGeneration, in.Fresh.LeaseHolder = "201", "other-claim"
		}, "lease_held_foreign", ClassContention},
		{"held by another claim until later", func(in *ClaimInput) {
			in.Fresh.LeaseGeneration, in.Fresh.LeaseHolder, in.Fresh.LeaseExpiresAt = "201", "other-claim", in.Now.Add(time.Hour)
		}, "lease_held_foreign", ClassContention},
		{"held by another claim that lapsed", func(in *ClaimInput) {
			in.Fresh.LeaseGeneration, in.Fresh.LeaseHolder, in.Fresh.LeaseExpiresAt = "201", "other-claim", in.Now.Add(-time.Second)
		}, "claim_generation_advanced", ClassContention},
		{"lock freed again after another claim", func(in *ClaimInput) { in.Fresh.LeaseGeneration = "202" },
			"claim_generation_advanced", ClassContention},
		{"lock deleted", func(in *ClaimInput) { in.Fresh.LeaseGeneration = "" }, "claim_generation_advanced", ClassContention},
		{"no pin", func(in *ClaimInput) { in.PinnedValue = "" }, "pin_missing", ClassPolicy},
		{"other pin", func(in *ClaimInput) { in.PinnedValue = "sha256:" + fxHead + fxHead[:24] }, "pin_mismatch", ClassStaleState},
		{"substituted target", func(in *ClaimInput) { in.Spec.Number++ }, "target_substituted", ClassStaleState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			tt.mut(&in)
			r, lost := PrecheckClaim(leaseOnly(in))
			if tt.pred == "" {
				if lost {
					t.Fatalf("refused %+v, want it let through", r)
				}
				return
			}
			if !lost {
				t.Fatalf("let through, want %s", tt.pred)
			}
			assertLoss(t, r, in, tt.pred, tt.class)
			// The full decision on the same claim refuses it for the same reason.
			if _, full := DecideClaim(in); full.FailedPredicate != r.FailedPredicate {
				t.Fatalf("DecideClaim refuses with %s, the precheck with %s", full.FailedPredicate, r.FailedPredicate)
			}
		})
	}
}
