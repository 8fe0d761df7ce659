package testgitea

import (
	"context"
	"fmt"

	"code.gitea.io/sdk/gitea"
)

// Scopes a fleet worker's Gitea tokens carry (docs/gateway.md).
var (
	// ReadOnlyScopes is the worker's own token: reads only, so Gitea refuses its writes.
	// (Gitea ≥ 1.19 scope names; the SDK's constants predate them.)
	ReadOnlyScopes = []gitea.AccessTokenScope{"read:repository", "read:issue", "read:user"}
	// GatewayScopes is the token the gateway acts with for the identity.
	GatewayScopes = []gitea.AccessTokenScope{"write:repository", "write:issue", "read:user"}
)

// CreateToken creates an access token named name with scopes for login (a user CreateUser
// made, authenticating with UserPassword).
func (s *Server) CreateToken(ctx context.Context, login, name string, scopes []gitea.AccessTokenScope) (string, error) {
	basic, err := gitea.NewClient(s.URL, gitea.SetBasicAuth(login, UserPassword), gitea.SetContext(ctx),
		gitea.SetGiteaVersion(""), gitea.SetHTTPClient(s.HTTP))
	if err != nil {
		return "", err
	}
	tok, _, err := basic.CreateAccessToken(gitea.CreateAccessTokenOption{Name: name, Scopes: scopes})
	if err != nil {
		return "", fmt.Errorf("creating token %s for %s: %w", name, login, err)
	}
	return tok.Token, nil
}

// ProtectBranch protects branch of repo the way docs/gateway.md recommends for the
// default branch: direct pushes only for the pushers allowed (the controller's account,
// which publishes the claim rule set there), one approval from a writer, stale approvals
// dismissed.
func (s *Server) ProtectBranch(ctx context.Context, repo, branch string, pushers ...string) error {
	owner, name, err := split(repo)
	if err != nil {
		return err
	}
	if _, _, err := s.Admin(ctx).CreateBranchProtection(owner, name, gitea.CreateBranchProtectionOption{
		RuleName: branch, EnablePush: len(pushers) > 0, EnablePushWhitelist: len(pushers) > 0, PushWhitelistUsernames: pushers,
		RequiredApprovals: 1, BlockOnRejectedReviews: true, DismissStaleApprovals: true,
	}); err != nil {
		return fmt.Errorf("protecting %s of %s: %w", branch, repo, err)
	}
	return nil
}

// BranchHead returns the commit branch of repo points at (an error when it does not exist).
func (s *Server) BranchHead(ctx context.Context, repo, branch string) (string, error) {
	owner, name, err := split(repo)
	if err != nil {
		return "", err
	}
	b, _, err := s.Admin(ctx).GetRepoBranch(owner, name, branch)
	if err != nil {
		return "", fmt.Errorf("reading branch %s of %s: %w", branch, repo, err)
	}
	if b.Commit == nil {
		return "", fmt.Errorf("branch %s of %s has no commit", branch, repo)
	}
	return b.Commit.ID, nil
}
