package crd_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

func newServer(url string) *fleetv1alpha1.GiteaServer {
	return &fleetv1alpha1.GiteaServer{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("gitea")},
		Spec:       fleetv1alpha1.GiteaServerSpec{URL: url, TokenSecretRef: fleetv1alpha1.SecretKeyRef{Name: "gitea-token"}},
	}
}

func newRepository(owner, name string) *fleetv1alpha1.GiteaRepository {
	return &fleetv1alpha1.GiteaRepository{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("repo"), Namespace: "default"},
		Spec:       fleetv1alpha1.GiteaRepositorySpec{Server: "gitea-a", Owner: owner, Name: name},
	}
}

var _ = Describe("GiteaServer validation", func() {
	It("accepts an http or https URL, with a path prefix, and fills in the defaults", func() {
		for _, u := range []string{"https://gitea.example.com", "http://10.0.0.7:3000/", "https://example.com/git"} {
			s := newServer(u)
			Expect(k8sClient.Create(ctx, s)).To(Succeed(), u)
			Expect(s.Spec.TokenSecretRef.Key).To(Equal("token"), "the Secret's key defaults to token")
			Expect(s.Spec.RequestsPerSecond).To(BeEquivalentTo(20), "the request budget defaults to 20 a second")
		}
	})

	It("refuses a URL that is not an absolute http(s) URL of a host, and one with a query, fragment or user", func() {
		for u, want := range map[string]string{
			"gitea.example.com":                  "absolute http or https URL",
			"ftp://gitea.example.com":            "absolute http or https URL",
			"https://":                           "absolute http or https URL",
			"https://gitea.example.com/?a=b":     "query",
			"https://gitea.example.com/#x":       "fragment",
			"https://admin:pw@gitea.example.com": "user information",
		} {
			expectInvalid(k8sClient.Create(ctx, newServer(u)), want)
		}
	})

	It("refuses a token Secret name that no Secret can have, a budget out of range, and no URL", func() {
		s := newServer("https://gitea.example.com")
		s.Spec.TokenSecretRef.Name = "Not_A_Name"
		expectInvalid(k8sClient.Create(ctx, s), "tokenSecretRef.name")
		s = newServer("https://gitea.example.com")
		s.Spec.RequestsPerSecond = 5000
		expectInvalid(k8sClient.Create(ctx, s), "requestsPerSecond")
		expectInvalid(k8sClient.Create(ctx, newServer("")), "spec.url")
	})
})

var _ = Describe("GiteaRepository validation", func() {
	It("accepts Gitea's owner and repository names", func() {
		Expect(k8sClient.Create(ctx, newRepository("acme_org", "app.v2-go"))).To(Succeed())
	})

	It("refuses an empty or malformed owner or name, and a cap below one", func() {
		expectInvalid(k8sClient.Create(ctx, newRepository("", "app")), "spec.owner")
		expectInvalid(k8sClient.Create(ctx, newRepository("acme", "")), "spec.name")
		expectInvalid(k8sClient.Create(ctx, newRepository("acme/evil", "app")), "spec.owner")
		expectInvalid(k8sClient.Create(ctx, newRepository("acme", strings.Repeat("a", 101))), "spec.name")
		r := newRepository("acme", "app")
		r.Spec.Server = ""
		expectInvalid(k8sClient.Create(ctx, r), "spec.server")
		r = newRepository("acme", "app")
		r.Spec.MaxActiveClaims = ptr.To[int32](0)
		expectInvalid(k8sClient.Create(ctx, r), "maxActiveClaims")
	})

	It("keeps which repository it is immutable, and lets the cap change", func() {
		r := newRepository("acme", "app")
		Expect(k8sClient.Create(ctx, r)).To(Succeed())
		rv := r.ResourceVersion
		for _, mutate := range []func(*fleetv1alpha1.GiteaRepository){
			func(g *fleetv1alpha1.GiteaRepository) { g.Spec.Server = "gitea-b" },
			func(g *fleetv1alpha1.GiteaRepository) { g.Spec.Owner = "other" },
			func(g *fleetv1alpha1.GiteaRepository) { g.Spec.Name = "other" },
		} {
			changed := r.DeepCopy()
			mutate(changed)
			expectInvalid(k8sClient.Update(ctx, changed), "server, owner and name are immutable")
			expectUnchanged(r, rv)
		}
		r.Spec.MaxActiveClaims = ptr.To[int32](3)
		Expect(k8sClient.Update(ctx, r)).To(Succeed())
	})

	It("is listed under the fleet category, with its columns, and explained", func() {
		kubectl := adminKubectl()
		Expect(k8sClient.Create(ctx, newServer("https://gitea.example.com"))).To(Succeed())
		names, errOut, err := kubectl("get", "fleet", "-A", "-o", "name")
		Expect(err).NotTo(HaveOccurred(), errOut)
		Expect(names).To(ContainSubstring("giteaserver.fleet.giteatools.dev/"))
		Expect(names).To(ContainSubstring("gitearepository.fleet.giteatools.dev/"))
		table, errOut, err := kubectl("get", "gitearepositories", "-n", "default")
		Expect(err).NotTo(HaveOccurred(), errOut)
		header := strings.Fields(strings.SplitN(table, "\n", 2)[0])
		Expect(header).To(Equal([]string{"NAME", "SERVER", "OWNER", "REPO", "ID", "READY", "REASON", "AGE"}))
		table, errOut, err = kubectl("get", "giteaservers")
		Expect(err).NotTo(HaveOccurred(), errOut)
		Expect(strings.Fields(strings.SplitN(table, "\n", 2)[0])).To(Equal([]string{"NAME", "URL", "VERSION", "READY", "REASON", "AGE"}))
		text, errOut, err := kubectl("explain", "gitearepository.status.repositoryID")
		Expect(err).NotTo(HaveOccurred(), errOut)
		Expect(text).To(ContainSubstring("a rename in Gitea changes fullName"))
		text, errOut, err = kubectl("explain", "giteaserver.spec.tokenSecretRef.name")
		Expect(err).NotTo(HaveOccurred(), errOut)
		Expect(text).To(ContainSubstring("the controller runs in"))
	})
})
