package taskclaim_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/capability"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testfleet"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// allOps are every operation a task capability can permit.
var allOps = []string{claim.OpPushBranch, claim.OpOpenPullRequest, claim.OpComment, claim.OpReview, claim.OpApprove, claim.OpMerge}

// --- workers ----------------------------------------------------------------------------

// worker is one fleet worker: a WorkerRegistration, a ServiceAccount of the same name (its
// Kubernetes identity) and a Gitea account of the same login (spec.identity).
type worker struct {
	name     string
	ns       string
	identity string        // the Gitea login (spec.identity): the name, unless shared
	token    string        // Gitea token of the worker's account
	c        client.Client // the worker's ServiceAccount (impersonated)
}

func (w *worker) user() gitUser { return gitUser{login: w.identity, token: w.token} }

type workerConfig struct {
	unbound    bool    // no RoleBinding to fleet-worker: the capability verdict is denied
	repository string  // repository binding (default: the controller's repository)
	identityOf *worker // share this worker's Gitea identity (a second registration of it)
	upperCase  bool    // register the identity upper-cased (Gitea logins are case-insensitive)
}

// upperCaseIdentity registers the worker's Gitea login in upper case.
func upperCaseIdentity() workerOpt { return func(c *workerConfig) { c.upperCase = true } }

// sameIdentityAs registers the new worker under o's Gitea identity: a second
// registration of one identity.
func sameIdentityAs(o *worker) workerOpt { return func(c *workerConfig) { c.identityOf = o } }

type workerOpt func(*workerConfig)

func unbound() workerOpt { return func(c *workerConfig) { c.unbound = true } }

func boundTo(r string) workerOpt { return func(c *workerConfig) { c.repository = r } }

// newWorker registers a live worker in ns: a Gitea user with write access to the
// repository, a ServiceAccount bound to the fleet-worker ClusterRole, and a registration
// whose process is this test binary, with a fresh heartbeat.
func newWorker(ns string, opts ...workerOpt) *worker {
	GinkgoHelper()
	conf := workerConfig{repository: repo}
	for _, o := range opts {
		o(&conf)
	}
	w := &worker{name: testenv.Uniq("w") + "-" + suffix, ns: ns}
	w.identity = w.name
	if o := conf.identityOf; o != nil {
		w.identity, w.token = o.identity, o.token
	} else {
		var err error
		w.token, err = srv.CreateUser(ctx, w.name)
		Expect(err).NotTo(HaveOccurred())
		Expect(srv.AddCollaborator(ctx, repo, w.name)).To(Succeed())
	}
	if conf.upperCase {
		w.identity = strings.ToUpper(w.identity)
	}
	fw, err := testfleet.Register(ctx, env, testfleet.WorkerSpec{Namespace: ns, Name: w.name, Identity: w.identity,
		Repository: conf.repository, Host: hostFacts, StartTime: selfStart, Unbound: conf.unbound})
	Expect(err).NotTo(HaveOccurred())
	w.c = fw.Client
	return w
}

// heartbeat renews the worker's heartbeat through the status subresource as client c.
func heartbeat(c client.Client, w *worker) {
	GinkgoHelper()
	Expect(testfleet.Heartbeat(ctx, k8s, &testfleet.Worker{Name: w.name, Namespace: w.ns, Client: c})).To(Succeed())
}

// --- targets in Gitea -------------------------------------------------------------------

func issueTarget(n int64) fleetv1alpha1.TaskTarget { return testfleet.IssueTarget(repo, n) }

func pullTarget(pr testgitea.PullRequest) fleetv1alpha1.TaskTarget {
	return testfleet.PullTarget(repo, pr)
}

// newIssue opens an issue in the controller's repository as the repository owner.
func newIssue(title string) int64 {
	GinkgoHelper()
	return testfleet.NewIssue(ctx, srv, ownerToken, repo, title)
}

// newPull opens a pull request as u (its author and only pusher so far).
func newPull(u gitUser, title string) testgitea.PullRequest {
	GinkgoHelper()
	return testfleet.NewPull(ctx, srv, u.token, repo, title)
}

