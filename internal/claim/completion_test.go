package claim

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func reviewerIn() ValidateInput { return prIn() }

func approverIn() ValidateInput {
	return fxValidateInput(fxWorker("w1", "carol"), fxPR(), prStateFor(RoleApprover))
}

func mergerIn() ValidateInput {
	return fxValidateInput(fxWorker("w1", "carol"), fxPR(), prStateFor(RoleMerger))
}

// TestWorkDone: the bound identity's own work for its role, on the bound target and
// head, ends the claim as completed (work_done), before the state the work moved on (a
// new role, a merged and closed pull request, a moved base) can read as stale or as a
// failed validation; anybody else's work, or work on another head or of another kind,
// does not.
func TestWorkDone(t *testing.T) {
	review := func(who, state, commit string) Review {
		return Review{ID: 9, Reviewer: who, State: state, CommitID: commit}
	}
	reviewed := func(rs ...Review) func(*TargetState) {
		return func(st *TargetState) {
			st.Reviews = append(st.Reviews, rs...)
			for _, r := range rs {
				if r.State == ReviewApproved {
					st.Approved = true
				} else {
					st.Reviewed = true
				}
			}
		}
	}
	merged := func(by, head string) func(*TargetState) {
		return func(st *TargetState) {
			st.State, st.Merged, st.MergedBy, st.MergeCommit = StateClosed, true, by, "feedf00dfeedf00dfeedf00dfeedf00dfeedf00d"
			st.Target.HeadSHA = head
			st.ParityRevision = "feedf00dfeedf00dfeedf00dfeedf00dfeedf00d" // the merge moved the base
		}
	}
	pull := func(author string, number int64, at time.Time) func(*TargetState) {
		return func(st *TargetState) {
			st.ReferencingPulls = append(st.ReferencingPulls, PullReference{Repository: fxRepo, Number: number, Author: author, CreatedAt: at})
		}
	}
	claimedAt := fxNow.Truncate(time.Second)
	tests := []struct {
		name string
		in   func() ValidateInput
		mut  func(*TargetState)
		want Trigger // "" = stands
	}{
		{"reviewer: own comment review on the bound head", reviewerIn, reviewed(review("carol", ReviewComment, fxHead)), ExpiryWorkDone},
		{"reviewer: own change request on the bound head", reviewerIn, reviewed(review("Carol", ReviewRequestChanges, fxHead)), ExpiryWorkDone},
		{"reviewer: a dismissed own review still counts", reviewerIn, func(st *TargetState) {
			reviewed(Review{ID: 3, Reviewer: "carol", State: ReviewComment, CommitID: fxHead, Dismissed: true})(st)
		}, ExpiryWorkDone},
		{"reviewer: someone else's review moves the role", reviewerIn, reviewed(review("dave", ReviewComment, fxHead)), TriggerFailedValidation},
		{"reviewer: own review on another head is not this claim's work", reviewerIn, reviewed(review("carol", ReviewComment, fxOtherHead)), TriggerFailedValidation},
		{"reviewer: an approval is not a reviewer's work", reviewerIn, reviewed(review("carol", ReviewApproved, fxHead)), TriggerFailedValidation},
		{"reviewer: own review, then the head moved", reviewerIn, func(st *TargetState) {
			reviewed(review("carol", ReviewComment, fxHead))(st)
			st.Target.HeadSHA = fxOtherHead
		}, ExpiryWorkDone},
		{"approver: own approval on the bound head", approverIn, reviewed(review("carol", ReviewApproved, fxHead)), ExpiryWorkDone},
		{"approver: someone else's approval", approverIn, reviewed(review("dave", ReviewApproved, fxHead)), TriggerFailedValidation},
		{"approver: own approval on another head", approverIn, reviewed(review("carol", ReviewApproved, fxOtherHead)), TriggerFailedValidation},
		{"approver: a comment review is not an approval", approverIn, reviewed(review("carol", ReviewComment, fxHead)), TriggerFailedValidation},
		{"merger: merged by it at the bound head", mergerIn, merged("carol", fxHead), ExpiryWorkDone},
		{"merger: merged by someone else", mergerIn, merged("dave", fxHead), TriggerStaleState},
		{"merger: merged at another head", mergerIn, merged("carol", fxOtherHead), TriggerStaleState},
		{"merger: merger unknown", mergerIn, merged("", fxHead), TriggerStaleState},
		{"merger: a merge pushed but not yet recorded is waited for", mergerIn, func(st *TargetState) {
			st.ParityRevision, st.ParityParents = "feedf00dfeedf00dfeedf00dfeedf00dfeedf00d", []string{fxParity, fxHead}
		}, ""},
		{"merger: the base moved for another reason", mergerIn, func(st *TargetState) {
			st.ParityRevision, st.ParityParents = "feedf00dfeedf00dfeedf00dfeedf00dfeedf00d", []string{fxParity}
		}, TriggerStaleState},
		{"reviewer: a merge-like base move is no excuse for other roles", reviewerIn, func(st *TargetState) {
			st.ParityRevision, st.ParityParents = "feedf00dfeedf00dfeedf00dfeedf00dfeedf00d", []string{fxParity, fxHead}
		}, TriggerStaleState},
		{"author: a pull request by it referencing the issue", issueIn, pull("carol", 77, claimedAt.Add(time.Minute)), ExpiryWorkDone},
		{"author: opened in the claim's second", issueIn, pull("CAROL", 77, claimedAt), ExpiryWorkDone},
		{"author: a pull request by someone else", issueIn, pull("dave", 77, claimedAt.Add(time.Minute)), ""},
		{"author: its pull request from before the claim", issueIn, pull("carol", 77, claimedAt.Add(-time.Second)), ""},
		{"author: a reference from another repository", issueIn, func(st *TargetState) {
			st.ReferencingPulls = []PullReference{{Repository: "fleet/other", Number: 77, Author: "carol", CreatedAt: claimedAt.Add(time.Minute)}}
		}, ""},
		{"author: the issue itself is no pull request", issueIn, pull("carol", fxIssueNumber, claimedAt.Add(time.Minute)), ""},
		{"completion before block", issueIn, func(st *TargetState) {
			pull("carol", 77, claimedAt.Add(time.Minute))(st)
			st.Labels = []string{LabelBlocked}
		}, ExpiryWorkDone},
		{"ownership loss before completion", reviewerIn, func(st *TargetState) {
			reviewed(review("carol", ReviewComment, fxHead))(st)
			st.LeaseHolder = ""
		}, TriggerOwnershipLoss},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in()
			c := fxCapability(t, in)
			st := fxActiveState(in)
			st.ClaimRecord.ClaimedAt = claimedAt
			tt.mut(&st)
			trigger, ends := CheckActive(ActiveInput{Capability: c, Now: in.Now.Add(time.Minute), Fresh: st, Worker: in.Worker, Verdict: VerdictAllowed})
			if trigger != tt.want || ends != (tt.want != "") {
				t.Fatalf("CheckActive = %q %v, want %q", trigger, ends, tt.want)
			}
			if got := WorkDone(c, st); tt.want != TriggerOwnershipLoss && got != (tt.want == ExpiryWorkDone) {
				t.Fatalf("WorkDone = %v", got)
			}
			if tt.want != ExpiryWorkDone {
				return
			}
			phase := EndPhase(trigger)
			if phase != PhaseCompleted {
				t.Fatalf("work done ends %s, want Completed", phase)
			}
			if e := EndingFor(phase, trigger); e != (Ending{Record: RecordStateCompleted, Event: EventCompleted}) {
				t.Fatalf("work done is recorded as %+v", e)
			}
			if trigger.Revocation() {
				t.Fatal("work done is a revocation")
			}
		})
	}
}

