package claim

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWorkBranch(t *testing.T) {
	if got := WorkRef("team-a", "tc-7"); got != "refs/heads/fleet/team-a/tc-7" {
		t.Fatalf("WorkRef = %s", got)
	}
	if WorkBranch("a", "b-c") == WorkBranch("a-b", "c") {
		t.Fatal("two claims share a work branch")
	}
}

func TestReferences(t *testing.T) {
	for text, want := range map[string]bool{"Fixes #42": true, "#42": true, "(#42)": true, "closes #42.": true,
		"#421": false, "#4": false, "other/repo#42": false, "issue 42": false, "x#42": false} {
		if got := References(text, 42); got != want {
			t.Errorf("References(%q, 42) = %v", text, got)
		}
	}
}

// gateway fixtures: a reviewer on fxPR and an author on fxIssue.
func gwCap(role Role, target Target) *Capability {
	return &Capability{Worker: "w1", Identity: "carol", Repository: fxRepo, Target: target, Role: role,
		Operations: OperationsFor(role), ClaimID: fxClaimID, LeaseName: "l", LeaseGeneration: "1", ExpiresAt: fxNow.Add(time.Hour)}
}

func gwIn(role Role, target Target, w Write) WriteInput {
	st := fxPRState()
	return WriteInput{
		Worker: "w1", Identity: "carol", Repository: fxRepo, DefaultBranch: "main",
		Claims: []HeldClaim{
			{Namespace: "ns", Name: "tc-mine", Worker: "w1", Phase: PhaseActive, Capability: gwCap(role, target)},
			// Another worker's claim on another task never counts and is never named.
			{Namespace: "ns", Name: "tc-foreign-secret", Worker: "w2", Phase: PhaseActive, Capability: &Capability{
				Worker: "w2", Identity: "dave", Repository: fxRepo, Target: Target{Repository: fxRepo, Kind: KindIssue, Number: 999},
				Role: RoleAuthor, Operations: OperationsFor(RoleAuthor), ExpiresAt: fxNow.Add(time.Hour)}},
		},
		Write: w, LiveHead: fxHead, Target: &st, Now: fxNow,
	}
}

func apiRoute(method, p string) Route {
	r, ok := MatchRoute(method, "/api/v1/repos/"+fxRepo+p, "")
	if !ok {
		panic("no route " + p)
	}
	return r
}

