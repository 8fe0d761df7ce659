package gitearepository_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testfleet"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// The gateway of a manager started without --gitea-url, with two real Gitea servers
// that both hold a repository of the same owner/name: each worker's requests go to the
// server of the GiteaRepository its bound repository is named by in its namespace, with
// the identity's token for that server only, and a capability acts only on the server
// its claim was decided on.

// forge is one real Gitea server, the GiteaServer object that names it, and the
// repository of the suite's twin name there.
type forge struct {
	srv    *testgitea.Server
	server string // the GiteaServer's name
	issue  string // the title of issue #1 there
}

// gwWorker is a registered worker that reaches Gitea only through the gateway.
type gwWorker struct {
	*claimer
	identity, saToken string
}

// gwAnswer is the gateway's answer to one request.
type gwAnswer struct {
	status  int
	refusal gateway.Refusal
	body    []byte
}

func (w *gwWorker) via(method, path string, body any) gwAnswer {
	GinkgoHelper()
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		Expect(err).NotTo(HaveOccurred())
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, gatewayURL+path, in)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+w.saToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	a := gwAnswer{status: resp.StatusCode}
	a.body, err = io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	if resp.StatusCode >= 400 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(a.body, &a.refusal)
	}
	return a
}

// sdk is the Gitea Go SDK pointed at the gateway with the worker's gateway token, as a
// stock client is configured.
func (w *gwWorker) sdk() *gitea.Client {
	GinkgoHelper()
	c, err := gitea.NewClient(gatewayURL, gitea.SetToken(w.saToken), gitea.SetContext(ctx))
	Expect(err).NotTo(HaveOccurred(), "the SDK reads the server version through the gateway")
	return c
}

// activeClaim claims issue #1 of repo as the worker, pins it, waits until it is Active,
// and checks that it was decided on the GiteaServer server.
func (w *gwWorker) activeClaim(repo, server string) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	tc := w.claim(repo)
	Eventually(phaseOf(tc)).Should(Equal(fleetv1alpha1.ClaimPhaseValidated))
	w.pin(tc)
	Eventually(phaseOf(tc)).Should(Equal(fleetv1alpha1.ClaimPhaseActive))
	Expect(claimOf(tc).Status.Repository).To(HaveField("Server", server))
	return tc
}

// lsRemote is the head of main as `git ls-remote` through the gateway shows it.
func (w *gwWorker) lsRemote(repo string) string {
	GinkgoHelper()
	out, err := exec.CommandContext(ctx, "git", "-c", "http.extraHeader=Authorization: Bearer "+w.saToken,
		"ls-remote", gatewayURL+"/"+repo+".git", "refs/heads/main").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "git ls-remote: %s", out)
	head, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\t")
	return head
}

// git runs git in dir with the worker's gateway token, as a stock git configured with
// only the gateway URL and that token would, and returns its output.
func (w *gwWorker) git(dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "http.extraHeader=Authorization: Bearer " + w.saToken,
		"-c", "user.name=" + w.identity, "-c", "user.email=" + w.identity + "@example.invalid"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// clone clones repo through the gateway into a new folder and returns it.
func (w *gwWorker) clone(repo string) string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	out, err := w.git(dir, "clone", "-q", gatewayURL+"/"+repo+".git", "work")
	Expect(err).NotTo(HaveOccurred(), "git clone: %s", out)
	return dir + "/work"
}

// split2 is repo's owner and name, and branch: GetRepoBranch's arguments.
func split2(repo, branch string) (string, string, string) {
	owner, name := split(repo)
	return owner, name, branch
}

// commentsBy counts the comments login wrote on issue #1 of repo on srv.
func commentsBy(srv *testgitea.Server, repo, login string) func() int {
	return func() int {
		owner, name := split(repo)
		list, _, err := srv.Admin(ctx).ListIssueComments(owner, name, 1, gitea.ListIssueCommentOptions{})
		Expect(err).NotTo(HaveOccurred())
		n := 0
		for _, c := range list {
			if c.Poster != nil && strings.EqualFold(c.Poster.UserName, login) {
				n++
			}
		}
		return n
	}
}

