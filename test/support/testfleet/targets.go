package testfleet

import (
	"context"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// NewIssue opens an issue titled title in repo on srv as the user of token, with the body
// the suites give a task ("Task: <title>"), and returns its number. It fails the spec on
// an error.
func NewIssue(ctx context.Context, srv *testgitea.Server, token, repo, title string) int64 {
	ginkgo.GinkgoHelper()
	n, err := srv.CreateIssue(ctx, token, repo, title, "Task: "+title+"\n")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return n
}

// NewPull opens a pull request titled title in repo on srv as the user of token (its
// author and only pusher so far), and waits until Gitea shows its head (WaitHead).
func NewPull(ctx context.Context, srv *testgitea.Server, token, repo, title string) testgitea.PullRequest {
	ginkgo.GinkgoHelper()
	pr, err := srv.CreatePull(ctx, token, repo, title)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	WaitHead(ctx, srv, repo, pr.Number, pr.HeadSHA)
	return pr
}

// WaitHead waits until Gitea shows sha as the head of pull request number of repo on srv
// (the suite's Eventually timeout).
func WaitHead(ctx context.Context, srv *testgitea.Server, repo string, number int64, sha string) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func() (string, error) { return srv.PullHead(ctx, repo, number) }).Should(gomega.Equal(sha),
		"pull request #%d head never became %s", number, sha)
}