func TestAuthorizeWrite(t *testing.T) {
	comment := func(n string) Write { return Write{Route: apiRoute("POST", "/issues/"+n+"/comments")} }
	review := func(event, commit string) Write {
		return Write{Route: apiRoute("POST", "/pulls/57/reviews"), Event: event, CommitID: commit}
	}
	merge := func(commit string) Write { return Write{Route: apiRoute("POST", "/pulls/57/merge"), CommitID: commit} }
	openPull := func(head, text string) Write {
		return Write{Route: apiRoute("POST", "/pulls"), PullHead: head, PullBase: "main", PullText: text, Text: []string{text}}
	}
	pushRoute, _ := MatchRoute("POST", "/fleet/app.git/git-receive-pack", "")
	push := func(refs ...string) Write {
		w := Write{Route: pushRoute}
		for _, r := range refs {
			w.Refs = append(w.Refs, RefUpdate{Old: strings.Repeat("0", 40), New: fxHead, Ref: r})
		}
		return w
	}
	work := WorkRef("ns", "tc-mine")
	contents := func(method, file, branch, newBranch string) Write {
		return Write{Route: apiRoute(method, "/contents/"+file), Branch: branch, NewBranch: newBranch,
			Commits: []string{"Work on #42"}, ChangedPaths: []string{file}}
	}
	workBranch := WorkBranch("ns", "tc-mine")
	selfAuthored := fxPRState()
	selfAuthored.Author = "carol"
	pushedBy := fxPRState()
	pushedBy.Pushers = []string{"Carol"}

	tests := []struct {
		name   string
		role   Role
		target Target
		write  Write
		mutate func(*WriteInput)
		allow  bool
		op     string
		reason string
		fill   string // the head the gateway writes into a request that named none
	}{
		{name: "author comments on its issue", role: RoleAuthor, target: fxIssue(), write: comment("42"), allow: true, op: OpComment},
		{name: "author comments on another issue", role: RoleAuthor, target: fxIssue(), write: comment("43"), op: OpComment, reason: ReasonWrongTarget},
		{name: "a capability decided on another server permits nothing on a same-named repository", role: RoleAuthor, target: fxIssue(),
			write: comment("42"), op: OpComment, reason: ReasonNoCapability,
			mutate: func(in *WriteInput) { in.Where = RepositoryKey{Server: "gitea-b", ID: 7} }},
		{name: "a capability decided in a GiteaRepository acts there", role: RoleAuthor, target: fxIssue(),
			write: comment("42"), allow: true, op: OpComment,
			mutate: func(in *WriteInput) {
				in.Where = RepositoryKey{Server: "gitea-b", ID: 7}
				in.Claims[0].Where = in.Where
			}},
		{name: "a capability of a GiteaRepository permits nothing in the flags' repository of the same name", role: RoleAuthor, target: fxIssue(),
			write: comment("42"), op: OpComment, reason: ReasonNoCapability,
			mutate: func(in *WriteInput) { in.Claims[0].Where = RepositoryKey{Server: "gitea-b", ID: 7} }},
		{name: "neutral worker comments", role: RoleAuthor, target: fxIssue(), write: comment("42"), op: OpComment, reason: ReasonNoCapability,
			mutate: func(in *WriteInput) { in.Claims = in.Claims[1:] }},
		{name: "released claim", role: RoleAuthor, target: fxIssue(), write: comment("42"), op: OpComment, reason: ReasonNoCapability,
			mutate: func(in *WriteInput) { in.Claims[0].Phase = PhaseReleased }},
		{name: "expired capability", role: RoleAuthor, target: fxIssue(), write: comment("42"), op: OpComment, reason: ReasonExpired,
			mutate: func(in *WriteInput) { in.Now = fxNow.Add(2 * time.Hour) }},
		{name: "another worker's claim does not count", role: RoleAuthor, target: fxIssue(), write: comment("999"), op: OpComment, reason: ReasonWrongTarget},
		{name: "other repository", role: RoleAuthor, target: fxIssue(), op: OpComment, reason: ReasonWrongRepository,
			write: Write{Route: Route{Operation: OpComment, Repository: "other/repo", Number: 42}}},
		{name: "author may not label", role: RoleAuthor, target: fxIssue(), write: Write{Route: apiRoute("POST", "/issues/42/labels")}, op: OpLabel, reason: ReasonLabelNotPermitted},
		{name: "author may not remove a label", role: RoleAuthor, target: fxIssue(), write: Write{Route: apiRoute("DELETE", "/issues/42/labels/7")}, op: OpLabel, reason: ReasonLabelNotPermitted},
		{name: "author may not close its issue", role: RoleAuthor, target: fxIssue(), write: Write{Route: apiRoute("PATCH", "/issues/42")}, op: OpEditIssue, reason: ReasonEditIssueNotPermitted},
		{name: "author may not assign", role: RoleAuthor, target: fxIssue(), write: Write{Route: apiRoute("POST", "/issues/42/assignees")}, op: OpAssign, reason: ReasonAssignNotPermitted},
		{name: "reviewer may not close the pull request", role: RoleReviewer, target: fxPR(), write: Write{Route: apiRoute("PATCH", "/pulls/57")}, op: OpEditIssue, reason: ReasonEditIssueNotPermitted},
		{name: "no role may close another issue either", role: RoleAuthor, target: fxIssue(), write: Write{Route: apiRoute("PATCH", "/issues/43")}, op: OpEditIssue, reason: ReasonEditIssueNotPermitted},
		{name: "a neutral worker is told no role may close an issue", role: RoleAuthor, target: fxIssue(), write: Write{Route: apiRoute("PATCH", "/issues/42")}, op: OpEditIssue,
			reason: ReasonEditIssueNotPermitted, mutate: func(in *WriteInput) { in.Claims = in.Claims[1:] }},
		{name: "closing an issue of another repository", role: RoleAuthor, target: fxIssue(), op: OpEditIssue, reason: ReasonWrongRepository,
			write: Write{Route: Route{Operation: OpEditIssue, Repository: "other/repo", Number: 42}}},
		{name: "reviewer comments at the live head", role: RoleReviewer, target: fxPR(), write: comment("57"), allow: true, op: OpComment},
		{name: "reviewer comments after the head moved", role: RoleReviewer, target: fxPR(), write: comment("57"), op: OpComment, reason: ReasonWrongHead,
			mutate: func(in *WriteInput) { in.LiveHead = fxOtherHead }},
		{name: "reviewer reviews at the bound head", role: RoleReviewer, target: fxPR(), write: review("COMMENT", fxHead), allow: true, op: OpReview},
		{name: "reviewer requests changes", role: RoleReviewer, target: fxPR(), write: review("REQUEST_CHANGES", fxHead), allow: true, op: OpReview},
		{name: "reviewer reviews another head", role: RoleReviewer, target: fxPR(), write: review("COMMENT", fxOtherHead), op: OpReview, reason: ReasonWrongHead},
		{name: "reviewer reviews without a commit: at the bound head", role: RoleReviewer, target: fxPR(), write: review("COMMENT", ""), allow: true, op: OpReview, fill: fxHead},
		{name: "reviewer reviews without a commit after the head moved", role: RoleReviewer, target: fxPR(), write: review("COMMENT", ""), op: OpReview, reason: ReasonWrongHead,
			mutate: func(in *WriteInput) { in.LiveHead = fxOtherHead }},
		{name: "reviewer reviews when Gitea's head moved", role: RoleReviewer, target: fxPR(), write: review("COMMENT", fxHead), op: OpReview, reason: ReasonWrongHead,
			mutate: func(in *WriteInput) { in.LiveHead = fxOtherHead }},
		{name: "reviewer approves", role: RoleReviewer, target: fxPR(), write: review("APPROVED", fxHead), op: OpApprove, reason: ReasonOperationNotPermitted},
		{name: "reviewer merges", role: RoleReviewer, target: fxPR(), write: merge(fxHead), op: OpMerge, reason: ReasonOperationNotPermitted},
		{name: "pending review", role: RoleReviewer, target: fxPR(), write: review("PENDING", fxHead), op: OpReview, reason: ReasonReviewEventNotPermitted},
		{name: "review event spelt otherwise", role: RoleApprover, target: fxPR(), write: review("approved", fxHead), op: OpReview, reason: ReasonReviewEventNotPermitted},
		{name: "approver approves", role: RoleApprover, target: fxPR(), write: review("APPROVED", fxHead), allow: true, op: OpApprove},
		{name: "approver may not request changes", role: RoleApprover, target: fxPR(), write: review("REQUEST_CHANGES", fxHead), op: OpReview, reason: ReasonOperationNotPermitted},
		{name: "approver that authored the PR", role: RoleApprover, target: fxPR(), write: review("APPROVED", fxHead), op: OpApprove, reason: ReasonIndependence,
			mutate: func(in *WriteInput) { in.Target = &selfAuthored }},
		{name: "approver that pushed to the PR", role: RoleApprover, target: fxPR(), write: review("APPROVED", fxHead), op: OpApprove, reason: ReasonIndependence,
			mutate: func(in *WriteInput) { in.Target = &pushedBy }},
		{name: "approve without a fresh read of the PR", role: RoleApprover, target: fxPR(), write: review("APPROVED", fxHead), op: OpApprove, reason: ReasonIndependence,
			mutate: func(in *WriteInput) { in.Target = nil }},
		{name: "merger merges at the bound head", role: RoleMerger, target: fxPR(), write: merge(fxHead), allow: true, op: OpMerge},
		{name: "merger merges another head", role: RoleMerger, target: fxPR(), write: merge(fxOtherHead), op: OpMerge, reason: ReasonWrongHead},
		{name: "merger merges without naming the head: at the bound head", role: RoleMerger, target: fxPR(), write: merge(""), allow: true, op: OpMerge, fill: fxHead},
		{name: "approver approves without a commit: at the bound head", role: RoleApprover, target: fxPR(), write: review("APPROVED", ""), allow: true, op: OpApprove, fill: fxHead},
		{name: "merger without naming the head, after it moved", role: RoleMerger, target: fxPR(), write: merge(""), op: OpMerge, reason: ReasonWrongHead,
			mutate: func(in *WriteInput) { in.LiveHead = fxOtherHead }},
		{name: "merger that authored the PR", role: RoleMerger, target: fxPR(), write: merge(fxHead), op: OpMerge, reason: ReasonIndependence,
			mutate: func(in *WriteInput) { in.Target = &selfAuthored }},
		{name: "author pushes its work branch", role: RoleAuthor, target: fxIssue(), write: push(work), allow: true, op: OpPushBranch},
		{name: "author pushes the default branch", role: RoleAuthor, target: fxIssue(), write: push("refs/heads/main"), op: OpPushBranch, reason: ReasonWrongBranch},
		{name: "author pushes its branch and another", role: RoleAuthor, target: fxIssue(), write: push(work, "refs/heads/other"), op: OpPushBranch, reason: ReasonWrongBranch},
		{name: "author pushes a tag", role: RoleAuthor, target: fxIssue(), write: push("refs/tags/v1"), op: OpPushBranch, reason: ReasonWrongBranch},
		{name: "author pushes another claim's branch", role: RoleAuthor, target: fxIssue(), write: push(WorkRef("ns", "tc-foreign-secret")), op: OpPushBranch, reason: ReasonWrongBranch},
		{name: "author deletes its branch", role: RoleAuthor, target: fxIssue(), op: OpPushBranch, reason: ReasonWrongBranch,
			write: Write{Route: pushRoute, Refs: []RefUpdate{{Old: fxHead, New: strings.Repeat("0", 40), Ref: work}}}},
		{name: "push with no default branch known", role: RoleAuthor, target: fxIssue(), write: push(work), op: OpPushBranch, reason: ReasonWrongBranch,
			mutate: func(in *WriteInput) { in.DefaultBranch = "" }},
		{name: "author commits a file to its work branch", role: RoleAuthor, target: fxIssue(), write: contents("PUT", "a.md", workBranch, ""), allow: true, op: OpPushBranch},
		{name: "author starts its work branch from main with a file", role: RoleAuthor, target: fxIssue(), write: contents("POST", "a.md", "main", workBranch), allow: true, op: OpPushBranch},
		{name: "author commits a file to main", role: RoleAuthor, target: fxIssue(), write: contents("POST", "a.md", "main", ""), op: OpPushBranch, reason: ReasonWrongBranch},
		{name: "author commits a file naming no branch (Gitea's default)", role: RoleAuthor, target: fxIssue(), write: contents("DELETE", "a.md", "", ""), op: OpPushBranch, reason: ReasonWrongBranch},
		{name: "author commits a file to another claim's branch", role: RoleAuthor, target: fxIssue(), write: contents("PUT", "a.md", workBranch, WorkBranch("ns", "tc-foreign-secret")), op: OpPushBranch, reason: ReasonWrongBranch},
		{name: "author commits into .fleet", role: RoleAuthor, target: fxIssue(), write: contents("PUT", ".fleet/claim-rules.json", workBranch, ""), op: OpPushBranch, reason: ReasonProtectedPath},
		{name: "author commits with a message closing another issue", role: RoleAuthor, target: fxIssue(), op: OpPushBranch, reason: ReasonUncoveredReference,
			write: contents("PUT", "a.md", workBranch, ""), mutate: func(in *WriteInput) { in.Write.Commits = []string{"closes #1"} }},
		{name: "reviewer commits a file", role: RoleReviewer, target: fxPR(), write: contents("PUT", "a.md", workBranch, ""), op: OpPushBranch, reason: ReasonOperationNotPermitted},
		{name: "empty push", role: RoleAuthor, target: fxIssue(), write: push(), op: OpPushBranch, reason: ReasonMalformedRequest},
		{name: "reviewer pushes", role: RoleReviewer, target: fxPR(), write: push(work), op: OpPushBranch, reason: ReasonOperationNotPermitted},
		{name: "author opens its pull request", role: RoleAuthor, target: fxIssue(), write: openPull(WorkBranch("ns", "tc-mine"), "Fixes #42"), allow: true, op: OpOpenPullRequest},
		{name: "pull request not referencing the issue", role: RoleAuthor, target: fxIssue(), write: openPull(WorkBranch("ns", "tc-mine"), "Fixes #421"), op: OpOpenPullRequest, reason: ReasonMissingReference},
		{name: "pull request from another branch", role: RoleAuthor, target: fxIssue(), write: openPull("feature", "Fixes #42"), op: OpOpenPullRequest, reason: ReasonWrongBranch},
		{name: "pull request from the default branch", role: RoleAuthor, target: fxIssue(), write: openPull("main", "Fixes #42"), op: OpOpenPullRequest, reason: ReasonWrongBranch},
		{name: "pull request into another base", role: RoleAuthor, target: fxIssue(), op: OpOpenPullRequest, reason: ReasonWrongBranch,
			write: Write{Route: apiRoute("POST", "/pulls"), PullHead: WorkBranch("ns", "tc-mine"), PullBase: "release", PullText: "Fixes #42"}},
		{name: "pull request setting labels or assignees", role: RoleAuthor, target: fxIssue(), op: OpOpenPullRequest, reason: ReasonFieldNotPermitted,
			mutate: func(in *WriteInput) { in.Write.Forbidden = []string{"assignees"} },
			write:  openPull(WorkBranch("ns", "tc-mine"), "Fixes #42")},
		{name: "pull request carrying a claim record", role: RoleAuthor, target: fxIssue(), op: OpOpenPullRequest, reason: ReasonReservedMarker,
			write: openPull(WorkBranch("ns", "tc-mine"), "Fixes #42\n"+RecordMarker+`{"number":7} -->`)},
		{name: "comment carrying an audit block", role: RoleAuthor, target: fxIssue(), op: OpComment, reason: ReasonReservedMarker,
			write: Write{Route: apiRoute("POST", "/issues/42/comments"), Text: []string{"hi " + AuditMarker}}},
		{name: "merge that schedules itself", role: RoleMerger, target: fxPR(), op: OpMerge, reason: ReasonFieldNotPermitted,
			write: Write{Route: apiRoute("POST", "/pulls/57/merge"), CommitID: fxHead, Forbidden: []string{"merge_when_checks_succeed"}}},
		{name: "pull request that also closes other issues", role: RoleAuthor, target: fxIssue(), op: OpOpenPullRequest, reason: ReasonUncoveredReference,
			write: openPull(WorkBranch("ns", "tc-mine"), "Fixes #42 … also closes #3, resolves #1")},
		{name: "pull request naming its issue by repository", role: RoleAuthor, target: fxIssue(), op: OpOpenPullRequest, allow: true,
			write: openPull(WorkBranch("ns", "tc-mine"), "Fixes #42, see "+fxRepo+"#42")},
		{name: "pull request naming an issue of another repository", role: RoleAuthor, target: fxIssue(), op: OpOpenPullRequest, reason: ReasonUncoveredReference,
			write: openPull(WorkBranch("ns", "tc-mine"), "Fixes #42 and other/repo#42")},
		{name: "push whose commit closes another issue", role: RoleAuthor, target: fxIssue(), op: OpPushBranch, reason: ReasonUncoveredReference,
			write: push(work), mutate: func(in *WriteInput) { in.Write.Commits = []string{"work on #42", "closes #1"} }},
		{name: "push whose commit logs time on its issue", role: RoleAuthor, target: fxIssue(), op: OpPushBranch, allow: true,
			write: push(work), mutate: func(in *WriteInput) { in.Write.Commits = []string{"fixes #42 @1h"} }},
		{name: "push that changes .fleet", role: RoleAuthor, target: fxIssue(), op: OpPushBranch, reason: ReasonProtectedPath,
			write: push(work), mutate: func(in *WriteInput) { in.Write.ChangedPaths = []string{".fleet"} }},
		{name: "author comment reopening another issue", role: RoleAuthor, target: fxIssue(), op: OpComment, reason: ReasonUncoveredReference,
			write: Write{Route: apiRoute("POST", "/issues/42/comments"), Text: []string{"reopens #7"}}},
		{name: "reviewer names the issue its pull request fixes", role: RoleReviewer, target: fxPR(), op: OpReview, allow: true,
			write:  Write{Route: apiRoute("POST", "/pulls/57/reviews"), Event: "COMMENT", CommitID: fxHead, Text: []string{"good fix for #42 in #57"}},
			mutate: func(in *WriteInput) { in.TargetText = "Fix the parser\nFixes #42" }},
		{name: "reviewer names an issue its pull request does not", role: RoleReviewer, target: fxPR(), op: OpReview, reason: ReasonUncoveredReference,
			write:  Write{Route: apiRoute("POST", "/pulls/57/reviews"), Event: "COMMENT", CommitID: fxHead, Text: []string{"see #41"}},
			mutate: func(in *WriteInput) { in.TargetText = "Fixes #42" }},
		{name: "merge message closing another issue", role: RoleMerger, target: fxPR(), op: OpMerge, reason: ReasonUncoveredReference,
			write:  Write{Route: apiRoute("POST", "/pulls/57/merge"), CommitID: fxHead, Text: []string{"Merge; closes #1"}},
			mutate: func(in *WriteInput) { in.TargetText = "Fixes #42" }},
		{name: "merge of commits closing another issue", role: RoleMerger, target: fxPR(), op: OpMerge, reason: ReasonUncoveredReference,
			write: merge(fxHead), mutate: func(in *WriteInput) { in.TargetText = "Fixes #42"; in.PullCommits = []string{"fix #42", "closes #1"} }},
		{name: "merge of commits closing the linked issue", role: RoleMerger, target: fxPR(), op: OpMerge, allow: true,
			write: merge(fxHead), mutate: func(in *WriteInput) { in.TargetText = "Fixes #42"; in.PullCommits = []string{"fixes #42"} }},
		{name: "merge of a pull request that changes .fleet", role: RoleMerger, target: fxPR(), op: OpMerge, reason: ReasonProtectedPath,
			write: merge(fxHead), mutate: func(in *WriteInput) { in.PullFiles = []string{"README.md", ".fleet/claim-rules.json"} }},
		{name: "approval naming the head in upper case", role: RoleApprover, target: fxPR(), write: review("APPROVED", strings.ToUpper(fxHead)), op: OpApprove, reason: ReasonMalformedRequest},
		{name: "merge naming the head in upper case", role: RoleMerger, target: fxPR(), write: merge(strings.ToUpper(fxHead)), op: OpMerge, reason: ReasonMalformedRequest},
		{name: "author of an expired claim pushes", role: RoleAuthor, target: fxIssue(), write: push(work), op: OpPushBranch, reason: ReasonExpired,
			mutate: func(in *WriteInput) { in.Now = fxNow.Add(time.Hour) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := gwIn(tt.role, tt.target, tt.write)
			if tt.mutate != nil {
				tt.mutate(&in)
			}
			v := AuthorizeWrite(in)
			if v.Allowed != tt.allow || v.Reason != tt.reason || v.Operation != tt.op || v.FillHead != tt.fill {
				t.Fatalf("AuthorizeWrite = %+v; want allowed=%v op=%s reason=%s fillHead=%q", v, tt.allow, tt.op, tt.reason, tt.fill)
			}
			if v.Allowed && v.Claim != "tc-mine" {
				t.Fatalf("allowed through %q", v.Claim)
			}
			if !v.Allowed && v.Message == "" {
				t.Fatal("refusal without a message")
			}
			b, _ := json.Marshal(v)
			for _, leak := range []string{"foreign", "999", "dave", "w2"} {
				if strings.Contains(string(b), leak) {
					t.Fatalf("verdict names another task (%s): %s", leak, b)
				}
			}
		})
	}
}