// TestRoleIndependence: the reviewer, approver and merger of one pull request are three
// distinct identities. An identity that submitted any review of the pull request gets no
// further role on it (role_independence), whatever the review's state; another identity
// does.
func TestRoleIndependence(t *testing.T) {
	withReview := func(st TargetState, r Review) TargetState {
		st.Reviews = append(st.Reviews, r)
		return st
	}
	tests := []struct {
		name string
		role Role
		r    Review
	}{
		{"reviewer then approver", RoleApprover, Review{ID: 1, Reviewer: "carol", State: ReviewComment, CommitID: fxHead}},
		{"change requester then approver", RoleApprover, Review{ID: 1, Reviewer: "carol", State: ReviewRequestChanges, CommitID: fxHead}},
		{"approver then merger", RoleMerger, Review{ID: 2, Reviewer: "carol", State: ReviewApproved, CommitID: fxHead}},
		{"reviewer then merger", RoleMerger, Review{ID: 1, Reviewer: "CAROL", State: ReviewComment, CommitID: fxHead}},
		{"stale approver then reviewer", RoleReviewer, Review{ID: 2, Reviewer: "carol", State: ReviewApproved, CommitID: fxOtherHead, Stale: true}},
		{"dismissed reviewer then approver", RoleApprover, Review{ID: 1, Reviewer: "carol", State: ReviewComment, CommitID: fxHead, Dismissed: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := withReview(prStateFor(tt.role), tt.r)
			if DeriveRole(st) != tt.role {
				t.Fatalf("fixture derives %s, want %s", DeriveRole(st), tt.role)
			}
			if err := CheckIndependence("carol", tt.role, st); !errors.Is(err, ErrRoleConflict) {
				t.Fatalf("CheckIndependence = %v, want ErrRoleConflict", err)
			}
			_, r := Validate(fxValidateInput(fxWorker("w1", "carol"), fxPR(), st))
			if r.FailedPredicate != "role_independence" || r.RuleID != "TC053" || r.Class != ClassAuthority || r.Blocker != BlockerIneligible {
				t.Fatalf("Validate = %+v, want role_independence (TC053, authority, ineligible)", r)
			}
			if err := CheckIndependence("erin", tt.role, st); err != nil {
				t.Fatalf("a fresh identity is refused: %v", err)
			}
		})
	}
	// Author and pusher conflicts keep their own predicates, ahead of the role rule.
	st := withReview(prStateFor(RoleApprover), Review{ID: 1, Reviewer: "bob", State: ReviewComment, CommitID: fxHead})
	if err := CheckIndependence("bob", RoleApprover, st); !errors.Is(err, ErrPusherConflict) {
		t.Fatalf("pusher who reviewed: %v, want ErrPusherConflict", err)
	}
}

