package gateway_test

import (
	"encoding/base64"
	"net/http"
	"strings"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// b64 is a file's content as the contents API takes it.
func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

var _ = Describe("Commits through the contents API", func() {
	It("are a push to the author's work branch only, made as the worker, checked like one, with the Gitea SDK unchanged", func() {
		a := newWorker(nsMain)
		n := newIssue("write the notes without git")
		other := newIssue("someone else's task")
		tc := a.activate(issueTarget(n))
		branch := claim.WorkBranch(tc.Namespace, tc.Name)
		owner, name, _ := strings.Cut(repo, "/")
		mainBefore, err := srv.BranchHead(ctx, repo, "main")
		Expect(err).NotTo(HaveOccurred())
		file := func(p string) string { return apiPath("/contents/%s", p) }
		commit := func(extra map[string]any) map[string]any {
			body := map[string]any{"content": b64("notes\n"), "message": "Start the notes for #" + itoa(n)}
			for k, v := range extra {
				body[k] = v
			}
			return body
		}

		By("a commit to the default branch, or naming no branch (Gitea's default), is refused")
		expectRefused(a.via(http.MethodPost, file("notes.md"), commit(map[string]any{"branch": "main"})), claim.ReasonWrongBranch)
		ans := a.via(http.MethodPost, file("notes.md"), commit(nil))
		expectRefused(ans, claim.ReasonWrongBranch)
		Expect(ans.refusal.Message).To(ContainSubstring(branch), "the refusal names the caller's own work branch")

		By("a commit into .fleet/, one whose message references another task, and one with its own author are refused")
		start := map[string]any{"branch": "main", "new_branch": branch}
		expectRefused(a.via(http.MethodPost, file(".fleet/extra.json"), commit(start)), claim.ReasonProtectedPath)
		expectRefused(a.via(http.MethodPost, apiPath("/contents"), map[string]any{"branch": "main", "new_branch": branch, "message": "m",
			"files": []map[string]any{{"operation": "create", "path": "ok.md", "content": b64("x")}, {"operation": "create", "path": ".FLEET/x", "content": b64("x")}}}),
			claim.ReasonProtectedPath)
		closing := commit(start)
		closing["message"] = "Fixes #" + itoa(other)
		expectRefused(a.via(http.MethodPost, file("notes.md"), closing), claim.ReasonUncoveredReference, "#"+itoa(other))
		forged := commit(start)
		forged["author"] = map[string]string{"name": "Someone Else", "email": "someone@example.invalid"}
		expectRefused(a.via(http.MethodPost, file("notes.md"), forged), claim.ReasonFieldNotPermitted)
		Expect(srv.BranchHead(ctx, repo, "main")).To(Equal(mainBefore), "nothing reached main")
		_, err = srv.BranchHead(ctx, repo, branch)
		Expect(err).To(HaveOccurred(), "no refused commit created the work branch")

		By("the first commit starts the work branch from main, through the stock Gitea SDK, as the worker")
		sdk, err := gitea.NewClient(gatewayURL, gitea.SetToken(a.saToken), gitea.SetContext(ctx), gitea.SetGiteaVersion(""))
		Expect(err).NotTo(HaveOccurred())
		created, resp, err := sdk.CreateFile(owner, name, "notes.md", gitea.CreateFileOptions{
			FileOptions: gitea.FileOptions{Message: "Start the notes for #" + itoa(n), BranchName: "main", NewBranchName: branch},
			Content:     b64("notes\n"),
		})
		Expect(err).NotTo(HaveOccurred(), "HTTP %v", resp)
		Expect(srv.BranchHead(ctx, repo, branch)).To(Equal(created.Commit.SHA))
		Expect(srv.BranchHead(ctx, repo, "main")).To(Equal(mainBefore))

		By("a commit of several files, then a deletion, land on the work branch")
		ans = a.via(http.MethodPost, apiPath("/contents"), map[string]any{"branch": branch, "message": "More notes",
			"files": []map[string]any{
				{"operation": "update", "path": "notes.md", "content": b64("notes, longer\n"), "sha": created.Content.SHA},
				{"operation": "create", "path": "scratch.md", "content": b64("scratch\n")},
			}})
		Expect(ans.status).To(Equal(http.StatusCreated), "%s", ans.body)
		scratch, _, err := srv.Admin(ctx).GetContents(owner, name, branch, "scratch.md")
		Expect(err).NotTo(HaveOccurred())
		ans = a.via(http.MethodDelete, file("scratch.md"), map[string]any{"branch": branch, "sha": scratch.SHA, "message": "Drop the scratch file"})
		Expect(ans.status).To(Equal(http.StatusOK), "%s", ans.body)
		head, err := srv.BranchHead(ctx, repo, branch)
		Expect(err).NotTo(HaveOccurred())
		c, _, err := srv.Admin(ctx).GetSingleCommit(owner, name, head)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Author).NotTo(BeNil())
		Expect(c.Author.UserName).To(Equal(a.identity), "Gitea made the commit as the worker's account")
		Expect(c.RepoCommit.Message).To(HavePrefix("Drop the scratch file"))

		By("the pull request from the work branch opens, as the worker: that ends the claim")
		ans = a.via(http.MethodPost, apiPath("/pulls"), map[string]string{"head": branch, "base": "main", "title": "Notes", "body": "Fixes #" + itoa(n)})
		Expect(ans.status).To(Equal(http.StatusCreated), "%s", ans.body)
		Expect(author(ans)).To(Equal(a.identity))

		By("once the claim ended, the same commit is refused")
		ans = a.via(http.MethodPut, file("notes.md"), map[string]any{"branch": branch, "content": b64("late\n"), "sha": created.Content.SHA, "message": "late"})
		expectRefused(ans, claim.ReasonNoCapability)
		Expect(srv.BranchHead(ctx, repo, branch)).To(Equal(head))
	})
})