// TestAuthorizeWriteCannotWiden: a capability whose operation list was widened in
// transit still cannot do what its role does not permit.
func TestAuthorizeWriteCannotWiden(t *testing.T) {
	in := gwIn(RoleReviewer, fxPR(), Write{Route: apiRoute("POST", "/pulls/57/merge"), CommitID: fxHead})
	c := in.Claims[0].Capability
	c.Operations = append(slices.Clone(c.Operations), OpMerge, OpApprove)
	if v := AuthorizeWrite(in); v.Allowed || v.Reason != ReasonOperationNotPermitted {
		t.Fatalf("widened capability: %+v", v)
	}
}

// TestRefusalsSayWhatWorks: a refusal of what no role may do says so and what works
// instead; a refusal of another role's operation names the role that holds it and the
// caller's own. Only an operation nobody can name keeps the generic message.
func TestRefusalsSayWhatWorks(t *testing.T) {
	review := func(event string) Write {
		return Write{Route: apiRoute("POST", "/pulls/57/reviews"), Event: event, CommitID: fxHead}
	}
	pushRoute, _ := MatchRoute("POST", "/fleet/app.git/git-receive-pack", "")
	cases := []struct {
		name     string
		role     Role
		target   Target
		write    Write
		reason   string
		contains []string
	}{
		{"closing an issue", RoleAuthor, fxIssue(), Write{Route: apiRoute("PATCH", "/issues/42")}, ReasonEditIssueNotPermitted,
			[]string{"no role may", "close or reopen", "merging the pull request closes it", `"Fixes #N" closes issue N when it is merged`}},
		{"closing a pull request", RoleMerger, fxPR(), Write{Route: apiRoute("PATCH", "/pulls/57")}, ReasonEditIssueNotPermitted,
			[]string{"no role may", "merging the pull request closes it"}},
		{"labelling", RoleAuthor, fxIssue(), Write{Route: apiRoute("POST", "/issues/42/labels")}, ReasonLabelNotPermitted,
			[]string{"no role may add or remove labels", "comment"}},
		{"assigning", RoleAuthor, fxIssue(), Write{Route: apiRoute("DELETE", "/issues/42/assignees")}, ReasonAssignNotPermitted,
			[]string{"no role may change assignees", "kubectl fleet claim", "kubectl fleet release"}},
		{"a pending review", RoleReviewer, fxPR(), review("PENDING"), ReasonReviewEventNotPermitted,
			[]string{"no role may leave a pending (draft) review", "COMMENT", "REQUEST_CHANGES", "APPROVED"}},
		{"a reviewer approves", RoleReviewer, fxPR(), review("APPROVED"), ReasonOperationNotPermitted,
			[]string{"approving a pull request is the approver's operation, not the reviewer's", "once it has a review"}},
		{"a reviewer merges", RoleReviewer, fxPR(), Write{Route: apiRoute("POST", "/pulls/57/merge"), CommitID: fxHead}, ReasonOperationNotPermitted,
			[]string{"merging a pull request is the merger's operation, not the reviewer's", "merger once it is approved"}},
		{"an approver requests changes", RoleApprover, fxPR(), review("REQUEST_CHANGES"), ReasonOperationNotPermitted,
			[]string{"reviewing a pull request (COMMENT or REQUEST_CHANGES) is the reviewer's operation, not the approver's"}},
		{"a reviewer pushes its branch", RoleReviewer, fxPR(),
			Write{Route: pushRoute, Refs: []RefUpdate{{Old: strings.Repeat("0", 40), New: fxHead, Ref: WorkRef("ns", "tc-mine")}}}, ReasonOperationNotPermitted,
			[]string{"pushing to a work branch is the author's operation, not the reviewer's", "an open issue: author"}},
		{"an operation nobody names", RoleAuthor, fxIssue(), Write{Route: Route{Operation: "delete_branch", Repository: fxRepo, Number: 42}}, ReasonOperationNotPermitted,
			[]string{RefusalMessage(ReasonOperationNotPermitted)}},
	}
	for _, c := range cases {
		v := AuthorizeWrite(gwIn(c.role, c.target, c.write))
		if v.Allowed || v.Reason != c.reason {
			t.Errorf("%s: %+v, want %s", c.name, v, c.reason)
			continue
		}
		for _, want := range c.contains {
			if !strings.Contains(v.Message, want) {
				t.Errorf("%s: message %q lacks %q", c.name, v.Message, want)
			}
		}
	}
	if got := RefusalMessage(ReasonOperationNotPermitted); got != "your role does not permit this operation" {
		t.Errorf("the generic message changed: %q", got)
	}
}

