//go:build e2e

package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// workerImage is the image hack/e2e.sh builds for worker pods: the worker image's
// /kubectl-fleet, plus /idle, a command that waits until it is stopped (the "agent").
const workerImage = "docker.io/library/fleet-e2e-worker:dev"

// workerPod is a worker as config/samples/worker_pod.yaml runs one, pinned to node:
// kubectl fleet run registers /idle as the pod's process, and heartbeats every second.
func workerPod(ns, name, node string) *corev1.Pod {
	return workerPodAs(ns, name, node, "worker-1", "fleet/demo")
}

// workerPodAs is workerPod acting as Gitea login identity, bound to repository.
func workerPodAs(ns, name, node, identity, repository string) *corev1.Pod {
	env := []corev1.EnvVar{
		{Name: "FLEET_POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "FLEET_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "FLEET_POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
		{Name: "FLEET_NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "FLEET_CONTAINER_NAME", Value: "agent"},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			ServiceAccountName:            name,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			SecurityContext:               &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name:            "agent",
				Image:           workerImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"run", "--name=" + name, "--service-account=false", "--isolate=false", "--identity=" + identity, "--repository=" + repository, "--ttl=3s", "--every=1s", "--", "/idle"},
				Env:             env,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "machine-id", MountPath: "/etc/machine-id", ReadOnly: true},
					{Name: "gateway-token", MountPath: "/var/run/fleet/gateway", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{
				{Name: "machine-id", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/machine-id", Type: ptr.To(corev1.HostPathFile)}}},
				// The worker's token for the gateway: projected, bound to this pod, audience
				// fleet-gateway, renewed by the kubelet.
				{Name: "gateway-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
					ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: fleetv1alpha1.GatewayAudience, ExpirationSeconds: ptr.To[int64](3600), Path: "token"}}}}}},
			},
		},
	}
}

// allowWorker gives ServiceAccount ns/name what a pod worker needs: the fleet-worker role
// in its namespace, and create on workerregistrations (admission lets a ServiceAccount
// write only the registration of its own name).
func allowWorker(ns, name string) {
	GinkgoHelper()
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-worker", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fleet-worker"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-register", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "register"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}},
	}
	for _, o := range objs {
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, o))).To(Succeed())
	}
}

