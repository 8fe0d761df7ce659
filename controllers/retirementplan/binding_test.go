package retirementplan_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

// giteaRepository creates a GiteaRepository naming owner/name on server in ns, and records
// id as the Gitea repository ID it resolved to (0: none yet). Nothing checks it against a
// Gitea here: a plan's binding asks only which repository objects the namespace has and
// what they resolved to.
func giteaRepository(ns, server, ownerName string, id int64) *fleetv1alpha1.GiteaRepository {
	GinkgoHelper()
	owner, name, _ := strings.Cut(ownerName, "/")
	r := &fleetv1alpha1.GiteaRepository{ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("repo"), Namespace: ns},
		Spec: fleetv1alpha1.GiteaRepositorySpec{Server: server, Owner: owner, Name: name}}
	Expect(k8sClient.Create(ctx, r)).To(Succeed())
	if id != 0 {
		r.Status.RepositoryID = id
		Expect(k8sClient.Status().Update(ctx, r)).To(Succeed())
	}
	return r
}

// boundTo makes a registration's binding repo.
func boundTo(repo string) func(*fleetv1alpha1.WorkerRegistration) {
	return func(wr *fleetv1alpha1.WorkerRegistration) { wr.Spec.Repository = repo }
}

// planFor creates a plan bound to repo ("" for the default) and waits for its dry run.
func planFor(ns, repo string) *fleetv1alpha1.RetirementPlan {
	GinkgoHelper()
	p := newPlanObj(ns, testenv.Uniq("plan"))
	p.Spec.CanonicalRepository = repo
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	return waitOutcome(p, "planned")
}

var _ = Describe("RetirementPlan repository binding", func() {
	It("retires only the stale rows of the repository the plan is bound to, among the namespace's repositories", func() {
		ns := newNamespace()
		giteaRepository(ns, "gitea-a", "acme/app", 1)
		giteaRepository(ns, "gitea-a", "acme/lib", 2)
		giteaRepository(ns, "gitea-b", "tools/cli", 1)
		app := eligible(ns, "app-1", boundTo("acme/app"))
		lib1, lib2 := eligible(ns, "lib-1", boundTo("acme/lib")), eligible(ns, "lib-2", boundTo("Acme/Lib"))
		cli := eligible(ns, "cli-1", boundTo("tools/cli"))

		p := planFor(ns, "acme/lib")
		Expect(p.Status.CanonicalRepository).To(Equal("acme/lib"))
		Expect(p.Status.CandidateWorkerIdentities).To(Equal([]string{"lib-1", "lib-2"}))
		Expect(reasonOf(p.Status.Preserved, "app-1")).To(Equal(retirement.ReasonRepositoryAmbiguous))
		Expect(reasonOf(p.Status.Preserved, "cli-1")).To(Equal(retirement.ReasonRepositoryAmbiguous))
		Expect(approve(gitops(), p)).To(Succeed())
		p = waitOutcome(p, "applied")
		Expect(p.Status.Retired).To(Equal([]string{"lib-1", "lib-2"}))
		Expect(get(lib1).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired))
		Expect(get(lib2).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired))
		expectActive(app, cli)
	})

	It("retires nothing when its binding names no repository object of the namespace", func() {
		ns, other := newNamespace(), newNamespace()
		giteaRepository(ns, "gitea-a", "acme/app", 1)
		giteaRepository(ns, "gitea-b", "acme/twin", 2)
		giteaRepository(ns, "gitea-a", "acme/twin", 3)
		giteaRepository(ns, "gitea-a", "acme/fresh", 0)
		giteaRepository(other, "gitea-a", "acme/theirs", 4)
		eligible(ns, "theirs-1", boundTo("acme/theirs"))
		eligible(ns, "twin-1", boundTo("acme/twin"))
		eligible(ns, "app-1", boundTo("acme/app"))

		for repo, why := range map[string]string{
			// Another namespace's repository is not this namespace's to retire in.
			"acme/theirs": "acme/theirs is named by no GiteaRepository of the namespace",
			// Two objects name it, on two servers: which one is meant cannot be told.
			"acme/twin": "both name acme/twin",
			// Its object has not resolved a Gitea repository ID: nothing to compare with.
			"acme/fresh": "has not resolved a Gitea repository ID",
		} {
			p := planFor(ns, repo)
			Expect(p.Status.CandidateCount).To(BeZero(), "a plan bound to %s", repo)
			Expect(p.Status.PreservedReasonCounts).To(HaveKeyWithValue(retirement.ReasonRepositoryAmbiguous, BeEquivalentTo(3)))
			for _, a := range p.Status.Preserved {
				Expect(a.Detail).To(ContainSubstring(why), "%s in a plan bound to %s", a.WorkerIdentity, repo)
			}
		}
	})

	It("retires nothing when the repository object was replaced by one on another server between plan and apply", func() {
		ns := newNamespace()
		// The same owner/name and the same Gitea ID, on two servers: two repositories.
		onA := giteaRepository(ns, "gitea-a", "acme/app", 7)
		rows := []*fleetv1alpha1.WorkerRegistration{eligible(ns, "app-1", boundTo("acme/app")), eligible(ns, "app-2", boundTo("acme/app"))}
		p := planFor(ns, "acme/app")
		Expect(p.Status.CandidateWorkerIdentities).To(Equal([]string{"app-1", "app-2"}))

		By("the object is deleted and one on another server naming the same repository takes its place")
		Expect(k8sClient.Delete(ctx, onA)).To(Succeed())
		giteaRepository(ns, "gitea-b", "acme/app", 7)

		Expect(approve(gitops(), p)).To(Succeed())
		p = waitOutcome(p, fleetv1alpha1.OutcomeRegistryRevisionMoved)
		Expect(p.Status.RetiredCount).To(BeZero())
		expectActive(rows...)
	})
})
