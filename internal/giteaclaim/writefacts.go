package giteaclaim

import (
	"context"
	"fmt"
	"strings"

	"code.gitea.io/sdk/gitea"
)

// What the gateway reads from Gitea to decide a write beyond the target's state: the
// texts and files a merge carries onto the default branch, and the entry of the fleet's
// own directory a push is compared with.

// PullText reads a pull request's title and body, joined by a newline: the issues they
// name are the ones the pull request works on.
func (c *Client) PullText(ctx context.Context, repository string, number int64) (string, error) {
	owner, name, err := splitRepo(repository)
	if err != nil {
		return "", err
	}
	pr, resp, err := c.SDK(ctx).GetPullRequest(owner, name, number)
	if err != nil {
		return "", sdkErr("GET", fmt.Sprintf("%s/pulls/%d", repoPath(owner, name), number), resp, err)
	}
	return pr.Title + "\n" + pr.Body, nil
}

// PullCommitMessages reads the full message of every commit of a pull request.
func (c *Client) PullCommitMessages(ctx context.Context, repository string, number int64) ([]string, error) {
	owner, name, err := splitRepo(repository)
	if err != nil {
		return nil, err
	}
	sdk := c.SDK(ctx)
	path := fmt.Sprintf("%s/pulls/%d/commits", repoPath(owner, name), number)
	commits, err := listAll(path, func(o gitea.ListOptions) ([]*gitea.Commit, *gitea.Response, error) {
		return sdk.ListPullRequestCommits(owner, name, number, gitea.ListPullRequestCommitsOptions{ListOptions: o})
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(commits))
	for _, cm := range commits {
		if cm == nil || cm.RepoCommit == nil {
			return nil, fmt.Errorf("GET %s: a commit without its message", path)
		}
		out = append(out, cm.RepoCommit.Message)
	}
	return out, nil
}

// PullFiles reads the paths a pull request changes, the previous path of a renamed file
// included.
func (c *Client) PullFiles(ctx context.Context, repository string, number int64) ([]string, error) {
	owner, name, err := splitRepo(repository)
	if err != nil {
		return nil, err
	}
	sdk := c.SDK(ctx)
	path := fmt.Sprintf("%s/pulls/%d/files", repoPath(owner, name), number)
	files, err := listAll(path, func(o gitea.ListOptions) ([]*gitea.ChangedFile, *gitea.Response, error) {
		return sdk.ListPullRequestFiles(owner, name, number, gitea.ListPullRequestFilesOptions{ListOptions: o})
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if f == nil {
			continue
		}
		out = append(out, f.Filename)
		if f.PreviousFilename != "" {
			out = append(out, f.PreviousFilename)
		}
	}
	return out, nil
}

// RootEntry reads the entry called entry in the root tree of ref: its mode and object id,
// both "" when the root tree has no such entry.
func (c *Client) RootEntry(ctx context.Context, repository, ref, entry string) (mode, id string, err error) {
	owner, name, err := splitRepo(repository)
	if err != nil {
		return "", "", err
	}
	sdk := c.SDK(ctx)
	path := fmt.Sprintf("%s/git/trees/%s", repoPath(owner, name), ref)
	for page := 1; ; page++ {
		tree, resp, err := sdk.GetTrees(owner, name, gitea.ListTreeOptions{Ref: ref, ListOptions: gitea.ListOptions{Page: page, PageSize: listPageSize}})
		if err != nil {
			return "", "", sdkErr("GET", path, resp, err)
		}
		for _, e := range tree.Entries {
			if e.Path == entry {
				return strings.TrimLeft(e.Mode, "0"), strings.ToLower(e.SHA), nil
			}
		}
		if !tree.Truncated || len(tree.Entries) == 0 {
			return "", "", nil
		}
	}
}
