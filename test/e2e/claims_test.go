//go:build e2e

package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// giteaForPods is the Gitea hack/e2e.sh starts, as pods reach it: the host's end of the
// link to the cluster's network namespace (hack/cluster.sh). It serves the manager's
// --gitea-url and --repository (fleet/demo), and is the GiteaServer "demo".
const giteaForPods = "http://10.243.0.1:3931"

// firstGitea is that Gitea as the suite reads it.
var firstGitea = giteaServer{name: "demo", url: giteaForPods, tokenFileEnv: "FLEET_E2E_GITEA_TOKEN_FILE"}

// claimFromPod runs kubectl fleet claim in the worker's pod, as the worker (the pod's
// ServiceAccount), reading Gitea directly, and returns its exit code and output.
func claimFromPod(ns, pod string, issue int) (int, string) {
	GinkgoHelper()
	return inPod(ns, pod, "/kubectl-fleet", "claim", "issue", fmt.Sprint(issue),
		"--worker", pod, "--gitea-url", giteaForPods, "--timeout", "90s")
}

// inPod runs a command in the pod with kubectl exec and returns its exit code and
// output.
func inPod(ns, pod string, command ...string) (int, string) {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"-n", ns, "exec", pod, "--"}, command...)...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	Expect(err).NotTo(HaveOccurred(), string(out))
	return 0, string(out)
}

// gatewayURL is the gateway as pods reach it: the Service's ClusterIP (there is no
// cluster DNS), which kube-proxy forwards to a manager pod on either node.
func gatewayURL() string {
	GinkgoHelper()
	svc := &corev1.Service{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "fleet-controller"}, svc)).To(Succeed())
	return fmt.Sprintf("http://%s:8083", svc.Spec.ClusterIP)
}

// comment posts a comment on an issue of repository from inside worker pod ns/pod: the
// pod's /post sends it to the gateway Service with the gateway token projected into the
// pod, and the answer's status code and body come back.
func comment(ns, pod, repository string, issue int, body string) (int, string) {
	GinkgoHelper()
	code, answer, err := commentErr(gatewayURL(), ns, pod, repository, issue, body)
	Expect(err).NotTo(HaveOccurred())
	return code, answer
}

func commentErr(gateway, ns, pod, repository string, issue int, body string) (int, string, error) {
	b, err := json.Marshal(map[string]string{"body": body})
	if err != nil {
		return 0, "", err
	}
	out, err := kubectlErr("-n", ns, "exec", pod, "--", "/post", "/var/run/fleet/gateway/token",
		fmt.Sprintf("%s/api/v1/repos/%s/issues/%d/comments", gateway, repository, issue), string(b))
	if err != nil {
		return 0, "", err
	}
	status, answer, _ := strings.Cut(out, "\n")
	code, err := strconv.Atoi(status)
	if err != nil {
		return 0, "", fmt.Errorf("the first line of /post's output is not a status code: %q", out)
	}
	return code, strings.TrimSpace(answer), nil
}

// giteaServer is a Gitea hack/e2e.sh starts, read from the host with its
// administrator's token (whose file the environment variable names).
type giteaServer struct{ name, url, tokenFileEnv string }

// get decodes the JSON answer of an API path.
func (s giteaServer) get(path string, into any) {
	GinkgoHelper()
	token, err := os.ReadFile(os.Getenv(s.tokenFileEnv))
	Expect(err).NotTo(HaveOccurred(), "hack/e2e.sh sets %s", s.tokenFileEnv)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1"+path, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "token "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET %s%s", s.url, path)
	Expect(json.NewDecoder(resp.Body).Decode(into)).To(Succeed())
}

// comments lists the authors and bodies of an issue's comments.
func (s giteaServer) comments(repository string, issue int) []string {
	GinkgoHelper()
	var comments []struct {
		Body string `json:"body"`
		User struct {
			Login string `json:"login"`
		} `json:"user"`
	}
	s.get(fmt.Sprintf("/repos/%s/issues/%d/comments", repository, issue), &comments)
	out := make([]string, 0, len(comments))
	for _, c := range comments {
		out = append(out, c.User.Login+": "+c.Body)
	}
	return out
}

// issueBody is an issue's body, where a claim's record lives.
func (s giteaServer) issueBody(repository string, issue int) string {
	GinkgoHelper()
	var is struct {
		Body string `json:"body"`
	}
	s.get(fmt.Sprintf("/repos/%s/issues/%d", repository, issue), &is)
	return is.Body
}