// push commits a new file to the pull request's branch as u and waits until Gitea shows
// it as the new head; pr.HeadSHA is updated.
func push(u gitUser, pr *testgitea.PullRequest) {
	GinkgoHelper()
	sha, err := srv.CommitFile(ctx, u.token, repo, pr.Branch, "", pr.Branch+"/"+testgitea.RandomHex(3)+".txt", "more\n")
	Expect(err).NotTo(HaveOccurred())
	waitHead(pr.Number, sha)
	pr.HeadSHA = sha
}

// moveMain commits to the base branch (the parity revision moves).
func moveMain() {
	GinkgoHelper()
	_, err := srv.CommitFile(ctx, ownerToken, repo, "main", "", "main-"+testgitea.RandomHex(3)+".txt", "base moves\n")
	Expect(err).NotTo(HaveOccurred())
}

func waitHead(number int64, sha string) {
	GinkgoHelper()
	testfleet.WaitHead(ctx, srv, repo, number, sha)
}

// readRecord returns the claim record in the target's body.
func readRecord(t fleetv1alpha1.TaskTarget) *claim.Record {
	GinkgoHelper()
	rec, _, err := gc.Read(ctx, apiconv.Target(t))
	Expect(err).NotTo(HaveOccurred())
	return rec
}

// transitionsOf lists the audited transitions of one claim on its target.
func transitionsOf(tc *fleetv1alpha1.TaskClaim) []giteaclaim.Transition {
	GinkgoHelper()
	all, err := gc.ListTransitions(ctx, apiconv.Target(tc.Spec.Target))
	Expect(err).NotTo(HaveOccurred())
	var out []giteaclaim.Transition
	for _, tr := range all {
		if tr.ClaimID == string(tc.UID) {
			out = append(out, tr)
		}
	}
	return out
}

// commentCount is the number of comments of any kind on the target in Gitea.
func commentCount(t fleetv1alpha1.TaskTarget) int {
	GinkgoHelper()
	owner, name := splitRepo(t.Repository)
	cms, _, err := srv.Admin(ctx).ListIssueComments(owner, name, t.Number, gitea.ListIssueCommentOptions{ListOptions: gitea.ListOptions{PageSize: 50}})
	Expect(err).NotTo(HaveOccurred())
	return len(cms)
}

// commentBodies are the bodies of every comment on the target.
func commentBodies(t fleetv1alpha1.TaskTarget) []string {
	GinkgoHelper()
	owner, name := splitRepo(t.Repository)
	cms, _, err := srv.Admin(ctx).ListIssueComments(owner, name, t.Number, gitea.ListIssueCommentOptions{ListOptions: gitea.ListOptions{PageSize: 50}})
	Expect(err).NotTo(HaveOccurred())
	out := make([]string, 0, len(cms))
	for _, c := range cms {
		out = append(out, c.Body)
	}
	return out
}

// assigneesOf lists the logins the target is assigned to in Gitea.
func assigneesOf(t fleetv1alpha1.TaskTarget) []string {
	GinkgoHelper()
	owner, name := splitRepo(t.Repository)
	is, _, err := srv.Admin(ctx).GetIssue(owner, name, t.Number)
	Expect(err).NotTo(HaveOccurred())
	out := []string{}
	for _, a := range is.Assignees {
		out = append(out, a.UserName)
	}
	return out
}

func eventsOf(trs []giteaclaim.Transition) []string {
	out := make([]string, 0, len(trs))
	for _, tr := range trs {
		s := string(tr.Event)
		if tr.Trigger != "" {
			s += "/" + string(tr.Trigger)
		}
		out = append(out, s)
	}
	return out
}

// --- claims -----------------------------------------------------------------------------

// newClaim creates a claim for worker (spec.worker) on t as client c, in namespace ns.
func newClaim(c client.Client, ns, workerName string, t fleetv1alpha1.TaskTarget) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	tc := &fleetv1alpha1.TaskClaim{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("tc"), Namespace: ns},
		Spec:       fleetv1alpha1.TaskClaimSpec{Worker: workerName, Target: t},
	}
	Expect(c.Create(ctx, tc)).To(Succeed())
	DeferCleanup(endIfOpen, tc)
	return tc
}

