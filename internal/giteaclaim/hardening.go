package giteaclaim

import (
	"cmp"
	"context"
	"net/url"

	"code.gitea.io/sdk/gitea"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// The hardening check's read: the facts claim.CheckHardening decides on (default branch,
// branch protection, site administrators among the worker identities, Gitea's version).

// Setup reads what claim.CheckHardening decides on: the repository's default branch, its
// branch protection rules, and whether each of logins is a site administrator.
func (c *Client) Setup(ctx context.Context, repository string, logins []string) (claim.GiteaSetup, error) {
	owner, name, err := splitRepo(repository)
	if err != nil {
		return claim.GiteaSetup{}, err
	}
	sdk := c.SDK(ctx)
	repo, resp, err := sdk.GetRepo(owner, name)
	if err != nil {
		return claim.GiteaSetup{}, sdkErr("GET", repoPath(owner, name), resp, err)
	}
	rules, resp, err := sdk.ListBranchProtections(owner, name, gitea.ListBranchProtectionsOptions{})
	if err != nil {
		return claim.GiteaSetup{}, sdkErr("GET", repoPath(owner, name)+"/branch_protections", resp, err)
	}
	s := claim.GiteaSetup{DefaultBranch: repo.DefaultBranch, Workers: map[string]bool{}}
	version, resp, err := sdk.ServerVersion()
	if err != nil {
		return claim.GiteaSetup{}, sdkErr("GET", "/version", resp, err)
	}
	s.Version = version
	for _, r := range rules {
		if r == nil {
			continue
		}
		s.Rules = append(s.Rules, claim.BranchRule{Name: cmp.Or(r.RuleName, r.BranchName), EnablePush: r.EnablePush,
			PushAllowlistOn: r.EnablePushWhitelist, PushAllowlist: r.PushWhitelistUsernames})
	}
	for _, login := range logins {
		u, resp, err := sdk.GetUserInfo(login)
		if err != nil {
			return claim.GiteaSetup{}, sdkErr("GET", "/users/"+url.PathEscape(login), resp, err)
		}
		s.Workers[login] = u.IsAdmin
	}
	return s, nil
}
