package giteaclaim

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"code.gitea.io/sdk/gitea"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// ReadTarget reads what Gitea says about one issue or pull request at one
// moment: every mutable fact a claim decision is pinned to or checks, as the
// [claim.TargetState] the decisions take. Nothing in it refers to the Gitea
// SDK. t names the item; its HeadSHA is ignored. The fields are filled so:
//
//   - Target: the item asked for, with HeadSHA set to the pull request's
//     current head (empty for issues).
//   - State is "open" or "closed" (a merged pull request is "closed");
//     Merged, Draft, HeadBranch are the pull request's (zero for issues).
//   - BaseBranch is the branch a pull request targets, for an issue the
//     repository's default branch (repository metadata, cached for the
//     client's repository cache TTL); ParityRevision is that branch's current
//     head commit, read fresh every time (for a pull request Gitea reports it
//     with the pull request itself, read from the git repository).
//   - Pushers are the pull request's author, every account its timeline
//     records pushing to it (pull_push events; a push by a deleted account
//     counts in UnattributedPushes), the accounts behind its commits (author
//     or committer, as Gitea maps commit e-mails to accounts) and behind every
//     Co-authored-by trailer of their messages (each e-mail mapped to the
//     account owning it verified, through the administrator e-mail search);
//     UnmappedCommitEmails are the commit and co-author e-mails no account
//     owns, and trailers whose e-mail cannot be read. Both sorted, unique,
//     empty for issues.
//   - Merged pull requests carry MergedBy and MergeCommit.
//   - Facts only a holder's re-check uses are read only while the body holds
//     a claim record in force (whoever's it is): for an open, approved pull
//     request ParityParents, the base head's parents (a merge in flight);
//     for an issue ReferencingPulls, the pull requests the issue's timeline
//     shows as cross-references (pull_ref: a pull request whose title or body
//     mentions the issue), with their author and creation time (an author's
//     completion). Without a record in force nobody's completion can be due,
//     and validation and claim decisions read neither.
//   - Reviews are the submitted reviews, oldest first (pending drafts and bare
//     review requests are left out). Reviewed is set when one does not
//     approve (dismissed or not), Approved when an approval is neither
//     dismissed nor stale, ChangesRequested when a change request is neither.
//   - Labels and Assignees are sorted; Dependencies are the items t depends
//     on, in the order Gitea lists them.
//   - ClaimRecord is the claim record in the body (nil when there is none);
//     RecordVersion is the issue's content_version at the read, which a
//     guarded claim write is checked against, and RecordBody the body itself
//     (what such a write goes over).
//   - The Lease fields are not Gitea's and stay zero.
//
// On the happy path that is three requests for an issue (the issue, its
// dependencies, the default branch's head) and six for a pull request (the issue,
// dependencies, timeline, pull request, commits, reviews), plus one per
// Co-authored-by e-mail.
//
// The kind must match what Gitea holds under that number (ErrKindMismatch
// otherwise); a malformed claim block is an error wrapping ErrMalformedRecord.
func (c *Client) ReadTarget(ctx context.Context, t claim.Target) (claim.TargetState, error) {
	t = itemOf(t)
	owner, name, err := validateTarget(t)
	if err != nil {
		return claim.TargetState{}, err
	}
	kind, number := t.Kind, t.Number
	// The issue, its dependencies and the repository's branch or the pull request are
	// independent reads: they run concurrently, each with its own SDK client.
	var (
		wg                               sync.WaitGroup
		is                               *rawIssue
		issueErr, depErr, sideErr, tlErr error
		timeline                         []timelineEvent
		deps                             []claim.DependencyEdge
		pull                             claim.TargetState
	)
	wg.Go(func() { is, issueErr = c.readIssue(ctx, t) })
	wg.Go(func() { deps, depErr = c.dependencies(c.SDK(ctx), owner, name, number) })
	if kind == claim.KindIssue {
		wg.Go(func() {
			if pull.BaseBranch, sideErr = c.defaultBranch(ctx, owner, name); sideErr == nil && pull.BaseBranch != "" {
				pull.ParityRevision, sideErr = c.branchHead(ctx, owner, name, pull.BaseBranch)
			}
		})
	} else {
		wg.Go(func() { timeline, tlErr = c.readTimeline(ctx, owner, name, number) })
		wg.Go(func() { sideErr = c.readPull(ctx, owner, name, number, &pull) })
	}
	wg.Wait()
	if issueErr != nil {
		return claim.TargetState{}, issueErr
	}
	if depErr != nil {
		return claim.TargetState{}, fmt.Errorf("reading %s: %w", t, depErr)
	}
	if sideErr != nil {
		return claim.TargetState{}, fmt.Errorf("reading %s: %w", t, sideErr)
	}
	st := pull
	st.Target = t
	st.Target.HeadSHA = pull.Target.HeadSHA
	st.State = is.State
	st.Author = is.User.Login
	st.Assignees = sortedUnique(is.assigneeLogins())
	st.RecordVersion = *is.ContentVersion
	st.RecordBody = is.Body
	st.Title = is.Title
	st.Dependencies = deps
	for _, l := range is.Labels {
		st.Labels = append(st.Labels, l.Name)
	}
	st.Labels = sortedUnique(st.Labels)
	if st.ClaimRecord, err = ParseBody(is.Body, t); err != nil {
		return claim.TargetState{}, fmt.Errorf("%s: %w", t, err)
	}
	held := st.ClaimRecord.InForce(c.now())
	if kind == claim.KindIssue && held {
		timeline, tlErr = c.readTimeline(ctx, owner, name, number)
	}
	if tlErr != nil {
		return claim.TargetState{}, fmt.Errorf("reading %s: timeline: %w", t, tlErr)
	}
	facts := factsOf(timeline)
	if kind == claim.KindIssue {
		st.ReferencingPulls = facts.referencing
		return st, nil
	}
	st.Pushers = sortedUnique(append(st.Pushers, facts.pushers...))
	st.UnattributedPushes = facts.unattributed
	if st.ParityRevision == "" && st.BaseBranch != "" {
		// Gitea leaves the base head out when it could not read it with the pull request.
		if st.ParityRevision, err = c.branchHead(ctx, owner, name, st.BaseBranch); err != nil {
			return claim.TargetState{}, fmt.Errorf("reading %s: %w", t, err)
		}
	}
	if held && st.Approved && !st.Merged && st.State == claim.StateOpen && st.ParityRevision != "" {
		// The merger's target: a merge in flight shows as a base head whose parents
		// include the pull request's head.
		cm, resp, err := c.SDK(ctx).GetSingleCommit(owner, name, st.ParityRevision)
		if err != nil {
			return claim.TargetState{}, fmt.Errorf("reading %s: base head %s: %w", t, st.ParityRevision,
				sdkErr("GET", repoPath(owner, name)+"/git/commits/"+url.PathEscape(st.ParityRevision), resp, err))
		}
		for _, p := range cm.Parents {
			if p != nil && p.SHA != "" {
				st.ParityParents = append(st.ParityParents, p.SHA)
			}
		}
	}
	return st, nil
}

