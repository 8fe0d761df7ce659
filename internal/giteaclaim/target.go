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
)

// TargetState is what Gitea says about an issue or pull request at one
// moment: every mutable fact a claim decision is pinned to or checks. It is a
// plain value; nothing in it refers to the Gitea SDK.
type TargetState struct {
	// Target is the item read (repository "owner/name", kind, number).
	Target Target
	// State is "open" or "closed" (a merged pull request is "closed").
	State string
	// Merged is true for a merged pull request.
	Merged bool
	// Draft is true for a pull request marked as work in progress.
	Draft bool
	// Author is the login that opened the issue or pull request.
	Author string
	// HeadSHA is the pull request's head commit (empty for issues).
	HeadSHA string
	// HeadBranch is the pull request's head branch name (empty for issues).
	HeadBranch string
	// BaseBranch is the branch a pull request targets; for an issue it is the
	// repository's default branch.
	BaseBranch string
	// BaseSHA is the current head commit of BaseBranch: the parity revision.
	BaseSHA string
	// Pushers are the logins behind the pull request's commits (author or
	// committer, as Gitea maps commit e-mails to accounts) plus the pull
	// request's author; sorted, unique. Empty for issues.
	Pushers []string
	// UnmappedCommitEmails are commit author/committer e-mails Gitea could not
	// map to an account; sorted, unique. A caller enforcing independence
	// cannot prove who these are.
	UnmappedCommitEmails []string
	// Reviews are the submitted reviews of a pull request, oldest first
	// (pending drafts and bare review requests are left out).
	Reviews []Review
	// Reviewed is true when at least one submitted review does not approve
	// (a comment or a change request, dismissed or not).
	Reviewed bool
	// Approved is true when at least one approval is neither dismissed nor
	// stale (made on an older head).
	Approved bool
	// ChangesRequested is true when a change request is neither dismissed nor
	// stale.
	ChangesRequested bool
	// Labels are the label names, sorted.
	Labels []string
	// Assignees are the assigned logins, sorted.
	Assignees []string
	// Dependencies are the items that block this one ("depends on"), in the
	// order Gitea lists them.
	Dependencies []Dependency
	// Claim is the claim record in the body (nil when there is none).
	Claim *Record
	// ContentVersion is the issue's content_version at the time of the read;
	// a claim write guarded by it fails if the body moved since.
	ContentVersion int64
}

// Review is one submitted pull request review.
type Review struct {
	// ID is Gitea's review id.
	ID int64
	// Reviewer is the reviewer's login.
	Reviewer string
	// State is Gitea's review state: APPROVED, REQUEST_CHANGES or COMMENT.
	State string
	// CommitID is the head commit the review was made on.
	CommitID string
	// Stale is true when the pull request head moved after the review.
	Stale bool
	// Dismissed is true when the review was dismissed.
	Dismissed bool
	// Official is true when the review counts towards required approvals.
	Official bool
}

// Review states as Gitea reports them.
const (
	// ReviewApproved approves the pull request.
	ReviewApproved = string(gitea.ReviewStateApproved)
	// ReviewRequestChanges asks for changes.
	ReviewRequestChanges = string(gitea.ReviewStateRequestChanges)
	// ReviewComment comments without a verdict.
	ReviewComment = string(gitea.ReviewStateComment)
)

// Dependency is an item the target depends on.
type Dependency struct {
	// Repository is the dependency's "owner/name".
	Repository string
	// Number is its issue or pull request number.
	Number int64
	// State is "open" or "closed".
	State string
	// PullRequest is true when the dependency is a pull request.
	PullRequest bool
}

// ReadTarget reads the state of one issue or pull request. The kind must
// match what Gitea holds under that number (ErrKindMismatch otherwise); a
// malformed claim block is an error wrapping ErrMalformedRecord.
func (c *Client) ReadTarget(ctx context.Context, repo string, kind Kind, number int64) (TargetState, error) {
	t := Target{Repository: repo, Kind: kind, Number: number}
	owner, name, err := t.validate()
	if err != nil {
		return TargetState{}, err
	}
	// The issue, its dependencies and the repository or pull request are independent
	// reads: they run concurrently (each with its own SDK client), then the base branch
	// head is read once its name is known.
	var (
		wg                        sync.WaitGroup
		is                        *rawIssue
		issueErr, depErr, sideErr error
		deps                      []Dependency
		pull                      TargetState
		defaultBranch             string
	)
	wg.Go(func() { is, issueErr = c.readIssue(ctx, t) })
	wg.Go(func() { deps, depErr = c.dependencies(c.SDK(ctx), owner, name, number) })
	wg.Go(func() {
		sdk := c.SDK(ctx)
		if kind == KindIssue {
			repoInfo, resp, err := sdk.GetRepo(owner, name)
			if err != nil {
				sideErr = sdkErr("GET", repoPath(owner, name), resp, err)
				return
			}
			defaultBranch = repoInfo.DefaultBranch
			return
		}
		sideErr = c.readPull(ctx, owner, name, number, &pull)
	})
	wg.Wait()
	if issueErr != nil {
		return TargetState{}, issueErr
	}
	if depErr != nil {
		return TargetState{}, fmt.Errorf("reading %s: %w", t, depErr)
	}
	if sideErr != nil {
		return TargetState{}, fmt.Errorf("reading %s: %w", t, sideErr)
	}
	st := pull
	st.Target = t
	st.State = is.State
	st.Author = is.User.Login
	st.Assignees = sortedUnique(is.assigneeLogins())
	st.ContentVersion = *is.ContentVersion
	st.Dependencies = deps
	if kind == KindIssue {
		st.BaseBranch = defaultBranch
	}
	for _, l := range is.Labels {
		st.Labels = append(st.Labels, l.Name)
	}
	st.Labels = sortedUnique(st.Labels)
	if st.Claim, err = ParseBody(is.Body); err != nil {
		return TargetState{}, fmt.Errorf("%s: %w", t, err)
	}
	sdk := c.SDK(ctx)
	if st.BaseBranch != "" {
		br, resp, err := sdk.GetRepoBranch(owner, name, st.BaseBranch)
		if err != nil {
			return TargetState{}, fmt.Errorf("reading %s: base branch %q: %w", t, st.BaseBranch,
				sdkErr("GET", repoPath(owner, name)+"/branches/"+url.PathEscape(st.BaseBranch), resp, err))
		}
		if br.Commit != nil {
			st.BaseSHA = br.Commit.ID
		}
	}
	return st, nil
}

