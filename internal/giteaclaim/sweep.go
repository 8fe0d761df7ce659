package giteaclaim

import (
	"context"
	"fmt"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// ListRecords returns the claim records found in the bodies of the repository's issues
// and pull requests (open or closed) updated at or after since. Publishing or ending a
// record rewrites the body, so every record still in force was written after now minus
// the longest claim lifetime: that is the since a sweep passes. Bodies whose claim block
// cannot be read are skipped (they are nobody's record; a claim on them fails closed).
func (c *Client) ListRecords(ctx context.Context, repository string, since time.Time) ([]claim.PublishedRecord, error) {
	owner, name, err := splitRepo(repository)
	if err != nil {
		return nil, err
	}
	sdk := c.SDK(ctx)
	issues, err := listAll(repoPath(owner, name)+"/issues", func(o gitea.ListOptions) ([]*gitea.Issue, *gitea.Response, error) {
		return sdk.ListRepoIssues(owner, name, gitea.ListIssueOption{ListOptions: o, State: gitea.StateAll, Since: since})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the claim records of %s: %w", repository, err)
	}
	var out []claim.PublishedRecord
	for _, is := range issues {
		if is == nil {
			continue
		}
		kind := claim.KindIssue
		if is.PullRequest != nil {
			kind = claim.KindPullRequest
		}
		t := claim.Target{Repository: repository, Kind: kind, Number: is.Index}
		rec, err := ParseBody(is.Body, t) // nil for a record about another item
		if err != nil || rec == nil {
			continue
		}
		out = append(out, claim.PublishedRecord{Target: t, Record: *rec})
	}
	return out, nil
}
