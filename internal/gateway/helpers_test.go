package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gateway"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testfleet"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// newGateway builds a gateway as cmd/ does, with clk as its clock.
func newGateway(c client.Client, reader client.Reader, rec events.EventRecorder, clk clock.PassiveClock) *gateway.Gateway {
	creds := gateway.NewCredentials(reader, credsNS, gc)
	return &gateway.Gateway{
		GiteaURL: srv.URL, Repository: repo, Reader: reader, Authn: gateway.NewAuthenticator(c),
		Credentials: creds, Gitea: gc, Recorder: rec, Client: c, Clock: clk,
	}
}

// worker is a fleet worker: a Gitea account (write collaborator, but holding only a
// read-only token), its gateway token in a Secret, a ServiceAccount bound to fleet-worker,
// a live WorkerRegistration, and a gateway token (TokenRequest, gateway.Audience).
type worker struct {
	name, ns  string
	identity  string // Gitea login (spec.identity)
	readToken string // the worker's own Gitea token: read-only scopes
	saToken   string // its ServiceAccount token for the gateway
	c         client.Client
}

func newWorker(ns string) *worker { return newWorkerAs(ns, "") }

// newWorkerAs registers a worker under an existing Gitea identity (a second registration
// of it) when identity is set.
func newWorkerAs(ns, identity string) *worker {
	GinkgoHelper()
	w := &worker{name: testenv.Uniq("gw") + "-" + suffix, ns: ns, identity: identity}
	if identity == "" {
		w.identity = w.name
		w.createGiteaAccount()
	}
	w.register()
	return w
}

func (w *worker) createGiteaAccount() {
	GinkgoHelper()
	_, err := srv.CreateUser(ctx, w.name)
	Expect(err).NotTo(HaveOccurred())
	Expect(srv.AddCollaborator(ctx, repo, w.name)).To(Succeed())
	w.readToken, err = srv.CreateToken(ctx, w.name, "worker-read", testgitea.ReadOnlyScopes)
	Expect(err).NotTo(HaveOccurred())
	gwToken, err := srv.CreateToken(ctx, w.name, "fleet-gateway", testgitea.GatewayScopes)
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "gitea-" + w.name, Namespace: credsNS, Labels: map[string]string{gateway.LoginLabel: w.name}},
		Data:       map[string][]byte{gateway.TokenKey: []byte(gwToken)},
	})).To(Succeed())
}

// register creates the ServiceAccount, its fleet-worker binding, a live registration and
// the gateway token.
func (w *worker) register() {
	GinkgoHelper()
	ns := w.ns
	fw, err := testfleet.Register(ctx, env, testfleet.WorkerSpec{Namespace: ns, Name: w.name, Identity: w.identity,
		Repository: repo, Host: hostFacts, StartTime: selfStart})
	Expect(err).NotTo(HaveOccurred())
	w.c = fw.Client
	w.saToken, err = env.ServiceAccountToken(ctx, ns, w.name, gateway.Audience)
	Expect(err).NotTo(HaveOccurred())
}

// --- claims -----------------------------------------------------------------------------

func issueTarget(n int64) fleetv1alpha1.TaskTarget { return testfleet.IssueTarget(repo, n) }

func pullTarget(pr testgitea.PullRequest) fleetv1alpha1.TaskTarget {
	return testfleet.PullTarget(repo, pr)
}

// newIssue opens an issue in the gateway's repository as the repository owner.
func newIssue(title string) int64 {
	GinkgoHelper()
	return testfleet.NewIssue(ctx, srv, ownerToken, repo, title)
}

// newPull opens a pull request as the user of token and waits until Gitea shows its head.
func newPull(token, title string) testgitea.PullRequest {
	GinkgoHelper()
	return testfleet.NewPull(ctx, srv, token, repo, title)
}

func (w *worker) claim(t fleetv1alpha1.TaskTarget) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	tc := &fleetv1alpha1.TaskClaim{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("tc"), Namespace: w.ns},
		Spec:       fleetv1alpha1.TaskClaimSpec{Worker: w.name, Target: t},
	}
	Expect(w.c.Create(ctx, tc)).To(Succeed())
	DeferCleanup(func() { _ = w.update(tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Release = true }) })
	return tc
}

func (w *worker) update(tc *fleetv1alpha1.TaskClaim, mutate func(*fleetv1alpha1.TaskClaim)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &fleetv1alpha1.TaskClaim{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur); err != nil {
			return err
		}
		if claim.FinalPhase(cur.Status.Phase) {
			return nil
		}
		mutate(cur)
		return w.c.Update(ctx, cur)
	})
}

// activate takes t for w: create, validation, pin, Active.
func (w *worker) activate(t fleetv1alpha1.TaskTarget) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	tc := w.claim(t)
	v := waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated).Status.Validation
	Expect(w.update(tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Pin = v.Pin })).To(Succeed())
	return waitPhase(tc, fleetv1alpha1.ClaimPhaseActive)
}

func waitPhase(tc *fleetv1alpha1.TaskClaim, phase string) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	out := &fleetv1alpha1.TaskClaim{}
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tc), out)).To(Succeed())
		if out.Status.Phase != phase && claim.FinalPhase(out.Status.Phase) {
			StopTrying(fmt.Sprintf("claim %s ended %s, want %s (%+v)", tc.Name, out.Status.Phase, phase, out.Status.Result)).Now()
		}
		g.Expect(out.Status.Phase).To(Equal(phase))
	}).Should(Succeed())
	return out
}