func readDoc(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	return string(b)
}

func TestCommentBudgetBlock(t *testing.T) {
	b := CommentBudget{Comments: 100, Bytes: 100 * 1000} // 1000 bytes an average comment
	cases := []struct {
		name                string
		used, usedBytes, nx int
		comments, bytes     int
		ok                  bool
	}{
		{"fresh budget: a full block", 0, 0, 10, CommentBlockMax, 10 + 7*1000, true},
		{"forty left: a full block", 60, 0, 10, CommentBlockMax, 10 + 7*1000, true},
		{"a quarter of what is left", 100 - 35, 0, 10, 35 / 4, 10 + (35/4-1)*1000, true},
		{"at the edge: one comment", 100 - CommentBlockEdge + 1, 0, 10, 1, 10, true},
		{"just above the edge", 100 - CommentBlockEdge, 0, 10, CommentBlockMax, 10 + 7*1000, true},
		{"few bytes left: one comment", 0, 100*1000 - CommentBlockEdge*1000 + 1, 10, 1, 10, true},
		{"a large comment gets a block of its size", 0, 0, 50000, CommentBlockMax, 50000 + 7*1000, true},
		{"bytes capped at what is left", 0, 100*1000 - 40*1000, 35000, CommentBlockMax, 40 * 1000, true},
		{"the last comment", 99, 0, 10, 1, 10, true},
		{"spent", 100, 0, 10, 0, 0, false},
		{"too large", 0, 0, 100*1000 + 1, 0, 0, false},
		{"negative size", 0, 0, -1, 0, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, by, ok := b.Block(tc.used, tc.usedBytes, tc.nx)
			if c != tc.comments || by != tc.bytes || ok != tc.ok {
				t.Fatalf("Block(%d, %d, %d) = %d, %d, %v; want %d, %d, %v", tc.used, tc.usedBytes, tc.nx, c, by, ok, tc.comments, tc.bytes, tc.ok)
			}
			if ok && (tc.used+c > b.Comments || tc.usedBytes+by > b.Bytes || c < 1 || by < tc.nx) {
				t.Fatalf("block %d/%d outside the budget or smaller than the comment", c, by)
			}
		})
	}
	small := CommentBudget{Comments: 8, Bytes: 1 << 20}
	for used := range 8 {
		if c, _, ok := small.Block(used, 0, 1); !ok || c != 1 {
			t.Fatalf("a budget smaller than the edge reserves one comment at a time; got %d at %d used", c, used)
		}
	}
}

