package gitearepository_test

import (
	"fmt"
	"time"

	"code.gitea.io/sdk/gitea"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// tokenSecret creates a Secret in the controller's namespace holding token under "token".
func tokenSecret(token string) string {
	GinkgoHelper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("gitea-token"), Namespace: controllerNamespace},
		Data: map[string][]byte{"token": []byte(token)}}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	return s.Name
}

// newServer creates a GiteaServer for url whose token is in the Secret named secret.
func newServer(url, secret string) *fleetv1alpha1.GiteaServer {
	GinkgoHelper()
	s := &fleetv1alpha1.GiteaServer{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("gitea")},
		Spec:       fleetv1alpha1.GiteaServerSpec{URL: url, TokenSecretRef: fleetv1alpha1.SecretKeyRef{Name: secret}},
	}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, s))).To(Succeed()) })
	return s
}

// readyServer is a Ready GiteaServer for the suite's Gitea, with the administrator's token.
func readyServer() *fleetv1alpha1.GiteaServer {
	GinkgoHelper()
	s := newServer(forgeSrv.URL, tokenSecret(forgeSrv.Token))
	Eventually(readyOf(s)).Should(HaveField("Reason", fleetv1alpha1.ReasonServerConnected))
	return s
}

// newRepository creates a GiteaRepository for owner/name on server in namespace ns.
func newRepository(ns, server, fullName string) *fleetv1alpha1.GiteaRepository {
	GinkgoHelper()
	owner, name := split(fullName)
	r := &fleetv1alpha1.GiteaRepository{
		ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("repo"), Namespace: ns},
		Spec:       fleetv1alpha1.GiteaRepositorySpec{Server: server, Owner: owner, Name: name},
	}
	Expect(k8sClient.Create(ctx, r)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, r))).To(Succeed()) })
	return r
}

func split(fullName string) (string, string) {
	for i := range fullName {
		if fullName[i] == '/' {
			return fullName[:i], fullName[i+1:]
		}
	}
	return fullName, ""
}

// giteaRepo creates a repository in Gitea, its default branch main protected with only
// the controller's account as pusher unless protect is false, and returns its full name
// and ID.
func giteaRepo(protect bool) (string, int64) {
	GinkgoHelper()
	full, err := forgeSrv.CreateRepo(ctx, forgeSrv.Token, testenv.Uniq("app"))
	Expect(err).NotTo(HaveOccurred())
	if protect {
		// The controller's account alone may push: it publishes the claim rule set.
		Expect(forgeSrv.ProtectBranch(ctx, full, "main", forgeSrv.AdminLogin)).To(Succeed())
	}
	owner, name := split(full)
	repo, _, err := forgeSrv.Admin(ctx).GetRepo(owner, name)
	Expect(err).NotTo(HaveOccurred())
	return full, repo.ID
}

// readyOf returns the object's Ready condition, as the API server holds it, for Eventually.
func readyOf(o client.Object) func() *metav1.Condition {
	return func() *metav1.Condition {
		fresh := o.DeepCopyObject().(client.Object)
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(o), fresh); err != nil {
			return nil
		}
		var conds []metav1.Condition
		switch f := fresh.(type) {
		case *fleetv1alpha1.GiteaServer:
			conds = f.Status.Conditions
		case *fleetv1alpha1.GiteaRepository:
			conds = f.Status.Conditions
		}
		return meta.FindStatusCondition(conds, fleetv1alpha1.ReadyCondition)
	}
}

func getRepo(r *fleetv1alpha1.GiteaRepository) *fleetv1alpha1.GiteaRepository {
	GinkgoHelper()
	fresh := &fleetv1alpha1.GiteaRepository{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r), fresh)).To(Succeed())
	return fresh
}