// branchHead reads the current head commit of a branch.
func (c *Client) branchHead(ctx context.Context, owner, name, branch string) (string, error) {
	br, resp, err := c.SDK(ctx).GetRepoBranch(owner, name, branch)
	if err != nil {
		return "", fmt.Errorf("base branch %q: %w", branch,
			sdkErr("GET", repoPath(owner, name)+"/branches/"+url.PathEscape(branch), resp, err))
	}
	if br.Commit == nil {
		return "", nil
	}
	return br.Commit.ID, nil
}

// readPull fills the pull-request-only fields (the head in st.Target.HeadSHA).
func (c *Client) readPull(ctx context.Context, owner, name string, number int64, st *claim.TargetState) error {
	pullPath := fmt.Sprintf("%s/pulls/%d", repoPath(owner, name), number)
	var (
		wg             sync.WaitGroup
		pr             *gitea.PullRequest
		prErr, listErr error
		commits        []*gitea.Commit
		reviews        []*gitea.PullReview
	)
	wg.Go(func() {
		var resp *gitea.Response
		var err error
		if pr, resp, err = c.SDK(ctx).GetPullRequest(owner, name, number); err != nil {
			prErr = sdkErr("GET", pullPath, resp, err)
		}
	})
	wg.Go(func() {
		sdk := c.SDK(ctx)
		if commits, listErr = listPullCommits(sdk, owner, name, number, pullPath); listErr != nil {
			return
		}
		reviews, listErr = listPullReviews(sdk, owner, name, number, pullPath)
	})
	wg.Wait()
	if prErr != nil {
		return prErr
	}
	if listErr != nil {
		return listErr
	}
	st.Merged = pr.HasMerged
	if pr.HasMerged {
		if pr.MergedBy != nil {
			st.MergedBy = pr.MergedBy.UserName
		}
		if pr.MergedCommitID != nil {
			st.MergeCommit = *pr.MergedCommitID
		}
	}
	st.Draft = pr.Draft
	if pr.Head != nil {
		st.Target.HeadSHA = pr.Head.Sha
		st.HeadBranch = pr.Head.Ref
	}
	if pr.Base != nil {
		st.BaseBranch = pr.Base.Ref
		// Gitea reads the base branch's head from the git repository for this answer.
		st.ParityRevision = pr.Base.Sha
	}
	pushers := []string{}
	if pr.Poster != nil && pr.Poster.UserName != "" {
		pushers = append(pushers, pr.Poster.UserName)
	}
	commitPushers, unmapped, err := c.commitAccounts(ctx, commits)
	if err != nil {
		return err
	}
	pushers = append(pushers, commitPushers...)
	st.Pushers = sortedUnique(pushers)
	st.UnmappedCommitEmails = sortedUnique(unmapped)

	applyReviews(st, reviews)
	return nil
}