// TestPushersAndUnattributedPushes: whoever the pushers are (timeline pushes, commit
// accounts, co-authors: giteaclaim merges them all into Pushers) is refused every review
// role, and a push nobody can be named for makes independence unprovable.
func TestPushersAndUnattributedPushes(t *testing.T) {
	for _, role := range []Role{RoleReviewer, RoleApprover, RoleMerger} {
		st := prStateFor(role)
		st.Pushers = append(st.Pushers, "coauthor-carol")
		if err := CheckIndependence("Coauthor-Carol", role, st); !errors.Is(err, ErrPusherConflict) {
			t.Fatalf("%s: co-author pusher: %v", role, err)
		}
		st = prStateFor(role)
		st.UnattributedPushes = 1
		if err := CheckIndependence("carol", role, st); !errors.Is(err, ErrIndependenceUnprovable) {
			t.Fatalf("%s: unattributed push: %v", role, err)
		}
		_, r := Validate(fxValidateInput(fxWorker("w1", "carol"), fxPR(), st))
		if r.FailedPredicate != "independence_unprovable" {
			t.Fatalf("%s: Validate = %+v", role, r)
		}
		st = prStateFor(role)
		st.UnmappedCommitEmails = []string{"co-authored-by:somebody"}
		if err := CheckIndependence("carol", role, st); !errors.Is(err, ErrIndependenceUnprovable) {
			t.Fatalf("%s: unreadable co-author: %v", role, err)
		}
	}
}

// TestOtherClaims: a worker holds at most one claim, counted by registration and by
// identity, over active claims and claims past their lock.
// TestOnlyHoldingPhasesHold: a claim that counts for the one-claim rule is always in a
// HoldingPhase, whatever it carries, so listing the claims without an identity key by
// that phase (the controller's selector) misses none that count.
func TestOnlyHoldingPhasesHold(t *testing.T) {
	for _, p := range append([]string{""}, Phases...) {
		for _, acquiring := range []bool{false, true} {
			if (ClaimRef{Phase: p, Acquiring: acquiring}).holds() && !HoldingPhase(p) {
				t.Errorf("a claim in phase %q (acquiring %t) holds, but %q is no holding phase", p, acquiring, p)
			}
		}
	}
	if !(ClaimRef{Phase: PhaseActive}).holds() || !(ClaimRef{Phase: PhaseValidated, Acquiring: true}).holds() {
		t.Fatal("an active claim, or a validated one past its lock, must hold")
	}
}

