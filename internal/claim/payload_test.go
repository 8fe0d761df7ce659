package claim

import (
	"github.com/giteatools/fleet-controller/internal/fleet"

	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestResultShapeHoldsOneTarget: a Result has exactly one Target-typed field
// and nothing else that could carry another task (no slices, maps, pointers
// or nested structs).
func TestResultShapeHoldsOneTarget(t *testing.T) {
	rt := reflect.TypeOf(Result{})
	targets := 0
	for i := range rt.NumField() {
		f := rt.Field(i)
		switch {
		case f.Type == reflect.TypeOf(Target{}):
			targets++
		case f.Type.Kind() == reflect.String, f.Type.Kind() == reflect.Bool:
		default:
			t.Errorf("Result.%s has kind %s and could carry another task", f.Name, f.Type.Kind())
		}
	}
	if targets != 1 {
		t.Fatalf("Result has %d target fields, want 1", targets)
	}
}

// noisyState returns st enriched with references to other tasks, workers and
// repositories, none of which may surface in a refusal.
func noisyState(st TargetState) TargetState {
	st.Dependencies = append(st.Dependencies,
		DependencyEdge{Repository: "other/lib", Number: 4242, State: StateClosed},
		DependencyEdge{Repository: "fleet/app", Number: 5151, State: StateClosed})
	st.Labels = append(st.Labels, "see-6161")
	return st
}

var forbiddenInRefusals = []string{"other/lib", "4242", "5151", "6161", "7777", "rival", "9191", "fleet/ops", "w2", "dave", "erin"}

// assertNamesOnlyRequested marshals r and checks it mentions no forbidden
// token and that its only target is the requested one.
func assertNamesOnlyRequested(t *testing.T, label string, r Result, requested Target, alsoForbidden ...string) {
	t.Helper()
	if !r.Refused() {
		t.Fatalf("%s: not a refusal: %+v", label, r)
	}
	if r.Target != requested {
		t.Fatalf("%s: names target %+v, requested %+v", label, r.Target, requested)
	}
	if r.RuleSetDigest != RuleSetDigest() {
		t.Fatalf("%s: digest %q", label, r.RuleSetDigest)
	}
	r.RuleSetDigest = "" // hex could contain any digit run by chance
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, tok := range append(forbiddenInRefusals, alsoForbidden...) {
		if strings.Contains(text, tok) {
			t.Errorf("%s: refusal mentions %q: %s", label, tok, text)
		}
	}
	// Decoded generically, the only object inside the payload is the target.
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	for k, val := range generic {
		if _, nested := val.(map[string]any); nested && k != "target" {
			t.Errorf("%s: nested object %q in refusal", label, k)
		}
		if _, list := val.([]any); list {
			t.Errorf("%s: list %q in refusal", label, k)
		}
	}
}

// TestNoRefusalNamesAnotherTarget walks every refusal path (each validation
// rule, each claim clause, each activation refusal, each contention loss)
// with a state full of references to other tasks, and checks the refusal
// names only the requested target.
func TestNoRefusalNamesAnotherTarget(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range validateCases() {
		in := tc.base()
		in.State = noisyState(in.State)
		tc.mut(&in)
		_, r := Validate(in)
		if r.FailedPredicate != tc.predicate {
			t.Fatalf("%s: noise changed the refusal to %s", tc.name, r.FailedPredicate)
		}
		// The requested target of these cases is the issue or the PR fixture, so
		// any other number (e.g. a mismatching state's) is forbidden too.
		assertNamesOnlyRequested(t, "validate/"+tc.name, r, in.Requested, "43", "58")
		seen[r.FailedPredicate] = true
	}

	vin := prIn()
	vin.State = noisyState(vin.State)
	v := mustValidate(t, vin)
	base := fxClaimInput(vin, v)
	claimMuts := map[string]func(*ClaimInput){
		"pin missing":  func(in *ClaimInput) { in.PinnedValue = "" },
		"pin mismatch": func(in *ClaimInput) { in.PinnedValue = "sha256:" + strings.Repeat("0", 64) },
		"rule set changed": func(in *ClaimInput) {
			in.Validated.RuleSetDigest = "x"
			in.Validated.Pin = ComputePin(in.Validated.PinComponents)
			in.PinnedValue = in.Validated.Pin
		},
		"worker changed":   func(in *ClaimInput) { in.Worker.Name = "w2" },
		"identity changed": func(in *ClaimInput) { in.Worker.Identity = "dave" },
		"binding changed":  func(in *ClaimInput) { in.Worker.Repository = "fleet/ops" },
		"verdict changed":  func(in *ClaimInput) { in.CapabilityVerdict = "denied" },
		"head moved":       func(in *ClaimInput) { in.Fresh.Target.HeadSHA = fxOtherHead },
		"parity moved":     func(in *ClaimInput) { in.Fresh.ParityRevision = "abc1234" },
		"deps moved": func(in *ClaimInput) {
			in.Fresh.Dependencies = []DependencyEdge{{Repository: "other/lib", Number: 4242, State: StateOpen}}
		},
		"role moved":           func(in *ClaimInput) { in.Fresh.Reviewed = true },
		"generation advanced":  func(in *ClaimInput) { in.Fresh.LeaseGeneration = "7777" },
		"foreign lease":        func(in *ClaimInput) { in.Fresh.LeaseHolder = "rival-claim-9191" },
		"foreign record":       func(in *ClaimInput) { in.Fresh.ClaimRecord = foreignRecord() },
		"state of another":     func(in *ClaimInput) { in.Fresh.Target.Number = 5151 },
		"closed meanwhile":     func(in *ClaimInput) { in.Fresh.State = StateClosed },
		"substituted number":   func(in *ClaimInput) { in.Spec.Number = 5152; in.Fresh.Target.Number = 5152 },
		"substituted repo":     func(in *ClaimInput) { in.Spec.Repository = "fleet/apq"; in.Fresh.Target.Repository = "fleet/apq" },
		"substituted kind":     func(in *ClaimInput) { in.Spec.Kind, in.Spec.HeadSHA = KindIssue, "" },
		"substituted head":     func(in *ClaimInput) { in.Spec.HeadSHA = fxOtherHead },
		"pusher meanwhile":     func(in *ClaimInput) { in.Fresh.Pushers = append(in.Fresh.Pushers, "carol") },
		"assignee meanwhile":   func(in *ClaimInput) { in.Fresh.Assignees = []string{"rivalperson"} },
		"blocked meanwhile":    func(in *ClaimInput) { in.Fresh.Labels = []string{LabelBlocked} },
		"worker gone stale":    func(in *ClaimInput) { in.Worker.OwnershipState = fleet.Stale },
		"dependency reopened":  func(in *ClaimInput) { in.Fresh.Dependencies[0].State = StateOpen },
		"tampered validation":  func(in *ClaimInput) { in.Validated.Target.Number = 7777 },
		"validation not given": func(in *ClaimInput) { in.Validated = Validation{} },
	}
	for name, mut := range claimMuts {
		in := base
		in.Fresh.Dependencies = append([]DependencyEdge(nil), base.Fresh.Dependencies...)
		in.Fresh.Pushers = append([]string(nil), base.Fresh.Pushers...)
		in.Validated.DependencyStates = append([]string(nil), base.Validated.DependencyStates...)
		mut(&in)
		_, r := DecideClaim(in)
		// The validated target (number 57) is not the requested one when the
		// claim substitutes it; only the spec may appear.
		extra := []string{}
		if in.Spec.Number != fxPRNumber {
			extra = append(extra, strconv.Itoa(fxPRNumber))
		}
		assertNamesOnlyRequested(t, "claim/"+name, r, in.Spec, extra...)
		seen[r.FailedPredicate] = true
	}

	_, ain := activateBase(t)
	activateMuts := map[string]func(*ActivateInput){
		"not published":  func(in *ActivateInput) { in.Record = nil },
		"foreign record": func(in *ActivateInput) { in.Record = foreignRecord() },
		"inactive":       func(in *ActivateInput) { in.Record.State = RecordStateRevoked },
		"lease foreign":  func(in *ActivateInput) { in.LeaseHolder = "rival-claim-9191" },
		"tampered":       func(in *ActivateInput) { in.Validation.Worker = "w2" },
	}
	for name, mut := range activateMuts {
		in := ain
		rec := *ain.Record
		in.Record = &rec
		mut(&in)
		_, r := Activate(in)
		assertNamesOnlyRequested(t, "activate/"+name, r, in.Validation.Target)
		seen[r.FailedPredicate] = true
	}

	for _, p := range []string{PredicateLeaseCASConflict, PredicateContentVersionConflict, PredicateClaimCASConflict,
		PredicateClaimGenerationAdvanced, PredicateClaimRecordNotOurs, PredicateLeaseNotHeld, "rival wants other/lib#4242"} {
		r := ContentionLoss(p, fxPR())
		assertNamesOnlyRequested(t, "contention/"+p, r, fxPR())
		seen[r.FailedPredicate] = true
	}

	r := OpenClaimLimit(fxPR())
	assertNamesOnlyRequested(t, "admit/open-claim-limit", r, fxPR())
	seen[r.FailedPredicate] = true

	r = RuleSetUnpublished(fxPR())
	assertNamesOnlyRequested(t, "rules/unpublished", r, fxPR())
	seen[r.FailedPredicate] = true

	r = RepositoryNotReady(fxPR())
	assertNamesOnlyRequested(t, "repository/not-ready", r, fxPR())
	seen[r.FailedPredicate] = true

	r = RepositoryAtLimit(fxPR())
	assertNamesOnlyRequested(t, "repository/at-limit", r, fxPR())
	seen[r.FailedPredicate] = true

	_, rs := RuleSet()
	for _, rule := range rs.Rules {
		if !seen[rule.Predicate] {
			t.Errorf("rule %s (%s) was not walked", rule.ID, rule.Predicate)
		}
	}
}
