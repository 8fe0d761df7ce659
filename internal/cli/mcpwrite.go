package cli

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"code.gitea.io/sdk/gitea"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
)

// An author without git commits through Gitea's contents API, which the gateway decides
// as a push to the branch the commit writes: the claim's work branch only. These tools
// find that branch, start it from the default branch with the first commit, and pick
// create or update by whether the file is there.

// addFileTools registers the tools that commit to the author's work branch.
func (t *mcpTools) addFileTools(s *mcp.Server) {
	addTool(s, &mcp.Tool{Name: "write_file", Annotations: writes(true, true), Description: "Commit a file (created, or replaced " +
		"whole) to your author claim's work branch, through the gateway, without git. The first commit starts the branch " +
		"from the default branch. Then open_pr opens the pull request from it."}, t.writeFile)
	addTool(s, &mcp.Tool{Name: "delete_file", Annotations: writes(true, true), Description: "Commit the deletion of a file " +
		"from your author claim's work branch, through the gateway."}, t.deleteFile)
}

// WriteFileInput is a file to commit.
type WriteFileInput struct {
	Path    string `json:"path" jsonschema:"file path from the repository root, such as docs/RELEASING.md"`
	Content string `json:"content" jsonschema:"the file's whole new content, as text"`
	Message string `json:"message,omitempty" jsonschema:"commit message (default: Update <path>); it may reference your claimed issue only"`
}

// DeleteFileInput is a file to delete.
type DeleteFileInput struct {
	Path    string `json:"path" jsonschema:"file path from the repository root"`
	Message string `json:"message,omitempty" jsonschema:"commit message (default: Delete <path>); it may reference your claimed issue only"`
}

// CommitOutput is a commit the gateway forwarded.
type CommitOutput struct {
	// Done is "created", "updated" or "deleted".
	Done string `json:"done"`
	// Path is the file.
	Path string `json:"path"`
	// Branch is the work branch the commit is on.
	Branch string `json:"branch"`
	// Commit is the new commit's id.
	Commit string `json:"commit"`
	// StartedBranch is true when this commit created the work branch.
	StartedBranch bool `json:"startedBranch,omitempty"`
}

// workBranchFile is where a file commit goes: the author claim's work branch and the
// repository, with the branch's state read through the gateway.
type workBranchFile struct {
	owner, name, branch string
	// base is the branch a first commit starts from ("" when the work branch exists).
	base string
	// sha is the file's blob id on the work branch ("" when it has none).
	sha string
	sdk *gitea.Client
	rr  *refusalRecorder
}

// fileTarget finds the caller's author claim and reads its work branch and the file.
func (t *mcpTools) fileTarget(ctx context.Context, path string) (*workBranchFile, error) {
	p, err := repoPath("path", path)
	if err != nil {
		return nil, err
	}
	for seg := range strings.SplitSeq(p, "/") {
		if url.PathEscape(seg) != seg {
			// The gateway matches unescaped paths only (docs/gateway.md).
			return nil, fmt.Errorf("path %q has a character that needs escaping in a URL: use letters, digits, '.', '-' and '_'", p)
		}
	}
	tc, err := t.authorClaim(ctx)
	if err != nil {
		return nil, err
	}
	f := &workBranchFile{branch: claim.WorkBranch(tc.Namespace, tc.Name)}
	f.owner, f.name, _ = strings.Cut(tc.Status.Capability.Repository, "/")
	if f.sdk, f.rr, err = t.gateway(ctx); err != nil {
		return nil, err
	}
	_, resp, err := f.sdk.GetRepoBranch(f.owner, f.name, f.branch)
	switch {
	case notFound(resp):
		repo, _, err := f.sdk.GetRepo(f.owner, f.name)
		if err != nil {
			return nil, fmt.Errorf("reading %s/%s: %w", f.owner, f.name, f.rr.typed(err))
		}
		f.base = repo.DefaultBranch
		return f, nil
	case err != nil:
		return nil, fmt.Errorf("reading your work branch %s: %w", f.branch, f.rr.typed(err))
	}
	c, resp, err := f.sdk.GetContents(f.owner, f.name, f.branch, p)
	switch {
	case notFound(resp):
	case err != nil:
		return nil, fmt.Errorf("reading %s on %s: %w", p, f.branch, f.rr.typed(err))
	case c.Type != "file":
		return nil, fmt.Errorf("%s on %s is a %s, not a file", p, f.branch, c.Type)
	default:
		f.sha = c.SHA
	}
	return f, nil
}