// commitAccounts names the accounts behind commits: each commit's author and committer as
// Gitea maps their e-mails, and every Co-authored-by trailer's e-mail mapped to the
// account owning it. unmapped are the e-mails no account owns (and unreadable trailers):
// one that maps to none makes independence unprovable.
func (c *Client) commitAccounts(ctx context.Context, commits []*gitea.Commit) (accounts, unmapped []string, err error) {
	var coAuthors []string
	for _, cm := range commits {
		if cm == nil {
			continue
		}
		var authorEmail, committerEmail string
		if cm.RepoCommit != nil {
			emails, unreadable := CoAuthors(cm.RepoCommit.Message)
			coAuthors = append(coAuthors, emails...)
			unmapped = append(unmapped, unreadable...)
			if cm.RepoCommit.Author != nil {
				authorEmail = cm.RepoCommit.Author.Email
			}
			if cm.RepoCommit.Committer != nil {
				committerEmail = cm.RepoCommit.Committer.Email
			}
		}
		for _, who := range []struct {
			user  *gitea.User
			email string
		}{{cm.Author, authorEmail}, {cm.Committer, committerEmail}} {
			switch {
			case who.user != nil && who.user.UserName != "":
				accounts = append(accounts, who.user.UserName)
			case who.email != "":
				unmapped = append(unmapped, strings.ToLower(who.email))
			}
		}
	}
	for _, email := range sortedUnique(coAuthors) {
		login, err := c.emailAccount(ctx, email)
		if err != nil {
			return nil, nil, err
		}
		if login == "" {
			unmapped = append(unmapped, email)
			continue
		}
		accounts = append(accounts, login)
	}
	return accounts, unmapped, nil
}

