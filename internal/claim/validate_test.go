package claim

import (
	"github.com/giteatools/fleet-controller/internal/fleet"

	"reflect"
	"slices"
	"testing"
	"time"
)

// validateCase is one refusal path of Validate.
type validateCase struct {
	name      string
	base      func() ValidateInput
	mut       func(*ValidateInput)
	predicate string
	class     Class
	blocker   Blocker
}

func issueIn() ValidateInput {
	return fxValidateInput(fxWorker("w1", "carol"), fxIssue(), fxIssueState())
}
func prIn() ValidateInput { return fxValidateInput(fxWorker("w1", "carol"), fxPR(), fxPRState()) }

func foreignRecord() *Record {
	return &Record{ClaimID: "rival-claim-9191", Worker: "rival-worker", Identity: "rivalperson",
		ExpiresAt: fxNow.Add(time.Hour), State: RecordStateActive}
}

func validateCases() []validateCase {
	A, P, S, E, C := ClassAuthority, ClassPolicy, ClassStaleState, ClassEligibility, ClassContention
	return []validateCase{
		{"no worker name", issueIn, func(in *ValidateInput) { in.Worker.Name = "" }, "worker_not_registered", A, BlockerNone},
		{"no worker identity", issueIn, func(in *ValidateInput) { in.Worker.Identity = " " }, "worker_not_registered", A, BlockerNone},
		{"retired worker", issueIn, func(in *ValidateInput) { in.Worker.Phase = fleet.Retired }, "worker_retired", A, BlockerNone},
		{"phase unset", issueIn, func(in *ValidateInput) { in.Worker.Phase = "" }, "worker_retired", A, BlockerNone},
		{"stale worker", issueIn, func(in *ValidateInput) { in.Worker.OwnershipState = fleet.Stale }, "worker_not_live", A, BlockerNone},
		{"historical worker", issueIn, func(in *ValidateInput) { in.Worker.OwnershipState = fleet.Historical }, "worker_not_live", A, BlockerNone},
		{"verdict denied", issueIn, func(in *ValidateInput) { in.CapabilityVerdict = "denied" }, "capability_denied", A, BlockerNone},
		{"verdict missing", issueIn, func(in *ValidateInput) { in.CapabilityVerdict = "" }, "capability_denied", A, BlockerNone},
		{"repository without owner", issueIn, func(in *ValidateInput) { in.Requested.Repository = "app" }, "target_malformed", P, BlockerNone},
		{"number zero", issueIn, func(in *ValidateInput) { in.Requested.Number = 0 }, "target_malformed", P, BlockerNone},
		{"unknown kind", issueIn, func(in *ValidateInput) { in.Requested.Kind = "Epic" }, "target_malformed", P, BlockerNone},
		{"issue with head", issueIn, func(in *ValidateInput) { in.Requested.HeadSHA = fxHead }, "target_malformed", P, BlockerNone},
		{"PR without head", prIn, func(in *ValidateInput) { in.Requested.HeadSHA = "" }, "target_malformed", P, BlockerNone},
		{"PR head not hex", prIn, func(in *ValidateInput) { in.Requested.HeadSHA = "main" }, "target_malformed", P, BlockerNone},
		{"worker bound elsewhere", issueIn, func(in *ValidateInput) { in.Worker.Repository = "fleet/ops" }, "worker_repository_mismatch", P, BlockerNone},
		{"worker binding empty", issueIn, func(in *ValidateInput) { in.Worker.Repository = "" }, "worker_repository_mismatch", P, BlockerNone},
		{"controller serves elsewhere", issueIn, func(in *ValidateInput) { in.ControllerRepository = "fleet/ops" }, "controller_repository_mismatch", P, BlockerNone},
		{"controller repository unset", issueIn, func(in *ValidateInput) { in.ControllerRepository = "" }, "controller_repository_mismatch", P, BlockerNone},
		{"no item under the number", issueIn, func(in *ValidateInput) { in.State = TargetState{Missing: MissingNotFound} }, "target_not_found", E, BlockerIneligible},
		{"no pull request under the number", prIn, func(in *ValidateInput) { in.State = TargetState{Missing: MissingNotFound} }, "target_not_found", E, BlockerIneligible},
		{"an issue asked for as a pull request", prIn, func(in *ValidateInput) { in.State = TargetState{Missing: MissingOtherKind} }, "target_kind_mismatch", E, BlockerIneligible},
		{"a pull request asked for as an issue", issueIn, func(in *ValidateInput) { in.State = TargetState{Missing: MissingOtherKind} }, "target_kind_mismatch", E, BlockerIneligible},
		{"state of another number", issueIn, func(in *ValidateInput) { in.State.Target.Number = 43 }, "target_state_mismatch", S, BlockerStale},
		{"state of another kind", issueIn, func(in *ValidateInput) { in.State.Target.Kind = KindPullRequest }, "target_state_mismatch", S, BlockerStale},
		{"state of another repository", issueIn, func(in *ValidateInput) { in.State.Target.Repository = "fleet/ops" }, "target_state_mismatch", S, BlockerStale},
		{"head moved before validation", prIn, func(in *ValidateInput) { in.State.Target.HeadSHA = fxOtherHead }, "head_sha_mismatch", S, BlockerStale},
		{"closed PR at another head", prIn, func(in *ValidateInput) {
			in.State.State, in.State.Target.HeadSHA = StateClosed, fxOtherHead
		}, "head_sha_mismatch", S, BlockerStale},
		{"state unknown", issueIn, func(in *ValidateInput) { in.State.State = "" }, "target_state_incomplete", S, BlockerStale},
		{"state unrecognised", issueIn, func(in *ValidateInput) { in.State.State = "locked" }, "target_state_incomplete", S, BlockerStale},
		{"parity unknown", issueIn, func(in *ValidateInput) { in.State.ParityRevision = "" }, "target_state_incomplete", S, BlockerStale},
		{"PR head unread", prIn, func(in *ValidateInput) { in.State.Target.HeadSHA = "" }, "target_state_incomplete", S, BlockerStale},
		{"closed issue", issueIn, func(in *ValidateInput) { in.State.State = StateClosed }, "target_terminal", E, BlockerTerminal},
		{"closed PR", prIn, func(in *ValidateInput) { in.State.State = StateClosed }, "target_terminal", E, BlockerTerminal},
		{"merged PR", prIn, func(in *ValidateInput) { in.State.State, in.State.Merged = StateClosed, true }, "target_terminal", E, BlockerTerminal},
		{"open dependency", issueIn, func(in *ValidateInput) {
			in.State.Dependencies = append(in.State.Dependencies, DependencyEdge{Repository: "other/lib", Number: 4242, State: StateOpen})
		}, "dependency_open", E, BlockerDependencyGated},
		{"dependency of unknown state", issueIn, func(in *ValidateInput) {
			in.State.Dependencies = []DependencyEdge{{Repository: "other/lib", Number: 4242}}
		}, "dependency_open", E, BlockerDependencyGated},
		{"blocked label", prIn, func(in *ValidateInput) { in.State.Labels = []string{"kind/bug", "Blocked"} }, "target_blocked", E, BlockerIneligible},
		{"foreign claim record", issueIn, func(in *ValidateInput) { in.State.ClaimRecord = foreignRecord() }, "claim_record_foreign", C, BlockerForeignClaimed},
		{"foreign record of unknown state", issueIn, func(in *ValidateInput) {
			in.State.ClaimRecord = foreignRecord()
			in.State.ClaimRecord.State = "paused"
		}, "claim_record_foreign", C, BlockerForeignClaimed},
		{"foreign record without expiry", issueIn, func(in *ValidateInput) {
			in.State.ClaimRecord = foreignRecord()
			in.State.ClaimRecord.ExpiresAt = time.Time{}
		}, "claim_record_foreign", C, BlockerForeignClaimed},
		{"same worker, other claim", issueIn, func(in *ValidateInput) {
			in.State.ClaimRecord = &Record{ClaimID: "rival-claim-9191", Worker: "w1", Identity: "carol",
				ExpiresAt: fxNow.Add(time.Hour), State: RecordStateActive}
		}, "claim_record_foreign", C, BlockerForeignClaimed},
		{"foreign lease holder", prIn, func(in *ValidateInput) { in.State.LeaseHolder = "rival-claim-9191" }, "lease_held_foreign", C, BlockerForeignClaimed},
		{"foreign lease not yet lapsed", prIn, func(in *ValidateInput) {
			in.State.LeaseHolder, in.State.LeaseExpiresAt = "rival-claim-9191", fxNow.Add(time.Second)
		}, "lease_held_foreign", C, BlockerForeignClaimed},
		{"assigned to someone else", issueIn, func(in *ValidateInput) { in.State.Assignees = []string{"rivalperson"} }, "assignee_foreign", C, BlockerForeignClaimed},
		{"author reviews", prIn, func(in *ValidateInput) { in.Worker.Identity = "alice" }, "author_independence", A, BlockerIneligible},
		{"pusher reviews", prIn, func(in *ValidateInput) { in.Worker.Identity = "bob" }, "pusher_independence", A, BlockerIneligible},
		{"PR author unknown", prIn, func(in *ValidateInput) { in.State.Author = "" }, "independence_unprovable", A, BlockerIneligible},
		{"push by a deleted account", prIn, func(in *ValidateInput) { in.State.UnattributedPushes = 1 }, "independence_unprovable", A, BlockerIneligible},
		{"reviewer approves", func() ValidateInput {
			return fxValidateInput(fxWorker("w1", "carol"), fxPR(), prStateFor(RoleApprover))
		}, func(in *ValidateInput) {
			in.State.Reviews = []Review{{ID: 1, Reviewer: "carol", State: ReviewComment, CommitID: fxHead}}
		}, "role_independence", A, BlockerIneligible},
		{"approver merges", func() ValidateInput {
			return fxValidateInput(fxWorker("w1", "carol"), fxPR(), prStateFor(RoleMerger))
		}, func(in *ValidateInput) {
			in.State.Reviews = []Review{{ID: 2, Reviewer: "carol", State: ReviewApproved, CommitID: fxHead}}
		}, "role_independence", A, BlockerIneligible},
		{"worker holds another claim", issueIn, func(in *ValidateInput) { in.OtherClaims = 1 }, "worker_holds_claim", P, BlockerNone},
	}
}

