package giteaclaim

import (
	"bytes"
	"context"
	"fmt"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// RuleFiles publishes and reads files on a repository's default branch (Client does).
type RuleFiles interface {
	PublishFile(ctx context.Context, repo, path string, content []byte, message string) (FileCommit, error)
	ReadFile(ctx context.Context, repo, path string) ([]byte, error)
}

var _ RuleFiles = (*Client)(nil)

// PublishRuleSet makes the claim rule set in force (claim.RuleSet) the content of
// claim.RuleSetPath in repo when the copy there differs, and reads it back. It returns
// nil only when the copy there is, byte for byte, the rule set in force.
func PublishRuleSet(ctx context.Context, files RuleFiles, repo string) error {
	data, _ := claim.RuleSet()
	fc, err := files.PublishFile(ctx, repo, claim.RuleSetPath, data, "Publish task-claim rule set "+claim.RuleSetDigest())
	if err != nil {
		// Another publisher (a second replica, or one whose start overlapped this one)
		// may have committed the same file a moment earlier, so this commit lost the
		// branch ref: the copy there settles it.
		if got, rerr := files.ReadFile(ctx, repo, claim.RuleSetPath); rerr == nil && bytes.Equal(got, data) {
			return nil
		}
		return fmt.Errorf("publishing the claim rule set: %w", err)
	}
	if !fc.Changed {
		// PublishFile read the file and found exactly these bytes: that read is the
		// read-back.
		return nil
	}
	got, err := files.ReadFile(ctx, repo, claim.RuleSetPath)
	if err != nil {
		return fmt.Errorf("reading the claim rule set back: %w", err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("the claim rule set read back from %s does not have digest %s", claim.RuleSetPath, claim.RuleSetDigest())
	}
	return nil
}