// readPull fills the pull-request-only fields.
func (c *Client) readPull(ctx context.Context, owner, name string, number int64, st *TargetState) error {
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
	st.Draft = pr.Draft
	if pr.Head != nil {
		st.HeadSHA = pr.Head.Sha
		st.HeadBranch = pr.Head.Ref
	}
	if pr.Base != nil {
		st.BaseBranch = pr.Base.Ref
	}
	pushers := []string{}
	if pr.Poster != nil && pr.Poster.UserName != "" {
		pushers = append(pushers, pr.Poster.UserName)
	}
	var unmapped []string
	for _, cm := range commits {
		if cm == nil {
			continue
		}
		var authorEmail, committerEmail string
		if cm.RepoCommit != nil {
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
				pushers = append(pushers, who.user.UserName)
			case who.email != "":
				unmapped = append(unmapped, strings.ToLower(who.email))
			}
		}
	}
	st.Pushers = sortedUnique(pushers)
	st.UnmappedCommitEmails = sortedUnique(unmapped)

	for _, rv := range reviews {
		if rv == nil {
			continue
		}
		state := string(rv.State)
		if state != ReviewApproved && state != ReviewRequestChanges && state != ReviewComment {
			continue // pending drafts and review requests are not reviews yet
		}
		r := Review{ID: rv.ID, State: state, CommitID: rv.CommitID, Stale: rv.Stale,
			Dismissed: rv.Dismissed, Official: rv.Official}
		if rv.Reviewer != nil {
			r.Reviewer = rv.Reviewer.UserName
		}
		st.Reviews = append(st.Reviews, r)
		current := !rv.Dismissed && !rv.Stale
		switch state {
		case ReviewApproved:
			st.Approved = st.Approved || current
		case ReviewRequestChanges:
			st.Reviewed = true
			st.ChangesRequested = st.ChangesRequested || current
		default:
			st.Reviewed = true
		}
	}
	return nil
}

// listPullCommits lists every commit of a pull request.
func listPullCommits(sdk *gitea.Client, owner, name string, number int64, pullPath string) ([]*gitea.Commit, error) {
	var out []*gitea.Commit
	for page := 1; ; page++ {
		commits, resp, err := sdk.ListPullRequestCommits(owner, name, number, gitea.ListPullRequestCommitsOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: listPageSize},
		})
		if err != nil {
			return nil, sdkErr("GET", pullPath+"/commits", resp, err)
		}
		out = append(out, commits...)
		if !morePages(resp, len(commits), len(out), page) {
			return out, nil
		}
	}
}

// listPullReviews lists every review of a pull request.
func listPullReviews(sdk *gitea.Client, owner, name string, number int64, pullPath string) ([]*gitea.PullReview, error) {
	var out []*gitea.PullReview
	for page := 1; ; page++ {
		reviews, resp, err := sdk.ListPullReviews(owner, name, number, gitea.ListPullReviewsOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: listPageSize},
		})
		if err != nil {
			return nil, sdkErr("GET", pullPath+"/reviews", resp, err)
		}
		out = append(out, reviews...)
		if !morePages(resp, len(reviews), len(out), page) {
			return out, nil
		}
	}
}

// dependencies lists the items the issue depends on.
func (c *Client) dependencies(sdk *gitea.Client, owner, name string, number int64) ([]Dependency, error) {
	var out []Dependency
	for page := 1; ; page++ {
		deps, resp, err := sdk.ListIssueDependencies(owner, name, number, gitea.ListIssueDependenciesOptions{
			ListOptions: gitea.ListOptions{Page: page, PageSize: listPageSize},
		})
		if err != nil {
			return nil, sdkErr("GET", issuePath(owner, name, number)+"/dependencies", resp, err)
		}
		for _, d := range deps {
			if d == nil {
				continue
			}
			dep := Dependency{Number: d.Index, State: string(d.State), PullRequest: d.PullRequest != nil}
			if d.Repository != nil {
				dep.Repository = d.Repository.FullName
				if dep.Repository == "" && d.Repository.Owner != "" {
					dep.Repository = d.Repository.Owner + "/" + d.Repository.Name
				}
			}
			out = append(out, dep)
		}
		if !morePages(resp, len(deps), len(out), page) {
			break
		}
	}
	return out, nil
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
