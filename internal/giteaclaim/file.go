package giteaclaim

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"code.gitea.io/sdk/gitea"
)

// FileCommit describes the repository state of a published file.
type FileCommit struct {
	// Path is the file's path in the repository.
	Path string
	// CommitSHA is the commit that wrote the content now on the default
	// branch: the new commit, or the last one that touched the file when the
	// content was already there.
	CommitSHA string
	// BlobSHA is the git blob id of the content.
	BlobSHA string
	// Changed is true when this call made a commit.
	Changed bool
}

// PublishFile makes content the content of path on the repository's default
// branch, creating or updating the file with a commit carrying message. When
// the file already holds exactly content nothing is written. An update is
// guarded by the blob id just read, so a concurrent change of the file fails
// the call instead of being overwritten.
func (c *Client) PublishFile(ctx context.Context, repo, path string, content []byte, message string) (FileCommit, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return FileCommit{}, err
	}
	path = strings.TrimPrefix(path, "/")
	if path == "" {
		return FileCommit{}, fmt.Errorf("%w: file path is empty", ErrInvalidArgument)
	}
	if message == "" {
		message = "Publish " + path
	}
	contentsPath := repoPath(owner, name) + "/contents/" + pathEscape(path)
	sdk := c.SDK(ctx)

	cur, resp, err := sdk.GetContents(owner, name, "", path)
	apiErr := sdkErr("GET", contentsPath, resp, err)
	switch {
	case err == nil:
		if cur.Type != "file" {
			// A symlink or submodule where the file belongs: replaced by the file.
			return c.replaceWithFile(ctx, owner, name, path, content, message, []*gitea.ChangeFileOperation{{Operation: "delete", Path: path, SHA: cur.SHA}})
		}
		existing, err := decodeContent(cur)
		if err != nil {
			return FileCommit{}, fmt.Errorf("reading %s in %s: %w", path, repo, err)
		}
		if bytes.Equal(existing, content) {
			out := FileCommit{Path: path, BlobSHA: cur.SHA}
			if cur.LastCommitSha != nil {
				out.CommitSHA = *cur.LastCommitSha
			}
			return out, nil
		}
		fr, resp, err := sdk.UpdateFile(owner, name, path, gitea.UpdateFileOptions{
			FileOptions: gitea.FileOptions{Message: message},
			SHA:         cur.SHA,
			Content:     base64.StdEncoding.EncodeToString(content),
		})
		if err != nil {
			return FileCommit{}, fmt.Errorf("updating %s in %s: %w", path, repo, sdkErr("PUT", contentsPath, resp, err))
		}
		return fileCommit(path, fr)
	case errors.Is(apiErr, ErrNotFound):
		fr, resp, err := sdk.CreateFile(owner, name, path, gitea.CreateFileOptions{
			FileOptions: gitea.FileOptions{Message: message},
			Content:     base64.StdEncoding.EncodeToString(content),
		})
		if err != nil {
			return FileCommit{}, fmt.Errorf("creating %s in %s: %w", path, repo, sdkErr("POST", contentsPath, resp, err))
		}
		return fileCommit(path, fr)
	case resp != nil && resp.Response != nil && resp.StatusCode == http.StatusOK:
		// The SDK could not decode a single file: the path is a directory (a merged pull
		// request may have put one there). The file replaces it.
		ops, err := c.deletionsUnder(ctx, owner, name, path)
		if err != nil {
			return FileCommit{}, fmt.Errorf("%s in %s is not a file, and what is there cannot be read: %w", path, repo, err)
		}
		return c.replaceWithFile(ctx, owner, name, path, content, message, ops)
	default:
		return FileCommit{}, fmt.Errorf("reading %s in %s: %w", path, repo, apiErr)
	}
}