func TestValidateRefusals(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range validateCases() {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.base()
			tc.mut(&in)
			v, r := Validate(in)
			covered[r.FailedPredicate] = true
			if r.Outcome != OutcomeRejected || r.FailedPredicate != tc.predicate || r.Class != tc.class || r.Blocker != tc.blocker {
				t.Fatalf("got %s %s/%s %s, want rejected %s/%s %s", r.Outcome, r.Class, r.Blocker, r.FailedPredicate, tc.class, tc.blocker, tc.predicate)
			}
			rule, ok := ruleByPredicate(tc.predicate)
			if !ok || r.RuleID != rule.ID || r.Message != rule.Message {
				t.Fatalf("result does not cite its rule: %+v vs %+v", r, rule)
			}
			if r.RetryPermitted || !r.ReassessFromFreshState || r.ContentionIsNormal != (tc.class == ClassContention) {
				t.Fatalf("refusal flags wrong: %+v", r)
			}
			if r.RuleSetDigest != RuleSetDigest() || r.Target != in.Requested {
				t.Fatalf("refusal lacks digest or names another target: %+v", r)
			}
			if v.Pin != "" || v.Role != RoleNone || v.Operations != nil {
				t.Fatalf("refusal carried a validation: %+v", v)
			}
		})
	}
	_, rs := RuleSet()
	for _, rule := range rs.Rules {
		if rule.Stage == "validate" && !covered[rule.Predicate] {
			t.Errorf("validate rule %s (%s) has no refusal case", rule.ID, rule.Predicate)
		}
	}
}