// TestWrongBranchNamesTheCallersWorkBranch: a refused push or pull request tells an
// author its own work branch, says why when the branch is not the question (a deletion, a
// base other than the default branch), and never names another worker's claim; a caller
// whose claim permits no push is not told of a branch.
func TestWrongBranchNamesTheCallersWorkBranch(t *testing.T) {
	pushRoute, _ := MatchRoute("POST", "/fleet/app.git/git-receive-pack", "")
	push := func(u RefUpdate) Write { return Write{Route: pushRoute, Refs: []RefUpdate{u}} }
	zero := strings.Repeat("0", 40)
	mine := WorkBranch("ns", "tc-mine")
	cases := []struct {
		name     string
		role     Role
		write    Write
		contains []string
	}{
		{"push to the default branch", RoleAuthor, push(RefUpdate{Old: zero, New: fxHead, Ref: "refs/heads/main"}),
			[]string{RefusalMessage(ReasonWrongBranch), "your claim's work branch is " + mine}},
		{"push to another branch", RoleAuthor, push(RefUpdate{Old: zero, New: fxHead, Ref: "refs/heads/feature"}),
			[]string{"your claim's work branch is " + mine}},
		{"deleting the work branch", RoleAuthor, push(RefUpdate{Old: fxHead, New: zero, Ref: WorkRef("ns", "tc-mine")}),
			[]string{"deletes a branch is not forwarded", "your claim's work branch is " + mine}},
		{"pull request into another base", RoleAuthor,
			Write{Route: apiRoute("POST", "/pulls"), PullHead: mine, PullBase: "release", PullText: "Fixes #42", Text: []string{"Fixes #42"}},
			[]string{"merges into the default branch only", "your claim's work branch is " + mine}},
	}
	for _, c := range cases {
		v := AuthorizeWrite(gwIn(c.role, fxIssue(), c.write))
		if v.Reason != ReasonWrongBranch {
			t.Errorf("%s: %+v, want %s", c.name, v, ReasonWrongBranch)
			continue
		}
		for _, want := range c.contains {
			if !strings.Contains(v.Message, want) {
				t.Errorf("%s: message %q lacks %q", c.name, v.Message, want)
			}
		}
		if strings.Contains(v.Message, "tc-foreign-secret") {
			t.Errorf("%s: message %q names another worker's claim", c.name, v.Message)
		}
	}
	// A reviewer's claim permits no push: the refusal names no branch.
	v := AuthorizeWrite(gwIn(RoleReviewer, fxPR(), push(RefUpdate{Old: zero, New: fxHead, Ref: "refs/heads/main"})))
	if v.Reason != ReasonWrongBranch || strings.Contains(v.Message, "work branch is") {
		t.Errorf("reviewer's push: %+v", v)
	}
}
