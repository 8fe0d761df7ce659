//go:build e2e

package e2e_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/giteatools/fleet-controller/internal/hostagent"
)

// managerPods are the DaemonSet's pods, by node name.
func managerPods() map[string]corev1.Pod {
	GinkgoHelper()
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/name": "fleet-controller"})).To(Succeed())
	out := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = p
		}
	}
	return out
}

func ready(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeMachineIDs are the nodes' machine ids, as their kubelets report them.
func nodeMachineIDs() map[string]string {
	GinkgoHelper()
	nodes := &corev1.NodeList{}
	Expect(k8s.List(ctx, nodes)).To(Succeed())
	out := map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Status.NodeInfo.MachineID
	}
	return out
}

// agentLine is what a manager logs when it campaigns for its host.
var agentLine = regexp.MustCompile(`"Campaigning for this host".*"hostID":"([0-9a-f]+)".*"agent":"([^"]+)"`)

var _ = Describe("The shipped DaemonSet", Ordered, func() {
	It("runs Ready on both nodes, non-root with a read-only root filesystem, and stays up", func() {
		Eventually(func(g Gomega) {
			pods := managerPods()
			g.Expect(pods).To(HaveKey("node1"))
			g.Expect(pods).To(HaveKey("node2"))
			for node, p := range pods {
				g.Expect(ready(p)).To(BeTrue(), "the manager on %s is Ready", node)
			}
		}).Should(Succeed())
		for node, p := range managerPods() {
			c := p.Spec.Containers[0]
			Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), node)
			Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), node)
			Expect(c.SecurityContext.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")), node)
			Expect(p.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()), node)
			for _, v := range p.Spec.Volumes {
				if v.EmptyDir == nil {
					continue
				}
				// The one writable scratch volume: /tmp, where the gateway spools a large
				// push's pack, bounded.
				Expect(v.Name).To(Equal("tmp"), "no other writable scratch volume on %s", node)
				Expect(v.EmptyDir.SizeLimit).NotTo(BeNil(), "the scratch volume on %s is bounded", node)
			}
		}
		// Stays up: a crash at start (as when envtest's init wanted a writable /tmp)
		// shows as restarts within seconds.
		Consistently(func(g Gomega) {
			for node, p := range managerPods() {
				g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
				g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero(), "restarts of the manager on %s", node)
			}
		}, 15*time.Second, time.Second).Should(Succeed())
	})

	It("makes each node's manager the agent holding its own node's host Lease", func() {
		ids := nodeMachineIDs()
		Expect(ids["node1"]).NotTo(Equal(ids["node2"]), "hack/cluster.sh gives each node its own machine id")
		for node, p := range managerPods() {
			var hostID, agent string
			Eventually(func(g Gomega) {
				logs, err := cs.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				m := agentLine.FindStringSubmatch(string(logs))
				g.Expect(m).NotTo(BeNil(), "the manager on %s logs its campaign", node)
				hostID, agent = m[1], m[2]
			}).Should(Succeed())
			Expect(hostID).To(Equal(ids[node]), "the manager on %s reads its node's /etc/machine-id", node)
			Eventually(func(g Gomega) {
				lease := &coordinationv1.Lease{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: hostagent.LeaseName(hostID)}, lease)).To(Succeed())
				g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Equal(agent)), "the host Lease of %s is held by the manager on it", node)
			}).Should(Succeed())
		}
	})

	It("serves its metrics over HTTPS to a token allowed to read them, and to no one else", func() {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "e2e-scraper", Namespace: namespace}}
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, sa))).To(Succeed())
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-scraper-metrics"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fleet-controller-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: namespace}},
		}
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, binding))).To(Succeed())
		other := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "e2e-nobody", Namespace: namespace}}
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, other))).To(Succeed())
		token := func(name string) string {
			GinkgoHelper()
			tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
				&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return tr.Status.Token
		}
		allowed, refused := token(sa.Name), token(other.Name)
		// The manager's serving certificate is its own, self-signed: what is checked here is
		// who may read, not who serves.
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		scrape := func(ip, bearer string) (int, string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://%s:8443/metrics", ip), nil)
			if err != nil {
				return 0, "", err
			}
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			resp, err := hc.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), err
		}
		for node, p := range managerPods() {
			Eventually(func(g Gomega) {
				code, body, err := scrape(p.Status.PodIP, allowed)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(code).To(Equal(http.StatusOK), "metrics of the manager on %s", node)
				g.Expect(body).To(ContainSubstring("fleet_gitea_hardening_findings"))
				g.Expect(body).To(ContainSubstring(`controller_runtime_reconcile_total{controller="retirementplan-host"`))
			}).Should(Succeed())
			code, _, err := scrape(p.Status.PodIP, refused)
			Expect(err).NotTo(HaveOccurred())
			Expect(code).To(Equal(http.StatusForbidden), "a token without the metrics-reader role on %s", node)
			code, body, err := scrape(p.Status.PodIP, "")
			Expect(err).NotTo(HaveOccurred())
			Expect(code).To(Equal(http.StatusUnauthorized), "no token on %s: %s", node, strings.TrimSpace(body))
		}
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, binding))).To(Succeed())
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(binding), binding))).To(BeTrue())
	})
})
