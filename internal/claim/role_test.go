package claim

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestDeriveRole(t *testing.T) {
	pr := func(mut func(*TargetState)) TargetState {
		st := fxPRState()
		mut(&st)
		return st
	}
	issue := func(mut func(*TargetState)) TargetState {
		st := fxIssueState()
		mut(&st)
		return st
	}
	tests := []struct {
		name string
		st   TargetState
		want Role
	}{
		{"open issue", issue(func(*TargetState) {}), RoleAuthor},
		{"open issue upper-case state", issue(func(s *TargetState) { s.State = " OPEN " }), RoleAuthor},
		{"closed issue", issue(func(s *TargetState) { s.State = StateClosed }), RoleTerminal},
		{"open PR awaiting review", pr(func(*TargetState) {}), RoleReviewer},
		{"open PR reviewed", pr(func(s *TargetState) { s.Reviewed = true }), RoleApprover},
		{"open PR approved", pr(func(s *TargetState) { s.Approved = true }), RoleMerger},
		{"open PR reviewed and approved", pr(func(s *TargetState) { s.Reviewed, s.Approved = true, true }), RoleMerger},
		{"closed PR", pr(func(s *TargetState) { s.State = StateClosed }), RoleTerminal},
		{"merged PR", pr(func(s *TargetState) { s.State, s.Merged = StateClosed, true }), RoleTerminal},
		{"merged flag with open state", pr(func(s *TargetState) { s.Merged = true }), RoleTerminal},
		{"unknown state", pr(func(s *TargetState) { s.State = "locked" }), RoleTerminal},
		{"empty state", issue(func(s *TargetState) { s.State = "" }), RoleTerminal},
		{"unknown kind", issue(func(s *TargetState) { s.Target.Kind = "Milestone" }), RoleTerminal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DeriveRole(tt.st); got != tt.want {
				t.Fatalf("DeriveRole = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDeriveRoleIgnoresEverythingButKindAndState changes every field that is
// not kind or review/merge state and checks the role stays put: the worker,
// claims, assignees, labels and authorship never influence the role.
func TestDeriveRoleIgnoresEverythingButKindAndState(t *testing.T) {
	for _, base := range []TargetState{fxIssueState(), fxPRState()} {
		want := DeriveRole(base)
		st := base
		st.Author = "someone-else"
		st.Pushers = []string{"x", "y"}
		st.Labels = []string{"priority", LabelBlocked}
		st.Assignees = []string{"carol"}
		st.Dependencies = []DependencyEdge{{Repository: fxRepo, Number: 9, State: StateOpen}}
		st.ParityRevision = "ffff"
		st.ClaimRecord = &Record{ClaimID: "c", Worker: "w", Identity: "i", State: RecordStateActive, ExpiresAt: fxNow.Add(time.Hour)}
		st.LeaseGeneration, st.LeaseHolder = "9", "h"
		if got := DeriveRole(st); got != want {
			t.Fatalf("%s: role moved from %q to %q with non-role fields", base.Target.Kind, want, got)
		}
	}
}

func TestCompletingOperation(t *testing.T) {
	tests := []struct {
		role Role
		want string
	}{
		{RoleAuthor, OpOpenPullRequest},
		{RoleReviewer, OpReview},
		{RoleApprover, OpApprove},
		{RoleMerger, OpMerge},
		{RoleTerminal, ""},
		{RoleNone, ""},
		{"admin", ""},
	}
	for _, tt := range tests {
		got := CompletingOperation(tt.role)
		if got != tt.want {
			t.Errorf("CompletingOperation(%q) = %q, want %q", tt.role, got, tt.want)
		}
		// The write that completes a role is one the role may make.
		if got != "" && !slices.Contains(OperationsFor(tt.role), got) {
			t.Errorf("CompletingOperation(%q) = %q, which the role does not permit", tt.role, got)
		}
	}
}

func TestOperationsFor(t *testing.T) {
	tests := []struct {
		role Role
		want []string
	}{
		{RoleAuthor, []string{OpPushBranch, OpOpenPullRequest, OpComment}},
		{RoleReviewer, []string{OpReview, OpComment}},
		{RoleApprover, []string{OpApprove, OpComment}},
		{RoleMerger, []string{OpMerge, OpComment}},
		{RoleTerminal, nil},
		{RoleNone, nil},
		{"admin", nil},
	}
	for _, tt := range tests {
		if got := OperationsFor(tt.role); !slices.Equal(got, tt.want) {
			t.Errorf("OperationsFor(%q) = %v, want %v", tt.role, got, tt.want)
		}
	}
	// Returned slices are fresh: mutating one never widens another.
	ops := OperationsFor(RoleReviewer)
	ops[0] = OpMerge
	if slices.Contains(OperationsFor(RoleReviewer), OpMerge) {
		t.Fatal("OperationsFor returned shared storage")
	}
}

// prStateFor returns a pull request state whose derived role is role.
func prStateFor(role Role) TargetState {
	st := fxPRState()
	switch role {
	case RoleApprover:
		st.Reviewed = true
	case RoleMerger:
		st.Reviewed, st.Approved = true, true
	}
	return st
}

// TestIndependenceMatrix asserts, per role, that the author and every pusher
// are refused, both by CheckIndependence and end to end through Validate,
// and that an unrelated identity is allowed.
func TestIndependenceMatrix(t *testing.T) {
	// fxPRState: author alice, pushers alice and bob.
	type cell struct {
		name     string
		identity string
		role     Role
		wantErr  error
		wantPred string
	}
	var cells []cell
	for _, role := range []Role{RoleReviewer, RoleApprover, RoleMerger} {
		cells = append(cells,
			cell{"author-then-" + string(role), "alice", role, ErrAuthorConflict, "author_independence"},
			cell{"author-case-then-" + string(role), "ALICE", role, ErrAuthorConflict, "author_independence"},
			cell{"pusher-then-" + string(role), "bob", role, ErrPusherConflict, "pusher_independence"},
			cell{"pusher-case-then-" + string(role), " Bob ", role, ErrPusherConflict, "pusher_independence"},
			cell{"independent-" + string(role), "carol", role, nil, ""},
		)
	}
	for _, c := range cells {
		t.Run(c.name, func(t *testing.T) {
			st := prStateFor(c.role)
			if DeriveRole(st) != c.role {
				t.Fatalf("fixture derives %q, want %q", DeriveRole(st), c.role)
			}
			if err := CheckIndependence(c.identity, c.role, st); !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Fatalf("CheckIndependence = %v, want %v", err, c.wantErr)
			}
			_, r := Validate(fxValidateInput(fxWorker("w1", c.identity), fxPR(), st))
			if c.wantErr == nil {
				if r.Outcome != OutcomeValidated {
					t.Fatalf("independent identity refused: %+v", r)
				}
				return
			}
			if r.Outcome != OutcomeRejected || r.FailedPredicate != c.wantPred ||
				r.Class != ClassAuthority || r.Blocker != BlockerIneligible {
				t.Fatalf("Validate = %+v, want authority/ineligible %s", r, c.wantPred)
			}
		})
	}
}

func TestIndependenceLastPusherOnly(t *testing.T) {
	// The last pusher is listed in Pushers even without authoring a commit.
	st := fxPRState()
	st.Pushers = append(st.Pushers, "dave")
	if err := CheckIndependence("dave", RoleReviewer, st); !errors.Is(err, ErrPusherConflict) {
		t.Fatalf("last pusher allowed to review: %v", err)
	}
}

func TestIndependenceIssueAuthorMayAuthor(t *testing.T) {
	st := fxIssueState() // authored by alice
	if err := CheckIndependence("alice", RoleAuthor, st); err != nil {
		t.Fatalf("issue author refused author role: %v", err)
	}
	if _, r := Validate(fxValidateInput(fxWorker("w1", "alice"), fxIssue(), st)); r.Outcome != OutcomeValidated {
		t.Fatalf("issue author refused: %+v", r)
	}
}

func TestIndependenceUnprovable(t *testing.T) {
	st := fxPRState()
	st.Author = ""
	if err := CheckIndependence("carol", RoleReviewer, st); !errors.Is(err, ErrIndependenceUnprovable) {
		t.Fatalf("unknown author: %v", err)
	}
	if err := CheckIndependence("", RoleReviewer, fxPRState()); !errors.Is(err, ErrIndependenceUnprovable) {
		t.Fatalf("unknown identity: %v", err)
	}
	for _, r := range []Role{RoleNone, RoleTerminal, "owner"} {
		if err := CheckIndependence("carol", r, fxPRState()); !errors.Is(err, ErrRoleNotGrantable) {
			t.Fatalf("role %q: %v", r, err)
		}
	}
}