// authorClaim is the caller's active claim whose capability pushes: an author's.
func (t *mcpTools) authorClaim(ctx context.Context) (*fleetv1alpha1.TaskClaim, error) {
	open, err := openClaims(ctx, t.cfg.Client, t.cfg.Namespace, t.cfg.Worker)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(open, func(tc fleetv1alpha1.TaskClaim) bool {
		return tc.Status.Capability != nil && slices.Contains(tc.Status.Capability.Operations, claim.OpPushBranch)
	})
	if i < 0 {
		return nil, errors.New("no active author claim: only an author's claim (on an open issue) commits, to its work branch; claim the issue first")
	}
	return &open[i], nil
}

// notFound reports a 404 answer.
func notFound(resp *gitea.Response) bool {
	return resp != nil && resp.Response != nil && resp.StatusCode == http.StatusNotFound
}

// options are the commit's options: the work branch, started from the default branch by
// the first commit. Author, committer and dates are left to Gitea (the worker's account,
// now): the gateway refuses any other.
func (f *workBranchFile) options(message string) gitea.FileOptions {
	o := gitea.FileOptions{Message: message, BranchName: f.branch}
	if f.base != "" {
		o.BranchName, o.NewBranchName = f.base, f.branch
	}
	return o
}

// writeFile commits a file to the work branch: created when the branch has none there,
// else replaced.
func (t *mcpTools) writeFile(ctx context.Context, in WriteFileInput) (*CommitOutput, error) {
	f, err := t.fileTarget(ctx, in.Path)
	if err != nil {
		return nil, err
	}
	content := base64.StdEncoding.EncodeToString([]byte(in.Content))
	out := &CommitOutput{Path: in.Path, Branch: f.branch, StartedBranch: f.base != ""}
	var resp *gitea.FileResponse
	if f.sha == "" {
		out.Done = "created"
		opts := f.options(cmp.Or(in.Message, "Add "+in.Path))
		resp, _, err = f.sdk.CreateFile(f.owner, f.name, in.Path, gitea.CreateFileOptions{FileOptions: opts, Content: content})
	} else {
		out.Done = "updated"
		opts := f.options(cmp.Or(in.Message, "Update "+in.Path))
		resp, _, err = f.sdk.UpdateFile(f.owner, f.name, in.Path, gitea.UpdateFileOptions{FileOptions: opts, SHA: f.sha, Content: content})
	}
	if err != nil {
		return nil, f.rr.typed(err)
	}
	if resp.Commit != nil {
		out.Commit = resp.Commit.SHA
	}
	return out, nil
}

// deleteFile commits the deletion of a file from the work branch.
func (t *mcpTools) deleteFile(ctx context.Context, in DeleteFileInput) (*CommitOutput, error) {
	f, err := t.fileTarget(ctx, in.Path)
	if err != nil {
		return nil, err
	}
	if f.sha == "" {
		return nil, fmt.Errorf("%s is not on your work branch %s: nothing to delete", in.Path, f.branch)
	}
	_, err = f.sdk.DeleteFile(f.owner, f.name, in.Path, gitea.DeleteFileOptions{FileOptions: f.options(cmp.Or(in.Message, "Delete "+in.Path)), SHA: f.sha})
	if err != nil {
		return nil, f.rr.typed(err)
	}
	out := &CommitOutput{Done: "deleted", Path: in.Path, Branch: f.branch}
	if b, _, err := f.sdk.GetRepoBranch(f.owner, f.name, f.branch); err == nil && b.Commit != nil {
		out.Commit = b.Commit.ID
	}
	return out, nil
}
