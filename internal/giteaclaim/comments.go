package giteaclaim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// The comment budget's read: how many comments a worker wrote on one item since its claim
// began (the gateway and the claim controller both count against claim.CommentBudget).

// CommentsBy counts the comments login wrote on item t (an issue or pull request) that were
// created or edited at or after since, and their total length in bytes.
func (c *Client) CommentsBy(ctx context.Context, t claim.Target, login string, since time.Time) (count, size int, err error) {
	owner, name, err := validateTarget(t)
	if err != nil {
		return 0, 0, err
	}
	sdk := c.SDK(ctx)
	path := fmt.Sprintf("%s/issues/%d/comments", repoPath(owner, name), t.Number)
	comments, err := listAll(path, func(o gitea.ListOptions) ([]*gitea.Comment, *gitea.Response, error) {
		return sdk.ListIssueComments(owner, name, t.Number, gitea.ListIssueCommentOptions{ListOptions: o, Since: since})
	})
	if err != nil {
		return 0, 0, fmt.Errorf("listing the comments of %s: %w", t, err)
	}
	for _, cm := range comments {
		if cm != nil && cm.Poster != nil && strings.EqualFold(cm.Poster.UserName, login) {
			count++
			size += len(cm.Body)
		}
	}
	return count, size, nil
}