// TestValidateEveryClassAndBlocker: the five classes and the five blockers
// each occur on some refusal path of Validate, and the blockers are distinct
// for foreign-claimed, dependency-gated, terminal, ineligible and stale targets.
func TestValidateEveryClassAndBlocker(t *testing.T) {
	classes := map[Class]bool{}
	blockers := map[Blocker]string{}
	for _, tc := range validateCases() {
		in := tc.base()
		tc.mut(&in)
		_, r := Validate(in)
		classes[r.Class] = true
		if r.Blocker != BlockerNone {
			blockers[r.Blocker] = tc.name
		}
	}
	for _, c := range Classes() {
		if !classes[c] {
			t.Errorf("class %s never produced", c)
		}
	}
	for _, b := range Blockers() {
		if _, ok := blockers[b]; !ok {
			t.Errorf("blocker %s never produced", b)
		}
	}
}

// TestValidateOrder: when several rules would refuse, the earliest in the
// documented order wins, so the answer does not depend on map or list order.
func TestValidateOrder(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*ValidateInput)
		want string
	}{
		{"authority before policy", func(in *ValidateInput) {
			in.Worker.Phase = fleet.Retired
			in.ControllerRepository = "fleet/ops"
		}, "worker_retired"},
		{"policy before stale", func(in *ValidateInput) {
			in.Worker.Repository = "fleet/ops"
			in.State.Target.Number = 43
		}, "worker_repository_mismatch"},
		{"stale before terminal", func(in *ValidateInput) {
			in.State.Target.HeadSHA = fxOtherHead
			in.State.State = StateClosed
		}, "head_sha_mismatch"},
		{"terminal before dependency", func(in *ValidateInput) {
			in.State.State = StateClosed
			in.State.Dependencies = []DependencyEdge{{Repository: fxRepo, Number: 1, State: StateOpen}}
		}, "target_terminal"},
		{"dependency before foreign claim", func(in *ValidateInput) {
			in.State.Dependencies = []DependencyEdge{{Repository: fxRepo, Number: 1, State: StateOpen}}
			in.State.ClaimRecord = foreignRecord()
		}, "dependency_open"},
		{"foreign claim before independence", func(in *ValidateInput) {
			in.State.LeaseHolder = "rival-claim-9191"
			in.Worker.Identity = "alice"
		}, "lease_held_foreign"},
	}
	for _, tt := range tests {
		in := prIn()
		tt.mut(&in)
		if _, r := Validate(in); r.FailedPredicate != tt.want {
			t.Errorf("%s: refused by %q, want %q", tt.name, r.FailedPredicate, tt.want)
		}
	}
}