// claim creates a claim of w on t as w itself.
func (w *worker) claim(t fleetv1alpha1.TaskTarget) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	return newClaim(w.c, w.ns, w.name, t)
}

// endIfOpen releases a claim the manager still works on, so no test leaves an active
// capability being re-checked against Gitea.
func endIfOpen(tc *fleetv1alpha1.TaskClaim) {
	cur := &fleetv1alpha1.TaskClaim{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur); err != nil || claim.FinalPhase(cur.Status.Phase) {
		return
	}
	if !cur.Spec.Release {
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Release = true
		_ = k8s.Patch(ctx, cur, patch)
	}
	if tc.Namespace != nsMain {
		return // claims elsewhere are driven by hand
	}
	// Wait (briefly) for the end: a worker holds one claim at a time, so the next spec's
	// claim of the same worker must not find this one still active.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur); err != nil || claim.FinalPhase(cur.Status.Phase) ||
			(cur.Status.Phase != fleetv1alpha1.ClaimPhaseActive && len(cur.Finalizers) == 0) {
			return
		}
	}
}

func fetch(tc *fleetv1alpha1.TaskClaim) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	out := &fleetv1alpha1.TaskClaim{}
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tc), out)).To(Succeed())
	return out
}

// waitPhase waits for the claim to reach phase; reaching another final phase fails at once.
func waitPhase(tc *fleetv1alpha1.TaskClaim, phase string) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	out := &fleetv1alpha1.TaskClaim{}
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tc), out)).To(Succeed())
		if out.Status.Phase != phase && claim.FinalPhase(out.Status.Phase) {
			StopTrying(fmt.Sprintf("claim %s ended %s (%s), want %s", tc.Name, out.Status.Phase, describe(out), phase)).Now()
		}
		g.Expect(out.Status.Phase).To(Equal(phase), "claim %s: %s", tc.Name, describe(out))
		if claim.FinalPhase(phase) {
			// A final claim first drops its capability, then ends its record, frees its lock
			// and audits; the finalizer goes last.
			g.Expect(out.Finalizers).To(BeEmpty(), "claim %s is final but still ending its record", tc.Name)
		}
	}).Should(Succeed())
	return out
}

// expectReadiness checks a claim's Ready (with its reason) and Stalled together: each
// "True", "False" or "" (absent).
func expectReadiness(tc *fleetv1alpha1.TaskClaim, ready, stalled, reason string) {
	GinkgoHelper()
	Expect(testenv.ReadinessOf(tc.Status.Conditions)).To(Equal(testenv.Readiness{Ready: ready, Stalled: stalled, Reason: reason}),
		"claim %s in phase %s", tc.Name, tc.Status.Phase)
}

func describe(tc *fleetv1alpha1.TaskClaim) string {
	if r := tc.Status.Result; r != nil {
		return fmt.Sprintf("outcome=%s class=%s blocker=%s predicate=%s ended=%s", r.Outcome, r.Class, r.Blocker, r.FailedPredicate, tc.Status.EndedReason)
	}
	return "no result yet"
}

// updateSpec changes the claim's spec as client c (retrying on conflicts).
func updateSpec(c client.Client, tc *fleetv1alpha1.TaskClaim, mutate func(*fleetv1alpha1.TaskClaim)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &fleetv1alpha1.TaskClaim{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tc), cur); err != nil {
			return err
		}
		mutate(cur)
		return c.Update(ctx, cur)
	})
}

// pin copies status.validation.pin into spec.pin as the worker.
func (w *worker) pin(tc *fleetv1alpha1.TaskClaim) {
	GinkgoHelper()
	v := fetch(tc).Status.Validation
	Expect(v).NotTo(BeNil(), "claim %s has no validation to pin", tc.Name)
	Expect(updateSpec(w.c, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Pin = v.Pin })).To(Succeed())
}