var _ = Describe("The gateway over GiteaRepositories on two Gitea servers", Ordered, func() {
	var (
		a, b           forge
		twin           string // owner/name on both servers
		nsA, nsB       string
		repoA          *fleetv1alpha1.GiteaRepository
		carol, erin    string // identities with an account on both servers
		onlyA          string // an identity whose gateway token is for server A only
		workerA, workB *gwWorker
	)

	// credentials gives login an account on srv, write access to the twin repository and
	// a gateway token in a Secret labelled for the GiteaServer server.
	credentials := func(f forge, login string) {
		GinkgoHelper()
		_, err := f.srv.CreateUser(ctx, login)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.srv.AddCollaborator(ctx, twin, login)).To(Succeed())
		token, err := f.srv.CreateToken(ctx, login, "fleet-gateway", testgitea.GatewayScopes)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("gw"), Namespace: credentialsNamespace,
				Labels: map[string]string{gateway.LoginLabel: login, gateway.ServerLabel: f.server}},
			Data: map[string][]byte{gateway.TokenKey: []byte(token)},
		})).To(Succeed())
	}
	// twinOn creates the twin repository on f with issue #1 and main protected as serve does.
	twinOn := func(f forge, name string) {
		GinkgoHelper()
		full, err := f.srv.CreateRepo(ctx, f.srv.Token, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(full).To(Equal(twin), "the same owner/name on both servers")
		Expect(f.srv.ProtectBranch(ctx, full, "main", f.srv.AdminLogin)).To(Succeed())
		Expect(testfleet.NewIssue(ctx, f.srv, f.srv.Token, full, f.issue)).To(Equal(int64(1)))
	}
	register := func(ns, identity, repo string) *gwWorker {
		GinkgoHelper()
		name := testenv.Uniq("gww")
		fw, err := testfleet.Register(ctx, env, testfleet.WorkerSpec{Namespace: ns, Name: name, Identity: identity,
			Repository: repo, Host: hostFacts, StartTime: selfStart})
		Expect(err).NotTo(HaveOccurred())
		token, err := env.ServiceAccountToken(ctx, ns, name, gateway.Audience)
		Expect(err).NotTo(HaveOccurred())
		return &gwWorker{claimer: &claimer{name: name, ns: ns, c: fw.Client}, identity: identity, saToken: token}
	}
	namespace := func() string {
		GinkgoHelper()
		ns := testenv.Uniq("gwns")
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		return ns
	}
	ready := func(r *fleetv1alpha1.GiteaRepository) {
		GinkgoHelper()
		Eventually(readyOf(r)).Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))
		Expect(getRepo(r).Status.RuleSetDigest).To(Equal(claim.RuleSetDigest()))
	}

	BeforeAll(func() {
		second, err := testgitea.Start(ctx)
		DeferCleanup(func() { testfleet.StopGitea(second, CurrentSpecReport().Failed(), "GiteaRepository (second Gitea)") })
		Expect(err).NotTo(HaveOccurred(), "the spec needs a second real Gitea")
		Expect(second.URL).NotTo(Equal(forgeSrv.URL), "two servers, not one twice (unset GITEA_URL)")
		Expect(second.AdminLogin).To(Equal(forgeSrv.AdminLogin), "both servers' administrators own the twin repository")

		a = forge{srv: forgeSrv, server: readyServer().Name, issue: "the task on server A"}
		bObj := newServer(second.URL, tokenSecret(second.Token))
		Eventually(readyOf(bObj)).Should(HaveField("Reason", fleetv1alpha1.ReasonServerConnected))
		b = forge{srv: second, server: bObj.Name, issue: "the task on server B"}

		name := testenv.Uniq("twin")
		twin = forgeSrv.AdminLogin + "/" + name
		twinOn(a, name)
		twinOn(b, name)
		// main moves on B, so the two repositories' heads differ.
		_, err = second.CommitFile(ctx, second.Token, twin, "main", "", "only-on-b.txt", "B\n")
		Expect(err).NotTo(HaveOccurred())

		carol, erin, onlyA = testenv.Uniq("carol"), testenv.Uniq("erin"), testenv.Uniq("dave")
		for _, login := range []string{carol, erin} {
			credentials(a, login)
			credentials(b, login)
		}
		credentials(a, onlyA)
		_, err = second.CreateUser(ctx, onlyA)
		Expect(err).NotTo(HaveOccurred())
		Expect(second.AddCollaborator(ctx, twin, onlyA)).To(Succeed())

		nsA, nsB = namespace(), namespace()
		repoA = newRepository(nsA, a.server, twin)
		ready(repoA)
		ready(newRepository(nsB, b.server, twin))
		workerA, workB = register(nsA, erin, twin), register(nsB, carol, twin)
	})

	It("sends each worker's reads, REST and git, to the server of its namespace's repository", func() {
		var issue gitea.Issue
		ans := workerA.via(http.MethodGet, "/api/v1/repos/"+twin+"/issues/1", nil)
		Expect(ans.status).To(Equal(http.StatusOK), "%s", ans.body)
		Expect(json.Unmarshal(ans.body, &issue)).To(Succeed())
		Expect(issue.Title).To(Equal(a.issue))
		ans = workB.via(http.MethodGet, "/api/v1/repos/"+twin+"/issues/1", nil)
		Expect(ans.status).To(Equal(http.StatusOK), "%s", ans.body)
		Expect(json.Unmarshal(ans.body, &issue)).To(Succeed())
		Expect(issue.Title).To(Equal(b.issue))
		owner, name := split(twin)
		viaSDK, _, err := workerA.sdk().GetIssue(owner, name, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(viaSDK.Title).To(Equal(a.issue))

		headA, err := a.srv.BranchHead(ctx, twin, "main")
		Expect(err).NotTo(HaveOccurred())
		headB, err := b.srv.BranchHead(ctx, twin, "main")
		Expect(err).NotTo(HaveOccurred())
		Expect(headA).NotTo(Equal(headB))
		Expect(workerA.lsRemote(twin)).To(Equal(headA))
		Expect(workB.lsRemote(twin)).To(Equal(headB))
	})

	It("forwards a write to the server its claim was decided on, as the identity's account there", func() {
		claimedOnB := claimsCounted(b.server, twin)
		tc := workB.activeClaim(twin, b.server)
		Expect(claimsCounted(b.server, twin)).To(BeNumerically(">", claimedOnB), "the claim counts under server B's label")

		owner, name := split(twin)
		_, _, err := workB.sdk().CreateIssueComment(owner, name, 1, gitea.CreateIssueCommentOption{Body: "progress on B"})
		Expect(err).NotTo(HaveOccurred())
		Expect(commentsBy(b.srv, twin, carol)()).To(Equal(1))
		Expect(commentsBy(a.srv, twin, carol)()).To(BeZero(), "nothing reached the same-named repository on A")

		By("git push: the author's work branch goes to its own repository through the gateway, and to no other repository")
		other, err := b.srv.CreateRepo(ctx, b.srv.Token, testenv.Uniq("other"))
		Expect(err).NotTo(HaveOccurred())
		Expect(b.srv.AddCollaborator(ctx, other, carol)).To(Succeed(), "carol may write there in Gitea: only the gateway stands in the way")
		branch := claim.WorkBranch(tc.Namespace, tc.Name)
		work := workB.clone(twin)
		Expect(workB.git(work, "commit", "-q", "--allow-empty", "-m", "progress on B")).Error().NotTo(HaveOccurred())
		Expect(workB.git(work, "push", "-q", gatewayURL+"/"+twin+".git", "HEAD:refs/heads/"+branch)).Error().NotTo(HaveOccurred())
		_, _, err = b.srv.Admin(ctx).GetRepoBranch(split2(twin, branch))
		Expect(err).NotTo(HaveOccurred(), "the work branch is on B")
		out, err := workB.git(work, "push", "-q", gatewayURL+"/"+other+".git", "HEAD:refs/heads/"+branch)
		Expect(err).To(HaveOccurred(), "a push to another repository than the capability's: %s", out)
		Expect(out).To(ContainSubstring("403"))
		_, resp, _ := b.srv.Admin(ctx).GetRepoBranch(split2(other, branch))
		Expect(resp).NotTo(BeNil())
		Expect(resp.StatusCode).To(Equal(http.StatusNotFound), "nothing reached the other repository")

		By("a worker of the other namespace, with no claim of its own, is refused on its own server")
		ans := workerA.via(http.MethodPost, "/api/v1/repos/"+twin+"/issues/1/comments", map[string]string{"body": "me too"})
		Expect(ans.status).To(Equal(http.StatusForbidden), "%s", ans.body)
		Expect(ans.refusal.Reason).To(Equal(claim.ReasonNoCapability))
		Expect(commentsBy(a.srv, twin, erin)()).To(BeZero())
	})

	It("sends a token to no other server than the one its Secret is labelled for", func() {
		w := register(nsB, onlyA, twin)
		ans := w.via(http.MethodGet, "/api/v1/repos/"+twin+"/issues/1", nil)
		Expect(ans.status).To(Equal(http.StatusServiceUnavailable), "%s", ans.body)
		Expect(ans.refusal.Reason).To(Equal(claim.ReasonStateUnavailable))
		Expect(ans.refusal.Message).To(ContainSubstring("no usable Gitea credentials"))
	})

	It("refuses a repository whose GiteaRepository is not Ready, and one no GiteaRepository names", func() {
		missing := forgeSrv.AdminLogin + "/" + testenv.Uniq("missing")
		nsC := namespace()
		r := newRepository(nsC, a.server, missing)
		Eventually(readyOf(r)).Should(HaveField("Status", metav1.ConditionFalse))
		w := register(nsC, erin, missing)
		ans := w.via(http.MethodGet, "/api/v1/repos/"+missing+"/issues/1", nil)
		Expect(ans.status).To(Equal(http.StatusForbidden), "%s", ans.body)
		Expect(ans.refusal.Reason).To(Equal(claim.ReasonRepositoryNotReady))
		Expect(ans.refusal.Message).To(ContainSubstring("the server of your bound repository " + missing + " cannot be told now"))
		ans = w.via(http.MethodGet, "/api/v1/version", nil)
		Expect(ans.refusal.Reason).To(Equal(claim.ReasonRepositoryNotReady), "a server-wide read needs the server too")

		unnamed := register(nsC, erin, "nobody/nothing")
		ans = unnamed.via(http.MethodGet, "/api/v1/version", nil)
		Expect(ans.status).To(Equal(http.StatusForbidden), "%s", ans.body)
		Expect(ans.refusal.Reason).To(Equal(claim.ReasonWrongRepository))
		Expect(ans.refusal.Message).To(ContainSubstring(`no GiteaRepository of your namespace names your bound repository "nobody/nothing"`))

		By("a path naming another repository than the worker's is refused")
		ans = workerA.via(http.MethodGet, "/api/v1/repos/"+missing+"/issues/1", nil)
		Expect(ans.refusal.Reason).To(Equal(claim.ReasonWrongRepository))
	})

	It("lets a capability decided on server A write nothing once its repository is served from B", func() {
		tc := workerA.activeClaim(twin, a.server)

		By("replacing the namespace's GiteaRepository with one on server B")
		Expect(k8sClient.Delete(ctx, repoA)).To(Succeed())
		ready(newRepository(nsA, b.server, twin))
		Eventually(func() string {
			return string(workerA.via(http.MethodGet, "/api/v1/repos/"+twin+"/issues/1", nil).body)
		}).Should(ContainSubstring(b.issue), "the worker's reads now go to B")

		ans := workerA.via(http.MethodPost, "/api/v1/repos/"+twin+"/issues/1/comments", map[string]string{"body": "still mine?"})
		Expect(ans.status).To(Equal(http.StatusForbidden), "%s", ans.body)
		Expect(ans.refusal.Reason).To(BeElementOf(claim.ReasonNoCapability, claim.ReasonRevoked))
		Expect(commentsBy(b.srv, twin, erin)()).To(BeZero(), "nothing of A's capability reached B")
		Eventually(phaseOf(tc)).Should(HavePrefix(fleetv1alpha1.ClaimPhaseRevoked))
		gone := func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(repoA), &fleetv1alpha1.GiteaRepository{})
		}
		Eventually(gone).ShouldNot(Succeed(), "the old GiteaRepository is released once its claim ended")
	})

	It("refuses the workers of a server that stopped with a typed reason, while the other server's keep working", func() {
		nsD := namespace()
		ready(newRepository(nsD, a.server, twin))
		onA := register(nsD, carol, twin)
		Expect(b.srv.Stop(false)).To(Succeed())
		Eventually(func() string {
			return workB.via(http.MethodGet, "/api/v1/repos/"+twin+"/issues/1", nil).refusal.Reason
		}).Should(Equal(claim.ReasonRepositoryNotReady), "B's repository is not Ready once B stops answering")
		ans := onA.via(http.MethodGet, "/api/v1/repos/"+twin+"/issues/1", nil)
		Expect(ans.status).To(Equal(http.StatusOK), "%s", ans.body)
		Expect(string(ans.body)).To(ContainSubstring(a.issue))
	})
})

// claimsCounted sums fleet_task_claim_results_total over the series labelled with the
// GiteaServer server and the repository repo (owner/name).
func claimsCounted(server, repo string) float64 {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	sum := 0.0
	for _, f := range families {
		if f.GetName() != "fleet_task_claim_results_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["server"] == server && labels["repository"] == strings.ToLower(repo) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
