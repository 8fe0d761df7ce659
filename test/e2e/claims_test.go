//go:build e2e

package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// giteaForPods is the Gitea hack/e2e.sh starts, as pods reach it (the cluster's bridge).
const giteaForPods = "http://10.244.0.1:3931"

// claimFromPod runs kubectl fleet claim in the worker's pod, as the worker (the pod's
// ServiceAccount), and returns its exit code and output.
func claimFromPod(ns, pod string, issue int) (int, string) {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, "kubectl", "-n", ns, "exec", pod, "--", "/kubectl-fleet", "claim", "issue", fmt.Sprint(issue),
		"--worker", pod, "--gitea-url", giteaForPods, "--timeout", "90s")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	Expect(err).NotTo(HaveOccurred(), string(out))
	return 0, string(out)
}

// gatewayToken reads the projected gateway token of a worker pod, through the pod's
// /idle process's root (the nodes share this machine's /proc).
func gatewayToken(ns, name string) string {
	GinkgoHelper()
	pod := &corev1.Pod{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
	wr := &fleetv1alpha1.WorkerRegistration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wr)).To(Succeed())
	pid, err := hostPIDOf(string(pod.UID), wr.Spec.Process.PID, "/idle")
	Expect(err).NotTo(HaveOccurred())
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/var/run/fleet/gateway/token", pid))
	Expect(err).NotTo(HaveOccurred())
	return strings.TrimSpace(string(b))
}

// comment posts a comment on an issue through the gateway Service, with token.
func comment(token string, issue int, body string) (int, string) {
	GinkgoHelper()
	svc := &corev1.Service{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "fleet-controller"}, svc)).To(Succeed())
	b, _ := json.Marshal(map[string]string{"body": body})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		fmt.Sprintf("http://%s:8083/api/v1/repos/fleet/demo/issues/%d/comments", svc.Spec.ClusterIP, issue), bytes.NewReader(b))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// giteaComments lists the bodies and authors of an issue's comments, read from Gitea
// with the administrator's token.
func giteaComments(issue int) []string {
	GinkgoHelper()
	token, err := os.ReadFile(os.Getenv("FLEET_E2E_GITEA_TOKEN_FILE"))
	Expect(err).NotTo(HaveOccurred(), "hack/e2e.sh sets FLEET_E2E_GITEA_TOKEN_FILE")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/repos/fleet/demo/issues/%d/comments", giteaForPods, issue), nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "token "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var comments []struct {
		Body string `json:"body"`
		User struct {
			Login string `json:"login"`
		} `json:"user"`
	}
	Expect(json.NewDecoder(resp.Body).Decode(&comments)).To(Succeed())
	out := make([]string, 0, len(comments))
	for _, c := range comments {
		out = append(out, c.User.Login+": "+c.Body)
	}
	return out
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
			Expect(k8s.Create(ctx, workerPodAs(ns, w.name, w.node, w.identity))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, w := range workers {
				wr := &fleetv1alpha1.WorkerRegistration{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: w.name}, wr)).To(Succeed())
				g.Expect(wr.Status.OwnershipState).To(Equal(fleetv1alpha1.OwnershipLive))
			}
		}).Should(Succeed())
	})

	It("lets a worker pod write through the gateway Service with its projected token only while it holds a claim", func() {
		token := gatewayToken(ns, "pc-1")
		code, body := comment(token, 1, "before any claim")
		Expect(code).To(Equal(http.StatusForbidden), body)

		code, out := claimFromPod(ns, "pc-1", 1)
		Expect(code).To(BeZero(), out)
		// The claims of an identity are selectable by its key, in every namespace.
		Expect(strings.TrimSpace(kubectl("get", "taskclaims", "-A", "--field-selector", "status.identityKey=worker-1,status.phase=Active",
			"-o", "jsonpath={.items[*].spec.worker}"))).To(Equal("pc-1"))
		code, body = comment(token, 1, "e2e: written through the gateway under a claim")
		Expect(code).To(Equal(http.StatusCreated), body)
		Expect(giteaComments(1)).To(ContainElement("worker-1: e2e: written through the gateway under a claim"))
		Expect(giteaComments(1)).NotTo(ContainElement(ContainSubstring("before any claim")))

		// Another worker's token, without a claim on issue 1, writes nothing there.
		code, body = comment(gatewayToken(ns, "pc-2"), 1, "not mine")
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
		for issue, worker := range map[int]string{1: "pc-1", 2: "pc-2"} {
			Eventually(func() int {
				code, _ := comment(gatewayToken(ns, worker), issue, "e2e: still mine after the restart")
				return code
			}).Should(Equal(http.StatusCreated), "%s writes on issue %d after the restart", worker, issue)
		}
	})
})