var _ = Describe("Worker pods", Ordered, func() {
	const ns = "e2e-workers"
	workers := map[string]string{"pw-node1": "node1", "pw-node2": "node2", "pw-hung": "node1"}
	registration := func(name string) *fleetv1alpha1.WorkerRegistration {
		GinkgoHelper()
		wr := &fleetv1alpha1.WorkerRegistration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wr)).To(Succeed())
		return wr
	}
	var frozen int

	BeforeAll(func() {
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "register", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{fleetv1alpha1.GroupVersion.Group}, Resources: []string{"workerregistrations"}, Verbs: []string{"create"}}}}))).To(Succeed())
		for name, node := range workers {
			allowWorker(ns, name)
			Expect(k8s.Create(ctx, workerPod(ns, name, node))).To(Succeed())
		}
		DeferCleanup(func() {
			if frozen != 0 {
				_ = syscall.Kill(frozen, syscall.SIGCONT)
			}
		})
	})

	It("register from pods on both nodes as their pods' processes, bound to their nodes", func() {
		ids := nodeMachineIDs()
		for name, node := range workers {
			pod := &corev1.Pod{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
			Eventually(func(g Gomega) {
				wr := &fleetv1alpha1.WorkerRegistration{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wr)).To(Succeed())
				g.Expect(wr.Status.OwnershipState).To(Equal(fleetv1alpha1.OwnershipLive), "%s is live", name)
			}).Should(Succeed())
			p := registration(name).Spec.Process
			Expect(p.Pod).NotTo(BeNil(), "%s registered as a pod's process", name)
			Expect(p.Pod.UID).To(Equal(string(pod.UID)))
			Expect(p.Pod.NodeName).To(Equal(node))
			Expect(p.Pod.Name).To(Equal(name))
			Expect(p.Pod.Container).To(Equal("agent"))
			Expect(p.HostID).To(Equal(ids[node]), "%s is bound to %s's machine id", name, node)
			// The pid is the pod's own: /idle is a child of kubectl fleet run, pid 1 there.
			host, err := hostPIDOf(string(pod.UID), p.PID, "/idle")
			Expect(err).NotTo(HaveOccurred())
			Expect(int64(host)).NotTo(Equal(p.PID), "the registered pid is not the host's pid")
		}
	})

	It("retires the rows of deleted worker pods on both nodes with one approval, and preserves a hung one", func() {
		By("freezing pw-hung's kubectl fleet run (its heartbeat stops; its /idle lives on)")
		hung := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pw-hung"}, hung)).To(Succeed())
		runPID, err := hostPIDOf(string(hung.UID), 1, "kubectl-fleet")
		Expect(err).NotTo(HaveOccurred())
		Expect(syscall.Kill(runPID, syscall.SIGSTOP)).To(Succeed())
		frozen = runPID

		By("deleting the worker pods on node1 and node2")
		for _, name := range []string{"pw-node1", "pw-node2"} {
			Expect(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			for _, name := range []string{"pw-node1", "pw-node2"} {
				err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod %s is gone", name)
			}
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			for name := range workers {
				wr := &fleetv1alpha1.WorkerRegistration{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wr)).To(Succeed())
				g.Expect(wr.Status.OwnershipState).To(Equal(fleetv1alpha1.OwnershipStale), "%s's heartbeat lapsed", name)
			}
		}).Should(Succeed())

		By("planning, and approving with one kubectl apply of the approval, as a GitOps tool would")
		kubectlFleet("plan", "-n", ns, "--name", "e2e-pods", "--canonical-repository", "fleet/demo")
		plan := &fleetv1alpha1.RetirementPlan{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e-pods"}, plan)).To(Succeed())
		Expect(plan.Status.CandidateCount).To(BeEquivalentTo(2), "candidates: %+v, preserved: %+v", plan.Status.Candidates, plan.Status.Preserved)
		var hungReason string
		for _, a := range plan.Status.Preserved {
			if strings.Contains(a.WorkerIdentity, "pw-hung") || a.Evidence["registration"] == "pw-hung" {
				hungReason = a.ReasonCode
			}
		}
		Expect(hungReason).To(Equal(retirement.ReasonPIDAlive), "the hung worker is preserved because its process lives: %+v", plan.Status.Preserved)
		approval := filepath.Join(GinkgoT().TempDir(), "approval.yaml")
		Expect(os.WriteFile(approval, []byte(kubectlFleet("approve", "-n", ns, "e2e-pods")), 0o600)).To(Succeed())
		kubectl("apply", "-f", approval)

		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "e2e-pods"}, plan)).To(Succeed())
			g.Expect(plan.Status.Outcome).To(Equal(retirement.OutcomeApplied))
		}).Should(Succeed())
		Expect(plan.Status.RetiredCount).To(BeEquivalentTo(2))
		for _, name := range []string{"pw-node1", "pw-node2"} {
			Expect(registration(name).Status.Phase).To(Equal(fleetv1alpha1.PhaseRetired), name)
		}
		Expect(registration("pw-hung").Status.Phase).NotTo(Equal(fleetv1alpha1.PhaseRetired), "the hung worker's row stays")
		Expect(syscall.Kill(runPID, syscall.SIGCONT)).To(Succeed())
		frozen = 0
		Eventually(func(g Gomega) {
			g.Expect(registration("pw-hung").Status.OwnershipState).To(Equal(fleetv1alpha1.OwnershipLive), "thawed, it heartbeats again")
		}).Should(Succeed())
	})
})