// deletionsUnder lists a deletion of every file under dir on the default branch.
func (c *Client) deletionsUnder(ctx context.Context, owner, name, dir string) ([]*gitea.ChangeFileOperation, error) {
	sdk := c.SDK(ctx)
	repo, resp, err := sdk.GetRepo(owner, name)
	if err != nil {
		return nil, sdkErr("GET", repoPath(owner, name), resp, err)
	}
	var ops []*gitea.ChangeFileOperation
	for page := 1; ; page++ {
		tree, resp, err := sdk.GetTrees(owner, name, gitea.ListTreeOptions{Ref: repo.DefaultBranch, Recursive: true,
			ListOptions: gitea.ListOptions{Page: page, PageSize: listPageSize}})
		if err != nil {
			return nil, sdkErr("GET", repoPath(owner, name)+"/git/trees/"+repo.DefaultBranch, resp, err)
		}
		for _, e := range tree.Entries {
			if e.Type != "tree" && strings.HasPrefix(e.Path, dir+"/") {
				ops = append(ops, &gitea.ChangeFileOperation{Operation: "delete", Path: e.Path, SHA: e.SHA})
			}
		}
		if !tree.Truncated || len(tree.Entries) == 0 {
			break
		}
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("%w: nothing to delete under %s", ErrInvalidArgument, dir)
	}
	return ops, nil
}

// replaceWithFile removes what stands at path (deletions, one commit) and then creates
// the file there (a second commit): Gitea cannot put a file where a directory is in one
// change.
func (c *Client) replaceWithFile(ctx context.Context, owner, name, path string, content []byte, message string, deletions []*gitea.ChangeFileOperation) (FileCommit, error) {
	sdk := c.SDK(ctx)
	contentsPath := repoPath(owner, name) + "/contents"
	if _, resp, err := sdk.ChangeFiles(owner, name, gitea.ChangeFilesOptions{Files: deletions, Message: "Remove what stands where " + path + " belongs"}); err != nil {
		return FileCommit{}, fmt.Errorf("clearing %s: %w", path, sdkErr("POST", contentsPath, resp, err))
	}
	fr, resp, err := sdk.CreateFile(owner, name, path, gitea.CreateFileOptions{
		FileOptions: gitea.FileOptions{Message: message},
		Content:     base64.StdEncoding.EncodeToString(content),
	})
	if err != nil {
		return FileCommit{}, fmt.Errorf("creating %s: %w", path, sdkErr("POST", contentsPath+"/"+pathEscape(path), resp, err))
	}
	return fileCommit(path, fr)
}

// decodeContent returns the bytes of a file read through the contents API.
func decodeContent(cr *gitea.ContentsResponse) ([]byte, error) {
	if cr.Content == nil {
		return nil, errors.New("contents API returned no content")
	}
	if cr.Encoding != nil && *cr.Encoding != "base64" {
		return nil, fmt.Errorf("contents API returned encoding %q", *cr.Encoding)
	}
	return base64.StdEncoding.DecodeString(*cr.Content)
}

// fileCommit extracts the commit and blob of a contents API write.
func fileCommit(path string, fr *gitea.FileResponse) (FileCommit, error) {
	out := FileCommit{Path: path, Changed: true}
	if fr != nil && fr.Commit != nil {
		out.CommitSHA = fr.Commit.SHA
	}
	if fr != nil && fr.Content != nil {
		out.BlobSHA = fr.Content.SHA
	}
	if out.CommitSHA == "" {
		return FileCommit{}, fmt.Errorf("writing %s: %w: Gitea returned no commit", path, ErrUnverified)
	}
	return out, nil
}

// pathEscape escapes each segment of a slash-separated path.
func pathEscape(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// ReadFile returns the content of path on the repository's default branch. A missing
// file is an error wrapping ErrNotFound.
func (c *Client) ReadFile(ctx context.Context, repo, path string) ([]byte, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	path = strings.TrimPrefix(path, "/")
	if path == "" {
		return nil, fmt.Errorf("%w: file path is empty", ErrInvalidArgument)
	}
	cur, resp, err := c.SDK(ctx).GetContents(owner, name, "", path)
	if err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", path, repo,
			sdkErr("GET", repoPath(owner, name)+"/contents/"+pathEscape(path), resp, err))
	}
	if cur.Type != "file" {
		return nil, fmt.Errorf("%w: %s in %s is a %s, not a file", ErrInvalidArgument, path, repo, cur.Type)
	}
	b, err := decodeContent(cur)
	if err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", path, repo, err)
	}
	return b, nil
}