// TestValidateNotForeign: records and leases that are ours, ended or lapsed,
// and assignments that include the worker, do not count as foreign claims.
func TestValidateNotForeign(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*ValidateInput)
	}{
		{"own record", func(in *ValidateInput) { in.State.ClaimRecord = fxOwnRecord(*in) }},
		{"own record, identity case differs", func(in *ValidateInput) {
			in.State.ClaimRecord = fxOwnRecord(*in)
			in.State.ClaimRecord.Identity = "CAROL"
		}},
		{"released foreign record", func(in *ValidateInput) {
			in.State.ClaimRecord = foreignRecord()
			in.State.ClaimRecord.State = RecordStateReleased
		}},
		{"completed foreign record", func(in *ValidateInput) {
			in.State.ClaimRecord = foreignRecord()
			in.State.ClaimRecord.State = RecordStateCompleted
		}},
		{"revoked foreign record", func(in *ValidateInput) {
			in.State.ClaimRecord = foreignRecord()
			in.State.ClaimRecord.State = RecordStateRevoked
		}},
		{"expired foreign record", func(in *ValidateInput) {
			in.State.ClaimRecord = foreignRecord()
			in.State.ClaimRecord.ExpiresAt = fxNow
		}},
		{"own lease", func(in *ValidateInput) { in.State.LeaseHolder = fxClaimID }},
		{"lapsed foreign lease", func(in *ValidateInput) {
			in.State.LeaseHolder, in.State.LeaseExpiresAt = "rival-claim-9191", fxNow.Add(-time.Second)
		}},
		{"assigned to self", func(in *ValidateInput) { in.State.Assignees = []string{"Carol", "dave"} }},
		{"blank assignee", func(in *ValidateInput) { in.State.Assignees = []string{" "} }},
	}
	for _, tt := range tests {
		in := issueIn()
		tt.mut(&in)
		if _, r := Validate(in); r.Outcome != OutcomeValidated {
			t.Errorf("%s: refused %+v", tt.name, r)
		}
	}
}

func TestValidateSuccess(t *testing.T) {
	tests := []struct {
		name string
		in   ValidateInput
		role Role
	}{
		{"issue", issueIn(), RoleAuthor},
		{"PR reviewer", prIn(), RoleReviewer},
		{"PR approver", fxValidateInput(fxWorker("w1", "carol"), fxPR(), prStateFor(RoleApprover)), RoleApprover},
		{"PR merger", fxValidateInput(fxWorker("w1", "carol"), fxPR(), prStateFor(RoleMerger)), RoleMerger},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.State.Dependencies = []DependencyEdge{
				{Repository: "Fleet/Lib", Number: 9, State: "Closed"},
				{Repository: fxRepo, Number: 3, State: StateClosed},
				{Repository: fxRepo, Number: 3, State: StateClosed},
			}
			v, r := Validate(tt.in)
			if r.Outcome != OutcomeValidated || r.Refused() || r.Class != "" || r.FailedPredicate != "" {
				t.Fatalf("refused: %+v", r)
			}
			if r.Target != tt.in.Requested || r.RuleSetDigest != RuleSetDigest() || r.RetryPermitted {
				t.Fatalf("result: %+v", r)
			}
			want := PinComponents{
				Identity:          "carol",
				Worker:            "w1",
				CapabilityVerdict: VerdictAllowed,
				RepositoryBinding: fxRepo,
				Target:            tt.in.Requested,
				Role:              tt.role,
				ParityRevision:    fxParity,
				DependencyStates:  []string{"fleet/app#3=closed", "fleet/lib#9=closed"},
				ClaimGeneration:   tt.in.State.LeaseGeneration,
				RuleSetDigest:     RuleSetDigest(),
			}
			if tt.in.Requested.Kind == KindPullRequest {
				want.HeadSHA = fxHead
			}
			if !pinComponentsEqual(v.PinComponents, want) {
				t.Fatalf("components\n got %+v\nwant %+v", v.PinComponents, want)
			}
			if !slices.Equal(v.Operations, OperationsFor(tt.role)) || v.Pin != ComputePin(want) {
				t.Fatalf("operations %v pin %s", v.Operations, v.Pin)
			}
		})
	}
}

func pinComponentsEqual(a, b PinComponents) bool {
	return reflect.DeepEqual(a, b)
}