// applyReviews records the submitted reviews and what they make of the pull request:
// Reviewed, Approved, ChangesRequested.
func applyReviews(st *claim.TargetState, reviews []*gitea.PullReview) {
	for _, rv := range reviews {
		if rv == nil {
			continue
		}
		state := string(rv.State)
		if state != claim.ReviewApproved && state != claim.ReviewRequestChanges && state != claim.ReviewComment {
			continue // pending drafts and review requests are not reviews yet
		}
		r := claim.Review{ID: rv.ID, State: state, CommitID: rv.CommitID, Stale: rv.Stale,
			Dismissed: rv.Dismissed, Official: rv.Official}
		if rv.Reviewer != nil {
			r.Reviewer = rv.Reviewer.UserName
		}
		st.Reviews = append(st.Reviews, r)
		current := !rv.Dismissed && !rv.Stale
		switch state {
		case claim.ReviewApproved:
			st.Approved = st.Approved || current
		case claim.ReviewRequestChanges:
			st.Reviewed = true
			st.ChangesRequested = st.ChangesRequested || current
		default:
			st.Reviewed = true
		}
	}
}

// listPullCommits lists every commit of a pull request.
func listPullCommits(sdk *gitea.Client, owner, name string, number int64, pullPath string) ([]*gitea.Commit, error) {
	return listAll(pullPath+"/commits", func(o gitea.ListOptions) ([]*gitea.Commit, *gitea.Response, error) {
		return sdk.ListPullRequestCommits(owner, name, number, gitea.ListPullRequestCommitsOptions{ListOptions: o})
	})
}

// listPullReviews lists every review of a pull request.
func listPullReviews(sdk *gitea.Client, owner, name string, number int64, pullPath string) ([]*gitea.PullReview, error) {
	return listAll(pullPath+"/reviews", func(o gitea.ListOptions) ([]*gitea.PullReview, *gitea.Response, error) {
		return sdk.ListPullReviews(owner, name, number, gitea.ListPullReviewsOptions{ListOptions: o})
	})
}

// dependencies lists the items the issue depends on.
func (c *Client) dependencies(sdk *gitea.Client, owner, name string, number int64) ([]claim.DependencyEdge, error) {
	deps, err := listAll(issuePath(owner, name, number)+"/dependencies", func(o gitea.ListOptions) ([]*gitea.Issue, *gitea.Response, error) {
		return sdk.ListIssueDependencies(owner, name, number, gitea.ListIssueDependenciesOptions{ListOptions: o})
	})
	if err != nil {
		return nil, err
	}
	var out []claim.DependencyEdge
	for _, d := range deps {
		if d == nil {
			continue
		}
		dep := claim.DependencyEdge{Number: d.Index, State: string(d.State), PullRequest: d.PullRequest != nil}
		if d.Repository != nil {
			dep.Repository = d.Repository.FullName
			if dep.Repository == "" && d.Repository.Owner != "" {
				dep.Repository = d.Repository.Owner + "/" + d.Repository.Name
			}
		}
		out = append(out, dep)
	}
	return out, nil
}

// listAll reads every page of a paged listing at path (for error messages).
func listAll[T any](path string, page func(gitea.ListOptions) ([]T, *gitea.Response, error)) ([]T, error) {
	var out []T
	for n := 1; ; n++ {
		items, resp, err := page(gitea.ListOptions{Page: n, PageSize: listPageSize})
		if err != nil {
			return nil, sdkErr("GET", path, resp, err)
		}
		out = append(out, items...)
		if !morePages(resp, len(items), len(out), n) {
			return out, nil
		}
	}
}

// morePages decides whether a paged listing continues after page, given the
// items seen so far: never after an empty page; while fewer than the
// advertised total (X-Total-Count) were seen; else up to the last page the
// Link header names; else while pages come back full.
func morePages(resp *gitea.Response, got, seen, page int) bool {
	if got == 0 || resp == nil || resp.Response == nil {
		return false
	}
	if total, err := strconv.Atoi(resp.Header.Get("X-Total-Count")); err == nil {
		return seen < total
	}
	if resp.LastPage > 0 {
		return page < resp.LastPage
	}
	return got == listPageSize
}

// repoPath is the API path of a repository.
func repoPath(owner, name string) string {
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name)
}

// sortedUnique sorts and de-duplicates, dropping empty strings.
func sortedUnique(in []string) []string {
	out := slices.DeleteFunc(slices.Clone(in), func(s string) bool { return s == "" })
	slices.Sort(out)
	return slices.Compact(out)
}