func (w *worker) release(tc *fleetv1alpha1.TaskClaim) {
	GinkgoHelper()
	Expect(updateSpec(w.c, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.Release = true })).To(Succeed())
}

func (w *worker) complete(tc *fleetv1alpha1.TaskClaim) {
	GinkgoHelper()
	Expect(updateSpec(w.c, tc, func(c *fleetv1alpha1.TaskClaim) { c.Spec.CycleComplete = true })).To(Succeed())
}

// activate takes t for w through the whole protocol: create, validation, pin, Active.
func (w *worker) activate(t fleetv1alpha1.TaskTarget) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	tc := w.claim(t)
	waitPhase(tc, fleetv1alpha1.ClaimPhaseValidated)
	w.pin(tc)
	return waitPhase(tc, fleetv1alpha1.ClaimPhaseActive)
}

// --- locks ------------------------------------------------------------------------------

// lockName is the name of the target's lock Lease, as the controller names it.
func lockName(t fleetv1alpha1.TaskTarget) string {
	return claim.LockName(claim.RepositoryKey{}, apiconv.Target(t))
}

// lease returns the target's lock in ns, or nil.
func lease(ns string, t fleetv1alpha1.TaskTarget) *coordinationv1.Lease {
	GinkgoHelper()
	l := &coordinationv1.Lease{}
	err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: lockName(t)}, l)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return l
}

func holderOf(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// --- capability checks ------------------------------------------------------------------

// authorize asks the capability check the way a tool would, for worker in ns.
func authorize(ns, workerName string, t fleetv1alpha1.TaskTarget, op string) claim.Answer {
	GinkgoHelper()
	return authorizeAt(ns, workerName, t, op, time.Now())
}

func authorizeAt(ns, workerName string, t fleetv1alpha1.TaskTarget, op string, now time.Time) claim.Answer {
	GinkgoHelper()
	ans, err := capability.Authorize(ctx, k8s, now, capability.Request{
		Namespace: ns, Worker: workerName, Repository: t.Repository, Kind: t.Kind, Number: t.Number,
		HeadSHA: t.HeadSHA, Operation: op,
	})
	Expect(err).NotTo(HaveOccurred())
	return ans
}

// expectNeutral asserts that w holds no task capability: every operation on t is refused
// with no_capability and none of its claims carries a capability or a role.
func expectNeutral(w *worker, t fleetv1alpha1.TaskTarget) {
	GinkgoHelper()
	for _, op := range allOps {
		ans := authorize(w.ns, w.name, t, op)
		Expect(ans.Allowed).To(BeFalse(), "worker %s may %s", w.name, op)
		Expect(ans.Reason).To(Equal(claim.ReasonNoCapability), "worker %s, operation %s", w.name, op)
	}
	list := &fleetv1alpha1.TaskClaimList{}
	Expect(k8s.List(ctx, list, client.InNamespace(w.ns))).To(Succeed())
	for _, tc := range list.Items {
		if tc.Spec.Worker == w.name {
			Expect(tc.Status.Capability).To(BeNil(), "claim %s of %s still carries a capability", tc.Name, w.name)
			Expect(tc.Status.Phase).NotTo(Equal(fleetv1alpha1.ClaimPhaseActive), "claim %s of %s", tc.Name, w.name)
		}
	}
}

// --- refusals ---------------------------------------------------------------------------

type refusal struct {
	class, blocker, predicate string
}

// expectRefused waits for the claim to be Rejected and checks the typed result: class,
// blocker and predicate, the fixed rule message and digest, the contention flags, no
// capability, and a payload that names no task but the requested one.
func expectRefused(tc *fleetv1alpha1.TaskClaim, want refusal) *fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	got := waitPhase(tc, fleetv1alpha1.ClaimPhaseRejected)
	checkRefusal(got, want)
	return got
}

