package giteaclaim

import (
	"context"
	"errors"
	"fmt"

	"github.com/giteatools/fleet-controller/internal/forge"
)

// The reads behind the Ready conditions of GiteaServer and GiteaRepository
// (internal/forge decides on them).

// ServerFacts reads the server's version and the account c's token authenticates as. A
// failed read is recorded as the fact it is (no answer, or the token refused); the later
// reads are then not made.
func (c *Client) ServerFacts(ctx context.Context) forge.ServerFacts {
	var f forge.ServerFacts
	sdk := c.SDK(ctx)
	version, resp, err := sdk.ServerVersion()
	if err != nil {
		describe(&f.Unreachable, &f.Refused, &f.RefusedDetail, sdkErr("GET", "/version", resp, err))
		return f
	}
	me, resp, err := sdk.GetMyUserInfo()
	if err != nil {
		describe(&f.Unreachable, &f.Refused, &f.RefusedDetail, sdkErr("GET", "/user", resp, err))
		return f
	}
	f.Version, f.Login = version, me.UserName
	return f
}

// describe files a failed read under "refused" (401/403) or "no usable answer" (anything
// else, a 404 included: a server that has no /version or /user is not Gitea's API).
func describe(unreachable *string, refused *bool, detail *string, err error) {
	if errors.Is(err, ErrForbidden) {
		*refused, *detail = true, err.Error()
		return
	}
	*unreachable = err.Error()
}

// RepositoryFacts resolves a repository, by its ID once it has one (so a rename in Gitea
// changes nothing), else by owner and name, and reads its hardening setup with the worker
// identities logins. f arrives with the server's part filled in.
func (c *Client) RepositoryFacts(ctx context.Context, f forge.RepositoryFacts, id int64, owner, name string, logins []string) forge.RepositoryFacts {
	sdk := c.SDK(ctx)
	var (
		path string
		err  error
	)
	if id > 0 {
		path = fmt.Sprintf("/repositories/%d", id)
		repo, resp, e := sdk.GetRepoByID(id)
		err = sdkErr("GET", path, resp, e)
		if err == nil {
			f.ID, f.FullName = repo.ID, repo.FullName
		}
	} else {
		path = repoPath(owner, name)
		repo, resp, e := sdk.GetRepo(owner, name)
		err = sdkErr("GET", path, resp, e)
		if err == nil {
			f.ID, f.FullName = repo.ID, repo.FullName
		}
	}
	switch {
	case errors.Is(err, ErrNotFound):
		f.NotFound = true
		if id > 0 {
			f.NotFoundDetail = fmt.Sprintf("the repository with ID %d, which this object resolved to, no longer exists", id)
		} else {
			f.NotFoundDetail = fmt.Sprintf("Gitea has no repository %s/%s the controller's account can see", owner, name)
		}
		return f
	case err != nil:
		f.Unreachable = err.Error()
		return f
	}
	setup, err := c.Setup(ctx, f.FullName, logins)
	if err != nil {
		f.SetupProblem = err.Error()
		return f
	}
	f.Setup = &setup
	return f
}
