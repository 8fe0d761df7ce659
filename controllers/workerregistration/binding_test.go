package workerregistration_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testworker"
)

// repositoryObject creates a GiteaRepository in ns naming ownerName on server. Nothing
// checks it against a Gitea here: a binding asks only which objects the namespace has.
func repositoryObject(ns, server, ownerName string) *fleetv1alpha1.GiteaRepository {
	GinkgoHelper()
	owner, name, _ := strings.Cut(ownerName, "/")
	r := &fleetv1alpha1.GiteaRepository{ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("repo"), Namespace: ns},
		Spec: fleetv1alpha1.GiteaRepositorySpec{Server: server, Owner: owner, Name: name}}
	Expect(k8sClient.Create(ctx, r)).To(Succeed())
	return r
}

// expectBound waits until wr's RepositoryBound condition has status and a message
// containing text.
func expectBound(wr *fleetv1alpha1.WorkerRegistration, status metav1.ConditionStatus, reason, text string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		got := &fleetv1alpha1.WorkerRegistration{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wr), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.RepositoryBoundCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(status))
		g.Expect(c.Reason).To(Equal(reason))
		g.Expect(c.Message).To(ContainSubstring(text))
		g.Expect(c.ObservedGeneration).To(Equal(got.Generation))
	}).Should(Succeed())
}

func boundTo(repo string) testworker.Option {
	return func(wr *fleetv1alpha1.WorkerRegistration) { wr.Spec.Repository = repo }
}

var _ = Describe("WorkerRegistration repository binding", func() {
	It("says whether a registration is bound to a repository of its own namespace, and follows the namespace's repositories", func() {
		ns, other := newNamespace(), newNamespace()
		app := repositoryObject(ns, "gitea-a", "acme/app")
		repositoryObject(other, "gitea-a", "acme/theirs")

		onApp := fleet.Register(ctx, ns, "on-app", testworker.Start(), 0, fleetv1alpha1.OwnershipLive, boundTo("Acme/App"))
		onFlags := fleet.Register(ctx, ns, "on-flags", testworker.Start(), 0, fleetv1alpha1.OwnershipLive, boundTo(canonicalRepo))
		onTheirs := fleet.Register(ctx, ns, "on-theirs", testworker.Start(), 0, fleetv1alpha1.OwnershipLive, boundTo("acme/theirs"))
		unbound := fleet.Register(ctx, ns, "unbound", testworker.Start(), 0, fleetv1alpha1.OwnershipLive, boundTo(""))

		expectBound(onApp, metav1.ConditionTrue, fleetv1alpha1.ReasonRepositoryBound, "GiteaRepository "+app.Name)
		expectBound(onFlags, metav1.ConditionTrue, fleetv1alpha1.ReasonRepositoryBound, "--repository")
		expectBound(onTheirs, metav1.ConditionFalse, fleetv1alpha1.ReasonRepositoryNotBound, "named by no GiteaRepository of the namespace")
		expectBound(unbound, metav1.ConditionFalse, fleetv1alpha1.ReasonRepositoryNotBound, "spec.repository is not set")

		By("a GiteaRepository created in the namespace binds the rows that name it")
		theirs := repositoryObject(ns, "gitea-b", "acme/theirs")
		expectBound(onTheirs, metav1.ConditionTrue, fleetv1alpha1.ReasonRepositoryBound, "GiteaRepository "+theirs.Name)

		By("a second object naming the same repository on another server unbinds them: which one is meant cannot be told")
		repositoryObject(ns, "gitea-b", "acme/app")
		expectBound(onApp, metav1.ConditionFalse, fleetv1alpha1.ReasonRepositoryNotBound, "both name Acme/App")

		By("deleting the object unbinds its rows again")
		Expect(k8sClient.Delete(ctx, theirs)).To(Succeed())
		expectBound(onTheirs, metav1.ConditionFalse, fleetv1alpha1.ReasonRepositoryNotBound, "named by no GiteaRepository")
	})
})