func checkRefusal(got *fleetv1alpha1.TaskClaim, want refusal) {
	GinkgoHelper()
	r := got.Status.Result
	Expect(r).NotTo(BeNil())
	Expect(got.Status.Capability).To(BeNil())
	expectReadiness(got, "False", "True", fleetv1alpha1.ReasonRejected)
	Expect(r.Outcome).To(BeElementOf("rejected", "not_acquired"))
	Expect([]string{r.Class, r.Blocker, r.FailedPredicate}).To(Equal([]string{want.class, want.blocker, want.predicate}),
		"claim %s: %s", got.Name, describe(got))
	rule := ruleByID(r.RuleID)
	Expect(rule.Predicate).To(Equal(r.FailedPredicate), "rule %s", r.RuleID)
	Expect(r.Message).To(Equal(rule.Message))
	Expect(string(rule.Class)).To(Equal(r.Class))
	Expect(r.ContentionIsNormal).To(Equal(want.class == string(claim.ClassContention)))
	Expect(r.ReassessFromFreshState).To(BeTrue())
	Expect(r.RetryPermitted).To(BeFalse())
	Expect(r.RuleSetDigest).To(Equal(claim.RuleSetDigest()))
	expectNamesOnlyRequested(got)
}

func ruleByID(id string) claim.Rule {
	GinkgoHelper()
	_, rs := claim.RuleSet()
	for _, r := range rs.Rules {
		if r.ID == id {
			return r
		}
	}
	Fail("no rule " + id + " in the rule set")
	return claim.Rule{}
}

var (
	tokenPattern = regexp.MustCompile(`#?[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)?`)
	digitsOnly   = regexp.MustCompile(`^#?[0-9]+$`)
)

// expectNamesOnlyRequested checks that the refusal payload (the typed result and the
// refusal condition) names no issue, pull request or repository except the requested
// one: no substitute task is ever suggested.
func expectNamesOnlyRequested(tc *fleetv1alpha1.TaskClaim) {
	GinkgoHelper()
	raw, err := json.Marshal(tc.Status.Result)
	Expect(err).NotTo(HaveOccurred())
	var fields map[string]any
	Expect(json.Unmarshal(raw, &fields)).To(Succeed())
	delete(fields, "ruleSetDigest") // a hex digest, compared exactly elsewhere
	var texts []string
	for k, v := range fields {
		if s, ok := v.(string); ok {
			texts = append(texts, s)
		} else if _, ok := v.(bool); !ok {
			Fail(fmt.Sprintf("result field %s is %T: a refusal carries only fixed strings and flags", k, v))
		}
	}
	if c := meta.FindStatusCondition(tc.Status.Conditions, fleetv1alpha1.ReadyCondition); c != nil {
		texts = append(texts, c.Message)
	}
	for _, text := range texts {
		for _, tok := range tokenPattern.FindAllString(text, -1) {
			if strings.Contains(tok, "/") {
				Expect(strings.EqualFold(tok, tc.Spec.Target.Repository)).To(BeTrue(),
					"refusal of %s names repository %q: %q", tc.Name, tok, text)
			}
			if digitsOnly.MatchString(tok) {
				Expect(strings.TrimPrefix(tok, "#")).To(Equal(strconv.FormatInt(tc.Spec.Target.Number, 10)),
					"refusal of %s names number %q: %q", tc.Name, tok, text)
			}
		}
	}
}

// rejectedReasons returns the reasons of the "rejected" audit transitions of a claim.
func rejectedReasons(tc *fleetv1alpha1.TaskClaim) []string {
	var out []string
	for _, tr := range transitionsOf(tc) {
		if tr.Event == claim.EventRejected {
			out = append(out, tr.Reason)
		}
	}
	return out
}

func splitRepo(r string) (owner, name string) {
	owner, name, _ = strings.Cut(r, "/")
	return owner, name
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// eventReasons lists the reasons of the Kubernetes Events about a claim.
func eventReasons(tc *fleetv1alpha1.TaskClaim) []string {
	GinkgoHelper()
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(tc.Namespace))).To(Succeed())
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.UID == tc.UID {
			out = append(out, ev.Reason)
		}
	}
	return out
}