// --- requests ---------------------------------------------------------------------------

// answer is a gateway (or Gitea) answer.
type answer struct {
	status  int
	refusal gateway.Refusal
	body    []byte
}

// do sends method path with a JSON body (nil for none) to base, authenticated by
// "Authorization: <auth>" when auth is set.
func do(base, method, path, auth string, body any) answer {
	GinkgoHelper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		Expect(err).NotTo(HaveOccurred())
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	Expect(err).NotTo(HaveOccurred())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := srv.HTTP.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	a := answer{status: resp.StatusCode}
	a.body, err = io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	if resp.Header.Get("Content-Type") == "application/json" && resp.StatusCode >= 400 {
		_ = json.Unmarshal(a.body, &a.refusal)
	}
	return a
}

// via sends a request through the manager's gateway as w.
func (w *worker) via(method, path string, body any) answer {
	GinkgoHelper()
	return do(gatewayURL, method, path, "Bearer "+w.saToken, body)
}

func apiPath(format string, args ...any) string {
	return "/api/v1/repos/" + repo + fmt.Sprintf(format, args...)
}

func comment(n int64) (string, map[string]string) {
	return apiPath("/issues/%d/comments", n), map[string]string{"body": "work note " + testgitea.RandomHex(3)}
}

// expectRefused checks a 403 with the reason, naming no other task.
func expectRefused(a answer, reason string, otherTasks ...string) {
	GinkgoHelper()
	Expect(a.status).To(Equal(http.StatusForbidden), "body: %s", a.body)
	Expect(a.refusal.Reason).To(Equal(reason), "body: %s", a.body)
	Expect(a.refusal.Message).NotTo(BeEmpty())
	for _, o := range otherTasks {
		Expect(string(a.body)).NotTo(ContainSubstring(o))
	}
}

// author returns the login of the user a Gitea answer (comment, review, pull) names.
func author(a answer) string {
	GinkgoHelper()
	var v struct {
		User *gitea.User `json:"user"`
	}
	Expect(json.Unmarshal(a.body, &v)).To(Succeed(), "body: %s", a.body)
	Expect(v.User).NotTo(BeNil(), "body: %s", a.body)
	return v.User.UserName
}

// commentCount is the number of comments on an issue, the controller's audit comments
// left out.
func commentCount(n int64) int {
	GinkgoHelper()
	owner, name, _ := strings.Cut(repo, "/")
	cs, _, err := srv.Admin(ctx).ListIssueComments(owner, name, n, gitea.ListIssueCommentOptions{})
	Expect(err).NotTo(HaveOccurred())
	count := 0
	for _, c := range cs {
		// The controller's audit comments are not what these specs count: the "claimed"
		// one is posted after the claim's status says active, so it may land mid-spec.
		if _, audit, _ := giteaclaim.ParseTransition(c.Body); !audit || c.Poster == nil || c.Poster.UserName != srv.AdminLogin {
			count++
		}
	}
	return count
}

// eventReasons lists the reasons of the Events regarding obj (kind, namespace, name).
func eventNotes(kind, ns, name string) []string {
	GinkgoHelper()
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// --- git --------------------------------------------------------------------------------

// gitRun runs git in dir with an isolated configuration and returns its combined output.
func gitRun(dir string, args ...string) (string, error) {
	out, err := execIn(dir, "git", args...).CombinedOutput()
	return string(out), err
}

// execIn prepares a command in dir with an isolated git configuration (its own HOME, no
// system configuration, no prompts).
func execIn(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	home := filepath.Join(dir, ".home")
	_ = os.MkdirAll(home, 0o700)
	cmd.Env = append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	return cmd
}

// cloneVia clones the repository through the gateway as w into a fresh folder.
func (w *worker) cloneVia() string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	out, err := gitRun(dir, "-c", "http.extraHeader=Authorization: Bearer "+w.saToken, "clone", "-q", gatewayURL+"/"+repo+".git", "src")
	Expect(err).NotTo(HaveOccurred(), "git clone through the gateway: %s", out)
	return filepath.Join(dir, "src")
}

// commitAndPush commits a file in dir and pushes HEAD to ref through the gateway as w.
func (w *worker) commitAndPush(dir, ref string) (string, error) {
	GinkgoHelper()
	f := testgitea.RandomHex(4) + ".txt"
	return w.commitPush(dir, ref, "Add "+f, func() {
		Expect(os.WriteFile(filepath.Join(dir, f), []byte("work\n"), 0o600)).To(Succeed())
	})
}

// commitPush commits what change does in dir with message, authored and committed as
// the worker's Gitea account (its e-mail, so independence can attribute the commit), and
// pushes HEAD to ref through the gateway as w.
func (w *worker) commitPush(dir, ref, message string, change func()) (string, error) {
	GinkgoHelper()
	change()
	out, err := gitRun(dir, "add", "-A")
	Expect(err).NotTo(HaveOccurred(), out)
	out, err = gitRun(dir, "-c", "user.name="+w.identity, "-c", "user.email="+w.identity+"@example.invalid", "commit", "-q", "-m", message)
	Expect(err).NotTo(HaveOccurred(), out)
	return gitRun(dir, "-c", "http.extraHeader=Authorization: Bearer "+w.saToken, "push", "origin", "HEAD:"+ref)
}

func headOf(dir string) string {
	GinkgoHelper()
	out, err := gitRun(dir, "rev-parse", "HEAD")
	Expect(err).NotTo(HaveOccurred(), out)
	return strings.TrimSpace(out)
}