var _ = Describe("GiteaServer", func() {
	It("is Ready with the version and the account its token answers as", func() {
		s := readyServer()
		Eventually(readyOf(s)).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("ObservedGeneration", s.Generation)))
		fresh := &fleetv1alpha1.GiteaServer{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), fresh)).To(Succeed())
		Expect(fresh.Status.Login).To(Equal(forgeSrv.AdminLogin))
		Expect(fresh.Status.Version).To(HavePrefix("1.27"))
		Expect(fresh.Status.ObservedGeneration).To(Equal(fresh.Generation))
	})

	It("says why it is not Ready: no Secret, then a refused token, and becomes Ready once the Secret is right", func() {
		name := testenv.Uniq("gitea-token")
		s := newServer(forgeSrv.URL, name)
		Eventually(readyOf(s)).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", fleetv1alpha1.ReasonTokenSecretInvalid), HaveField("Message", ContainSubstring(controllerNamespace+"/"+name))))

		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: controllerNamespace},
			Data: map[string][]byte{"token": []byte("0123456789abcdef0123456789abcdef01234567")}}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		Eventually(readyOf(s)).Should(HaveField("Reason", fleetv1alpha1.ReasonTokenInvalid))

		secret.Data["token"] = []byte(forgeSrv.Token)
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		Eventually(readyOf(s)).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", fleetv1alpha1.ReasonServerConnected)))
	})

	It("is not Ready on a port where nothing answers, on a key the Secret lacks, or with a CA bundle that holds no certificate", func() {
		port, err := testgitea.FreePort()
		Expect(err).NotTo(HaveOccurred())
		down := newServer("http://127.0.0.1:"+port, tokenSecret(forgeSrv.Token))
		Eventually(readyOf(down)).Should(HaveField("Reason", fleetv1alpha1.ReasonServerUnreachable))

		key := &fleetv1alpha1.GiteaServer{ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("gitea")}, Spec: fleetv1alpha1.GiteaServerSpec{
			URL: forgeSrv.URL, TokenSecretRef: fleetv1alpha1.SecretKeyRef{Name: tokenSecret(forgeSrv.Token), Key: "other"}}}
		Expect(k8sClient.Create(ctx, key)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, key)).To(Succeed()) })
		Eventually(readyOf(key)).Should(And(HaveField("Reason", fleetv1alpha1.ReasonTokenSecretInvalid), HaveField("Message", ContainSubstring(`"other"`))))

		ca := &fleetv1alpha1.GiteaServer{ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("gitea")}, Spec: fleetv1alpha1.GiteaServerSpec{
			URL: forgeSrv.URL, CABundle: []byte("not a certificate"), TokenSecretRef: fleetv1alpha1.SecretKeyRef{Name: tokenSecret(forgeSrv.Token)}}}
		Expect(k8sClient.Create(ctx, ca)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, ca)).To(Succeed()) })
		Eventually(readyOf(ca)).Should(HaveField("Reason", fleetv1alpha1.ReasonCABundleInvalid))
	})

	It("is not Ready when what answers is not Gitea's API", func() {
		s := newServer(forgeSrv.URL+"/no-such-prefix", tokenSecret(forgeSrv.Token))
		Eventually(readyOf(s)).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", fleetv1alpha1.ReasonServerUnreachable)))
	})
})