// giteaComments lists the authors and bodies of the comments of an issue of fleet/demo
// on the first Gitea.
func giteaComments(issue int) []string {
	GinkgoHelper()
	return firstGitea.comments("fleet/demo", issue)
}

// activeClaims are the TaskClaims of ns not ended, by issue number.
func activeClaims(ns string) map[int64][]fleetv1alpha1.TaskClaim {
	GinkgoHelper()
	list := &fleetv1alpha1.TaskClaimList{}
	Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	out := map[int64][]fleetv1alpha1.TaskClaim{}
	for _, c := range list.Items {
		if c.Status.Phase == fleetv1alpha1.ClaimPhaseActive {
			out[c.Spec.Target.Number] = append(out[c.Spec.Target.Number], c)
		}
	}
	return out
}

var _ = Describe("Claims from worker pods", Ordered, func() {
	const ns = "e2e-claims"
	workers := []struct{ name, node, identity string }{{"pc-1", "node1", "worker-1"}, {"pc-2", "node2", "worker-2"}, {"pc-3", "node1", "worker-3"}}

	BeforeAll(func() {
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		kubectl("-n", ns, "create", "role", "register", "--verb=create", "--resource=workerregistrations.fleet.giteatools.dev")
		for _, w := range workers {
			allowWorker(ns, w.name)
			Expect(k8s.Create(ctx, workerPodAs(ns, w.name, w.node, w.identity, "fleet/demo"))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, w := range workers {
				wr := &fleetv1alpha1.WorkerRegistration{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: w.name}, wr)).To(Succeed())
				g.Expect(wr.Status.OwnershipState).To(Equal(fleetv1alpha1.OwnershipLive))
			}
		}).Should(Succeed())
	})

	It("lets a worker pod write, from inside the pod, through the gateway Service with its projected token only while it holds a claim", func() {
		code, body := comment(ns, "pc-1", "fleet/demo", 1, "before any claim")
		Expect(code).To(Equal(http.StatusForbidden), body)

		code, out := claimFromPod(ns, "pc-1", 1)
		Expect(code).To(BeZero(), out)
		// The claims of an identity are selectable by its key, in every namespace.
		Expect(strings.TrimSpace(kubectl("get", "taskclaims", "-A", "--field-selector", "status.identityKey=worker-1,status.phase=Active",
			"-o", "jsonpath={.items[*].spec.worker}"))).To(Equal("pc-1"))
		code, body = comment(ns, "pc-1", "fleet/demo", 1, "e2e: written through the gateway under a claim")
		Expect(code).To(Equal(http.StatusCreated), body)
		Expect(giteaComments(1)).To(ContainElement("worker-1: e2e: written through the gateway under a claim"))
		Expect(giteaComments(1)).NotTo(ContainElement(ContainSubstring("before any claim")))

		// Another worker's token, without a claim on issue 1, writes nothing there.
		code, body = comment(ns, "pc-2", "fleet/demo", 1, "not mine")
		Expect(code).To(Equal(http.StatusForbidden), body)
	})

	It("keeps every active claim through a rollout restart of the DaemonSet: none lost, none doubled", func() {
		code, out := claimFromPod(ns, "pc-2", 2)
		Expect(code).To(BeZero(), out)
		before := activeClaims(ns)
		Expect(before[1]).To(HaveLen(1))
		Expect(before[2]).To(HaveLen(1))

		kubectl("-n", namespace, "rollout", "restart", "ds/fleet-controller")
		kubectl("-n", namespace, "rollout", "status", "ds/fleet-controller", "--timeout=300s")

		Consistently(func(g Gomega) {
			after := activeClaims(ns)
			for issue, claims := range before {
				g.Expect(after[issue]).To(HaveLen(1), "one active claim on issue %d", issue)
				g.Expect(after[issue][0].UID).To(Equal(claims[0].UID), "the same claim on issue %d", issue)
			}
		}, 10*time.Second, time.Second).Should(Succeed())

		// The claims still hold: a third worker is refused issue 1 for contention, and the
		// holder still writes through the restarted managers' gateway.
		code, out = claimFromPod(ns, "pc-3", 1)
		Expect(code).To(Equal(10), "contention: %s", out)
		Expect(activeClaims(ns)[1]).To(HaveLen(1))
		gateway := gatewayURL()
		for issue, worker := range map[int]string{1: "pc-1", 2: "pc-2"} {
			Eventually(func(g Gomega) {
				code, body, err := commentErr(gateway, ns, worker, "fleet/demo", issue, "e2e: still mine after the restart")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(code).To(Equal(http.StatusCreated), body)
			}).Should(Succeed(), "%s writes on issue %d after the restart", worker, issue)
		}
	})
})
