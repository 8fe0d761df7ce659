//go:build e2e

package e2e_test

import (
	"fmt"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// secondGitea is the second Gitea hack/e2e.sh starts, beside giteaForPods, whose gateway
// credentials are labelled for the GiteaServer "second".
var secondGitea = giteaServer{name: "second", url: "http://10.243.0.1:3932", tokenFileEnv: "FLEET_E2E_SECOND_GITEA_TOKEN_FILE"}

// claimThroughGateway runs kubectl fleet claim in the worker's pod with no Gitea of its
// own to read: its check of the target goes through the gateway Service too.
func claimThroughGateway(ns, pod string, issue int) (int, string) {
	GinkgoHelper()
	return inPod(ns, pod, "/kubectl-fleet", "claim", "issue", fmt.Sprint(issue),
		"--worker", pod, "--gateway-url", gatewayURL(), "--timeout", "90s")
}

// Both servers hold fleet/demo and fleet/docs, with the same issue numbers (hack/demo.sh).
// In this namespace fleet/docs is the first server's and fleet/demo the second's: the
// GiteaRepository that names fleet/demo here takes it from the manager's flags, which name
// the first server's.
var _ = Describe("Claims on two Gitea servers", Ordered, func() {
	const ns = "e2e-servers"
	// The claims spec (namespace e2e-claims) claims fleet/demo#2 on the first server: a
	// claim of this namespace's fleet/demo#2 must go to the second server all the same.
	const issue = 2
	type worker struct {
		pod, node, identity, repository string
		on, other                       giteaServer
	}
	workers := []worker{
		{pod: "ps-docs", node: "node1", identity: "worker-3", repository: "fleet/docs", on: firstGitea, other: secondGitea},
		{pod: "ps-demo", node: "node2", identity: "worker-4", repository: "fleet/demo", on: secondGitea, other: firstGitea},
	}
	claimOf := func(pod string) *fleetv1alpha1.TaskClaim {
		GinkgoHelper()
		list := &fleetv1alpha1.TaskClaimList{}
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var found []fleetv1alpha1.TaskClaim
		for _, c := range list.Items {
			if c.Spec.Worker == pod && c.Status.Phase == fleetv1alpha1.ClaimPhaseActive {
				found = append(found, c)
			}
		}
		Expect(found).To(HaveLen(1), "one active claim of %s", pod)
		return &found[0]
	}

	BeforeAll(func() {
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		kubectl("-n", ns, "create", "role", "register", "--verb=create", "--resource=workerregistrations.fleet.giteatools.dev")
		for _, s := range []giteaServer{firstGitea, secondGitea} {
			Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &fleetv1alpha1.GiteaServer{ObjectMeta: metav1.ObjectMeta{Name: s.name},
				Spec: fleetv1alpha1.GiteaServerSpec{URL: s.url, TokenSecretRef: fleetv1alpha1.SecretKeyRef{Name: "gitea-" + s.name + "-token"}}}))).To(Succeed())
		}
		for _, w := range workers {
			owner, name, _ := strings.Cut(w.repository, "/")
			Expect(k8s.Create(ctx, &fleetv1alpha1.GiteaRepository{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: fleetv1alpha1.GiteaRepositorySpec{Server: w.on.name, Owner: owner, Name: name}})).To(Succeed())
			allowWorker(ns, w.pod)
			Expect(k8s.Create(ctx, workerPodAs(ns, w.pod, w.node, w.identity, w.repository))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, w := range workers {
				_, name, _ := strings.Cut(w.repository, "/")
				repo := &fleetv1alpha1.GiteaRepository{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, repo)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(repo.Status.Conditions, "Ready")).To(BeTrue(), "%s is Ready: %+v", name, repo.Status.Conditions)
				wr := &fleetv1alpha1.WorkerRegistration{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: w.pod}, wr)).To(Succeed())
				g.Expect(wr.Status.OwnershipState).To(Equal(fleetv1alpha1.OwnershipLive))
			}
		}).Should(Succeed())
		// The identities are free again for the other specs (a Gitea identity holds one
		// claim at a time, in every namespace).
		DeferCleanup(func() {
			for _, w := range workers {
				code, out := inPod(ns, w.pod, "/kubectl-fleet", "release", "--worker", w.pod)
				Expect(code).To(BeZero(), "release of %s: %s", w.pod, out)
			}
		})
	})

	It("claims from pods in a repository on each server through the gateway Service, each record in its own server's issue only", func() {
		for _, w := range workers {
			code, body := comment(ns, w.pod, w.repository, issue, "e2e: "+w.pod+" before any claim")
			Expect(code).To(Equal(http.StatusForbidden), "%s without a claim: %s", w.pod, body)

			code, out := claimThroughGateway(ns, w.pod, issue)
			Expect(code).To(BeZero(), "%s claims %s#%d: %s", w.pod, w.repository, issue, out)
			tc := claimOf(w.pod)
			Expect(tc.Status.Repository).NotTo(BeNil())
			Expect(tc.Status.Repository.Server).To(Equal(w.on.name), "%s's claim was decided on its repository's server", w.pod)
			Expect(w.on.issueBody(w.repository, issue)).To(ContainSubstring(`"claimID":"%s"`, tc.UID),
				"the record of %s's claim is in %s#%d on %s", w.pod, w.repository, issue, w.on.name)
			Expect(w.other.issueBody(w.repository, issue)).NotTo(ContainSubstring(string(tc.UID)),
				"nothing of %s's claim is in %s#%d on %s", w.pod, w.repository, issue, w.other.name)
		}
	})

	It("writes from each pod through the gateway Service to the server of its capability's repository, and refuses the other repository", func() {
		for i, w := range workers {
			other := workers[1-i]
			mine := "e2e: " + w.pod + " writes on " + w.on.name
			code, body := comment(ns, w.pod, w.repository, issue, mine)
			Expect(code).To(Equal(http.StatusCreated), body)
			Expect(w.on.comments(w.repository, issue)).To(ContainElement(w.identity + ": " + mine))
			Expect(w.other.comments(w.repository, issue)).NotTo(ContainElement(ContainSubstring(mine)))

			notMine := "e2e: " + w.pod + " writes in " + other.repository
			code, body = comment(ns, w.pod, other.repository, issue, notMine)
			Expect(code).To(Equal(http.StatusForbidden), body)
			Expect(body).To(ContainSubstring("wrong_repository"))
			for _, s := range []giteaServer{firstGitea, secondGitea} {
				Expect(s.comments(other.repository, issue)).NotTo(ContainElement(ContainSubstring(notMine)), "on %s", s.name)
			}
		}
	})
})
