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

// giteaRepository creates a GiteaRepository naming owner/name on server in ns. Nothing
// checks it against a Gitea here: a plan's binding asks only which repository objects
// the namespace has.
func giteaRepository(ns, server, ownerName string) {
	GinkgoHelper()
	owner, name, _ := strings.Cut(ownerName, "/")
	r := &fleetv1alpha1.GiteaRepository{ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("repo"), Namespace: ns},
		Spec: fleetv1alpha1.GiteaRepositorySpec{Server: server, Owner: owner, Name: name}}
	Expect(k8sClient.Create(ctx, r)).To(Succeed())
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
		giteaRepository(ns, "gitea-a", "acme/app")
		giteaRepository(ns, "gitea-a", "acme/lib")
		giteaRepository(ns, "gitea-b", "tools/cli")
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
		giteaRepository(ns, "gitea-a", "acme/app")
		giteaRepository(ns, "gitea-b", "acme/twin")
		giteaRepository(ns, "gitea-a", "acme/twin")
		giteaRepository(other, "gitea-a", "acme/theirs")
		eligible(ns, "theirs-1", boundTo("acme/theirs"))
		eligible(ns, "twin-1", boundTo("acme/twin"))
		eligible(ns, "app-1", boundTo("acme/app"))

		for repo, why := range map[string]string{
			// Another namespace's repository is not this namespace's to retire in.
			"acme/theirs": "acme/theirs is named by no GiteaRepository of the namespace",
			// Two objects name it, on two servers: which one is meant cannot be told.
			"acme/twin": "both name acme/twin",
		} {
			p := planFor(ns, repo)
			Expect(p.Status.CandidateCount).To(BeZero(), "a plan bound to %s", repo)
			Expect(p.Status.PreservedReasonCounts).To(HaveKeyWithValue(retirement.ReasonRepositoryAmbiguous, BeEquivalentTo(3)))
			for _, a := range p.Status.Preserved {
				Expect(a.Detail).To(ContainSubstring(why), "%s in a plan bound to %s", a.WorkerIdentity, repo)
			}
		}
	})
})