func TestOtherClaims(t *testing.T) {
	self := ClaimRef{ClaimID: "self", Namespace: "ns", Worker: "w1", Identity: "carol", Phase: PhaseValidated}
	tests := []struct {
		name  string
		other ClaimRef
		want  int
	}{
		{"active claim of the same worker", ClaimRef{ClaimID: "a", Namespace: "ns", Worker: "w1", Phase: PhaseActive}, 1},
		{"acquiring claim of the same worker", ClaimRef{ClaimID: "a", Namespace: "ns", Worker: "w1", Phase: PhaseValidated, Acquiring: true}, 1},
		{"active claim of a second registration with the same identity", ClaimRef{ClaimID: "a", Namespace: "ns", Worker: "w2", Identity: "Carol", Phase: PhaseActive}, 1},
		{"same identity in another namespace", ClaimRef{ClaimID: "a", Namespace: "ns2", Worker: "w9", Identity: "carol", Phase: PhaseActive}, 1},
		{"merely validated claim of the same worker", ClaimRef{ClaimID: "a", Namespace: "ns", Worker: "w1", Phase: PhaseValidated}, 0},
		{"ended claim of the same worker", ClaimRef{ClaimID: "a", Namespace: "ns", Worker: "w1", Phase: PhaseReleased, Acquiring: true}, 0},
		{"rejected claim of the same worker", ClaimRef{ClaimID: "a", Namespace: "ns", Worker: "w1", Phase: PhaseRejected}, 0},
		{"active claim of another worker", ClaimRef{ClaimID: "a", Namespace: "ns", Worker: "w2", Identity: "dave", Phase: PhaseActive}, 0},
		{"same name in another namespace, other identity", ClaimRef{ClaimID: "a", Namespace: "ns2", Worker: "w1", Identity: "dave", Phase: PhaseActive}, 0},
		{"itself", ClaimRef{ClaimID: "self", Namespace: "ns", Worker: "w1", Phase: PhaseActive}, 0},
		{"pending claim with a finalizer put on by hand", ClaimRef{ClaimID: "a", Namespace: "ns", Worker: "w1", Phase: PhasePending, Acquiring: true}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OtherClaims(self, "carol", []ClaimRef{tt.other}); got != tt.want {
				t.Fatalf("OtherClaims = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestSecondClaimRefused: with another claim held, validation and the claim are a policy
// refusal (worker_holds_claim) that names only the requested target.
func TestSecondClaimRefused(t *testing.T) {
	check := func(t *testing.T, r Result) {
		t.Helper()
		if r.FailedPredicate != "worker_holds_claim" || r.RuleID != "TC013" || r.Class != ClassPolicy || r.Blocker != BlockerNone {
			t.Fatalf("result = %+v, want worker_holds_claim (TC013, policy, no blocker)", r)
		}
		if r.ContentionIsNormal || r.RetryPermitted || !r.ReassessFromFreshState {
			t.Fatalf("flags: %+v", r)
		}
		if strings.Contains(r.Message, "#") || strings.ContainsAny(r.Message, "0123456789") {
			t.Fatalf("message names something: %q", r.Message)
		}
	}
	in := issueIn()
	in.OtherClaims = 1
	_, r := Validate(in)
	check(t, r)
	if r.Outcome != OutcomeRejected || r.Target != in.Requested {
		t.Fatalf("validate: %+v", r)
	}

	in = issueIn()
	v := mustValidate(t, in)
	cin := fxClaimInput(in, v)
	cin.OtherClaims = 2
	_, r = DecideClaim(cin)
	check(t, r)
	if r.Outcome != OutcomeNotAcquired {
		t.Fatalf("claim: %+v", r)
	}
}