var _ = Describe("GiteaRepository", func() {
	It("resolves to the Gitea repository ID once, and keeps it through a rename in Gitea", func() {
		s := readyServer()
		full, id := giteaRepo(true)
		r := newRepository("default", s.Name, full)
		Eventually(readyOf(r)).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved),
			HaveField("ObservedGeneration", r.Generation)))
		got := getRepo(r)
		Expect(got.Status.RepositoryID).To(Equal(id))
		Expect(got.Status.FullName).To(Equal(full))
		Expect(got.Status.DefaultBranch).To(Equal("main"))

		owner, name := split(full)
		renamed := name + "-renamed"
		_, _, err := forgeSrv.Admin(ctx).EditRepo(owner, name, gitea.EditRepoOption{Name: &renamed})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { return getRepo(r).Status.FullName }).Should(Equal(owner + "/" + renamed))
		got = getRepo(r)
		Expect(got.Status.RepositoryID).To(Equal(id), "a rename changes no key")
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.ReadyCondition)).To(BeTrue())

		By("a new repository under the old name: the object stays with the one it resolved to")
		_, err = forgeSrv.CreateRepo(ctx, forgeSrv.Token, name)
		Expect(err).NotTo(HaveOccurred())
		Consistently(func() string { return getRepo(r).Status.FullName }, "3s").Should(Equal(owner + "/" + renamed))
		Expect(getRepo(r).Status.RepositoryID).To(Equal(id))

		By("the repository deleted in Gitea")
		_, err = forgeSrv.Admin(ctx).DeleteRepo(owner, renamed)
		Expect(err).NotTo(HaveOccurred())
		Eventually(readyOf(r)).Should(And(HaveField("Reason", fleetv1alpha1.ReasonRepositoryNotFound),
			HaveField("Message", ContainSubstring(fmt.Sprintf("ID %d", id)))))
		Expect(getRepo(r).Status.RepositoryID).To(Equal(id), "the key stays what it resolved to")
	})

	It("is not Ready while its default branch is unprotected, and becomes Ready once it is protected", func() {
		s := readyServer()
		full, _ := giteaRepo(false)
		r := newRepository("default", s.Name, full)
		Eventually(readyOf(r)).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", fleetv1alpha1.ReasonDefaultBranchUnprotected),
			HaveField("Message", ContainSubstring("main is not protected"))))
		// The controller's account alone may push: it publishes the claim rule set.
		Expect(forgeSrv.ProtectBranch(ctx, full, "main", forgeSrv.AdminLogin)).To(Succeed())
		Eventually(readyOf(r)).Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))
	})

	It("is not Ready while a worker identity may push to the default branch, or is a site administrator", func() {
		s := readyServer()
		worker := testenv.Uniq("worker")
		_, err := forgeSrv.CreateUser(ctx, worker)
		Expect(err).NotTo(HaveOccurred())
		full, _ := giteaRepo(false)
		Expect(forgeSrv.AddCollaborator(ctx, full, worker)).To(Succeed())
		Expect(forgeSrv.ProtectBranch(ctx, full, "main", worker)).To(Succeed())
		credential := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("cred"), Namespace: credentialsNamespace,
			Labels: map[string]string{fleetv1alpha1.GiteaLoginLabel: worker}}, Data: map[string][]byte{"token": []byte("x")}}
		Expect(k8sClient.Create(ctx, credential)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, credential))).To(Succeed()) })

		r := newRepository("default", s.Name, full)
		Eventually(readyOf(r)).Should(And(HaveField("Reason", fleetv1alpha1.ReasonWorkerCanWriteAroundGateway),
			HaveField("Message", ContainSubstring(worker+" may push to main"))))

		By("the worker made a site administrator instead")
		owner, name := split(full)
		rules, _, err := forgeSrv.Admin(ctx).ListBranchProtections(owner, name, gitea.ListBranchProtectionsOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, rule := range rules {
			_, err := forgeSrv.Admin(ctx).DeleteBranchProtection(owner, name, rule.RuleName)
			Expect(err).NotTo(HaveOccurred())
		}
		// The controller's account alone may push: it publishes the claim rule set.
		Expect(forgeSrv.ProtectBranch(ctx, full, "main", forgeSrv.AdminLogin)).To(Succeed())
		admin := true
		_, err = forgeSrv.Admin(ctx).AdminEditUser(worker, gitea.EditUserOption{LoginName: worker, Admin: &admin})
		Expect(err).NotTo(HaveOccurred())
		Eventually(readyOf(r)).Should(HaveField("Message", ContainSubstring(worker+" is a Gitea site administrator")))

		By("the credential removed: no worker identity is a site administrator")
		Expect(k8sClient.Delete(ctx, credential)).To(Succeed())
		Eventually(readyOf(r)).Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))
	})

	It("says when the server or the repository does not exist, or the server is not Ready", func() {
		gone := newRepository("default", testenv.Uniq("no-server"), "acme/app")
		Eventually(readyOf(gone)).Should(HaveField("Reason", fleetv1alpha1.ReasonServerNotFound))

		s := readyServer()
		missing := newRepository("default", s.Name, forgeSrv.AdminLogin+"/"+testenv.Uniq("absent"))
		Eventually(readyOf(missing)).Should(And(HaveField("Reason", fleetv1alpha1.ReasonRepositoryNotFound),
			HaveField("Message", ContainSubstring("has no repository"))))

		bad := newServer(forgeSrv.URL, tokenSecret("0123456789abcdef0123456789abcdef01234567"))
		full, _ := giteaRepo(true)
		r := newRepository("default", bad.Name, full)
		Eventually(readyOf(r)).Should(And(HaveField("Reason", fleetv1alpha1.ReasonServerNotReady),
			HaveField("Message", ContainSubstring(fleetv1alpha1.ReasonTokenInvalid))))
		Expect(getRepo(r).Status.RepositoryID).To(BeZero(), "nothing is read from a server that is not Ready")
	})

	It("uses only the oldest of two objects for one repository in a namespace", func() {
		s := readyServer()
		full, id := giteaRepo(true)
		first := newRepository("default", s.Name, full)
		Eventually(readyOf(first)).Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))
		second := newRepository("default", s.Name, full)
		Eventually(readyOf(second)).Should(And(HaveField("Reason", fleetv1alpha1.ReasonDuplicateRepository),
			HaveField("Message", ContainSubstring(first.Name))))
		Expect(getRepo(second).Status.RepositoryID).To(Equal(id))
		Consistently(readyOf(first), "2s").Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))

		By("another namespace may name the same repository")
		other, err := env.NewNamespace(ctx, "tenant")
		Expect(err).NotTo(HaveOccurred())
		elsewhere := newRepository(other, s.Name, full)
		Eventually(readyOf(elsewhere)).Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))

		By("the older one deleted")
		Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		Eventually(readyOf(second)).Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))
	})

	It("records each change of its verdict as an Event", func() {
		s := readyServer()
		full, _ := giteaRepo(false)
		r := newRepository("default", s.Name, full)
		Eventually(readyOf(r)).Should(HaveField("Reason", fleetv1alpha1.ReasonDefaultBranchUnprotected))
		// The controller's account alone may push: it publishes the claim rule set.
		Expect(forgeSrv.ProtectBranch(ctx, full, "main", forgeSrv.AdminLogin)).To(Succeed())
		Eventually(readyOf(r)).Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))
		Eventually(func() []string {
			list := &corev1.EventList{}
			Expect(k8sClient.List(ctx, list, client.InNamespace("default"))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				if e.InvolvedObject.Name == r.Name && e.InvolvedObject.Kind == "GiteaRepository" {
					reasons = append(reasons, e.Type+"/"+e.Reason)
				}
			}
			return reasons
		}).Should(ContainElements("Warning/"+fleetv1alpha1.ReasonDefaultBranchUnprotected, "Normal/"+fleetv1alpha1.ReasonRepositoryResolved))
	})

	It("keeps the controller's requests to its server within the server's budget", func() {
		proxy, err := forgeSrv.NewProxy()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(proxy.Stop)
		s := &fleetv1alpha1.GiteaServer{ObjectMeta: metav1.ObjectMeta{Name: testenv.Uniq("gitea")}, Spec: fleetv1alpha1.GiteaServerSpec{
			URL: proxy.URL, RequestsPerSecond: 2, TokenSecretRef: fleetv1alpha1.SecretKeyRef{Name: tokenSecret(forgeSrv.Token)}}}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, s)).To(Succeed()) })
		Eventually(readyOf(s)).Should(HaveField("Reason", fleetv1alpha1.ReasonServerConnected))
		full, _ := giteaRepo(true)
		r := newRepository("default", s.Name, full)
		Eventually(readyOf(r)).Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))

		// Unpaced, the server's check (two requests) and the repository's (five or more)
		// every second would send about eight requests a second.
		proxy.Reset()
		time.Sleep(5 * time.Second)
		Expect(proxy.Requests()).To(BeNumerically("<=", 2*5+2), "a burst of 2, then 2 a second")
		Expect(proxy.Requests()).To(BeNumerically(">", 0), "the checks go on")
	})

	It("marks a server that stops answering, and its repositories, not Ready until it answers again", func() {
		proxy, err := forgeSrv.NewProxy()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(proxy.Stop)
		s := newServer(proxy.URL, tokenSecret(forgeSrv.Token))
		Eventually(readyOf(s)).Should(HaveField("Reason", fleetv1alpha1.ReasonServerConnected))
		full, _ := giteaRepo(true)
		r := newRepository("default", s.Name, full)
		Eventually(readyOf(r)).Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))

		Expect(proxy.Stop()).To(Succeed())
		Eventually(readyOf(s)).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", fleetv1alpha1.ReasonServerUnreachable)))
		Eventually(readyOf(r)).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", fleetv1alpha1.ReasonServerNotReady)))

		Expect(proxy.Start()).To(Succeed())
		Eventually(readyOf(s)).Should(HaveField("Reason", fleetv1alpha1.ReasonServerConnected))
		Eventually(readyOf(r)).Should(HaveField("Reason", fleetv1alpha1.ReasonRepositoryResolved))
	})

	It("is read by the workers of its namespace, who can change none of it", func() {
		ns, err := env.NewNamespace(ctx, "workers")
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fleet-worker-w", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fleet-worker"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "w", Namespace: ns}}})).To(Succeed())
		user, groups := testenv.ServiceAccount(ns, "w")
		worker, err := env.Impersonate(user, groups...)
		Expect(err).NotTo(HaveOccurred())
		r := newRepository(ns, "gitea-a", "acme/app")

		Eventually(func() error {
			return worker.List(ctx, &fleetv1alpha1.GiteaRepositoryList{}, client.InNamespace(ns))
		}).Should(Succeed())
		mine := &fleetv1alpha1.GiteaRepository{}
		Expect(worker.Get(ctx, client.ObjectKeyFromObject(r), mine)).To(Succeed())
		mine.Spec.MaxActiveClaims = ptrTo(int32(1))
		Expect(apierrors.IsForbidden(worker.Update(ctx, mine))).To(BeTrue(), "a worker changes no repository")
		Expect(apierrors.IsForbidden(worker.List(ctx, &fleetv1alpha1.GiteaRepositoryList{}, client.InNamespace("default")))).To(BeTrue(),
			"nor reads another namespace's")
		Expect(apierrors.IsForbidden(worker.List(ctx, &fleetv1alpha1.GiteaServerList{}))).To(BeTrue(), "nor the servers")
	})
})

func ptrTo[T any](v T) *T { return &v }
