package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/cli"
	"github.com/giteatools/fleet-controller/test/support/testenv"
)

var _ = Describe("register, heartbeat and run", func() {
	It("registers a real process with its host, boot, pid and start time, its ServiceAccount and RoleBinding", func() {
		ns := newNamespace()
		p := startChild()
		facts, err := testenv.HostFacts(testHostID)
		Expect(err).NotTo(HaveOccurred())
		before := time.Now().Truncate(time.Second)
		r := fleet(ns, "register", "--identity", "Bot_A", "--repository", repo, "--host-id", testHostID,
			"--pid", strconv.FormatInt(p.pid, 10), "--ttl", "45s", "--generation-id", "gen-7", "--fencing-epoch", "3")
		name := strings.TrimSpace(r.stdout)
		Expect(name).To(MatchRegexp(`^bot-a-[0-9a-f]{8}$`), "register prints the name alone")

		wr := getWR(ns, name)
		Expect(wr.Spec.ClientInstanceID).To(MatchRegexp(`^inst-[0-9a-f]{16}$`))
		Expect(name).To(HaveSuffix(wr.Spec.ClientInstanceID[len("inst-") : len("inst-")+8]))
		Expect(wr.Spec.Process).To(Equal(fleetv1alpha1.ProcessIdentity{HostID: testHostID, BootID: facts.BootID, PID: p.pid, StartTime: ptr.To(p.start)}))
		Expect(wr.Spec.Identity).To(Equal("Bot_A"))
		Expect(wr.Spec.Repository).To(Equal(repo))
		Expect(wr.Spec.HeartbeatTTLSeconds).To(Equal(int64(45)))
		Expect(wr.Spec.GenerationID).To(Equal("gen-7"))
		Expect(wr.Spec.FencingEpoch).To(Equal(ptr.To(int64(3))))
		Expect(wr.Status.LastHeartbeatAt).NotTo(BeNil(), "register renews the first heartbeat")
		Expect(wr.Status.LastHeartbeatAt.Time).To(BeTemporally(">=", before))
		waitOwnership(ns, name, fleetv1alpha1.OwnershipLive)

		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ServiceAccount{})).To(Succeed())
		rb := &rbacv1.RoleBinding{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: cli.WorkerRoleName + "-" + name}, rb)).To(Succeed())
		Expect(rb.RoleRef.Name).To(Equal(cli.WorkerRoleName))
		Expect(rb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: name, Namespace: ns}))

		By("writing as the field manager kubectl-fleet, which managedFields show")
		Expect(managersOf(rb.ManagedFields, "")).To(ConsistOf(cli.FieldManager))
		Expect(managersOf(getWR(ns, name).ManagedFields, "")).To(ConsistOf(cli.FieldManager), "the registration's spec")
		Expect(managersOf(getWR(ns, name).ManagedFields, "status")).To(ContainElement(cli.FieldManager), "the first heartbeat")

		By("printing the registration in each -o format")
		p2 := startChild()
		r = fleet(ns, "register", "--identity", "bot-b", "--repository", repo, "--host-id", testHostID, "--pid", strconv.FormatInt(p2.pid, 10), "-o", "yaml")
		Expect(r.stdout).To(ContainSubstring("kind: WorkerRegistration"))
		Expect(r.stdout).To(ContainSubstring("pid: " + strconv.FormatInt(p2.pid, 10)))
		p3 := startChild()
		r = fleet(ns, "register", "--identity", "bot-c", "--repository", repo, "--host-id", testHostID, "--pid", strconv.FormatInt(p3.pid, 10), "-o", "name")
		Expect(r.stdout).To(MatchRegexp(`^workerregistration\.fleet\.giteatools\.dev/bot-c-[0-9a-f]{8}\n$`))
	})

	It("refuses a pid that does not exist, and an existing name, changing nothing", func() {
		ns := newNamespace()
		gone := startChild()
		gone.kill()
		r := fleetCmd(ctx, ns, nil, "register", "--identity", "bot", "--repository", repo, "--host-id", testHostID, "--pid", strconv.FormatInt(gone.pid, 10))
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("process %d does not exist", gone.pid))
		list := &fleetv1alpha1.WorkerRegistrationList{}
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(BeEmpty())

		p := startChild()
		name := register(ns, "bot", p)
		r = fleetCmd(ctx, ns, nil, "register", "--identity", "bot", "--repository", repo, "--host-id", testHostID, "--pid", strconv.FormatInt(p.pid, 10), "--name", name)
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("already exists"))
	})

	It("renews the heartbeat once, and every interval until stopped", func() {
		ns := newNamespace()
		name := register(ns, "bot", startChild())
		first := getWR(ns, name).Status.LastHeartbeatAt.Time
		fleet(ns, "heartbeat", "--worker", name)
		second := getWR(ns, name).Status.LastHeartbeatAt.Time
		Expect(second).To(BeTemporally(">", first), "a renewal always moves the stamp")

		By("keeping it up with --every until the command is stopped")
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan result, 1)
		go func() {
			done <- fleetCmd(runCtx, ns, map[string]string{cli.EnvWorker: name}, "heartbeat", "--every", "1s")
		}()
		Eventually(func() time.Time { return getWR(ns, name).Status.LastHeartbeatAt.Time }).Should(BeTemporally(">", second.Add(time.Second)))
		stop()
		var end result
		Eventually(done).Should(Receive(&end))
		Expect(end.code).To(Equal(cli.ExitOK), "%s", end)

		By("refusing an unknown worker")
		r := fleetCmd(ctx, ns, nil, "heartbeat", "--worker", "nobody")
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("no WorkerRegistration"))
	})

	It("runs a command as its own registered process, heartbeats while it runs, and passes on its exit code", func() {
		ns := newNamespace()
		r := fleetCmd(ctx, ns, nil, "run", "--identity", "bot-run", "--repository", repo, "--host-id", testHostID,
			"--ttl", "2s", "--every", "1s", "--", "sh", "-c", `echo "$FLEET_WORKER $FLEET_NAMESPACE $$"; sleep 2; exit 7`)
		Expect(r.code).To(Equal(7), "%s", r)
		fields := strings.Fields(r.stdout)
		Expect(fields).To(HaveLen(3), "%s", r)
		name, gotNS, pid := fields[0], fields[1], fields[2]
		Expect(gotNS).To(Equal(ns))
		Expect(r.stderr).To(ContainSubstring("registered %s/%s (pid %s)", ns, name, pid))
		wr := getWR(ns, name)
		Expect(strconv.FormatInt(wr.Spec.Process.PID, 10)).To(Equal(pid), "the registration names the command's own process")
		Expect(wr.Spec.Process.StartTime).NotTo(BeNil())
		Expect(wr.Status.LastHeartbeatAt.Time).To(BeTemporally(">", wr.CreationTimestamp.Time), "heartbeats renewed while it ran")

		By("letting the registration lapse once the command exited")
		waitOwnership(ns, name, fleetv1alpha1.OwnershipStale)
		Expect(getWR(ns, name).Status.Phase).To(Equal(fleetv1alpha1.PhaseActive), "nothing is deleted or retired by run")

		By("never starting the command when its registration fails")
		marker := filepath.Join(GinkgoT().TempDir(), "ran")
		r = fleetCmd(ctx, ns, nil, "run", "--identity", "bot-run", "--repository", repo, "--host-id", testHostID,
			"--name", name, "--", "touch", marker)
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
		Expect(r.stderr).To(ContainSubstring("already exists"))
		Expect(marker).NotTo(BeAnExistingFile(), "an unregistered command must not run")

		By("passing on a signal's exit code")
		r = fleetCmd(ctx, ns, nil, "run", "--identity", "bot-sig", "--repository", repo, "--host-id", testHostID, "--", "sh", "-c", "kill -TERM $$")
		Expect(r.code).To(Equal(128+15), "%s", r)
	})

	It("gives the command its worker's own credentials, never the launcher's", func() {
		ns := newNamespace()
		other := "bystander"
		Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: other, Namespace: ns}})).To(Succeed())
		GinkgoT().Setenv("FLEET_GITEA_TOKEN_FILE", "/launcher/admin-token")
		GinkgoT().Setenv("KUBECONFIG", kubeconfig)
		script := `set -u
echo "gitea-token-file=${FLEET_GITEA_TOKEN_FILE:-none}"
[ "$KUBECONFIG" != "` + kubeconfig + `" ] && echo "kubeconfig=own"
# RBAC reaches the authorizer's cache a moment after the launcher binds the role.
for i in $(seq 50); do [ "$(kubectl auth can-i create taskclaims.fleet.giteatools.dev -n ` + ns + ` 2>/dev/null)" = yes ] && break; sleep 0.2; done
echo "secrets=$(kubectl auth can-i list secrets -n ` + ns + ` 2>/dev/null)"
echo "claims=$(kubectl auth can-i create taskclaims.fleet.giteatools.dev -n ` + ns + ` 2>/dev/null)"
kubectl create token "$FLEET_WORKER" -n ` + ns + ` >/dev/null && echo "own-token=yes"
kubectl create token ` + other + ` -n ` + ns + ` >/dev/null 2>&1 || echo "other-token=refused"
exit 0`
		r := fleetCmd(ctx, ns, nil, "run", "--identity", "bot-iso", "--repository", repo, "--host-id", testHostID, "--", "sh", "-c", script)
		Expect(r.code).To(Equal(cli.ExitOK), "%s", r)
		Expect(r.stdout).To(ContainSubstring("gitea-token-file=none"), "the launcher's Gitea token file is not passed on")
		Expect(r.stdout).To(ContainSubstring("kubeconfig=own"))
		Expect(r.stdout).To(ContainSubstring("secrets=no"), "the command cannot read Secrets (the gateway's Gitea tokens)")
		Expect(r.stdout).To(ContainSubstring("claims=yes"), "the command can do what its worker may")
		Expect(r.stdout).To(ContainSubstring("own-token=yes"), "the command mints its own gateway token")
		Expect(r.stdout).To(ContainSubstring("other-token=refused"), "the command cannot mint another ServiceAccount's token")

		By("--as-user runs the command as another OS user, who cannot read the launcher's environment")
		GinkgoT().Setenv("FLEET_LAUNCHER_SECRET", "launcher-only")
		asUser := `echo "uid=$(id -u)"
cat /proc/$PPID/environ >/dev/null 2>&1 && echo environ=read || echo environ=refused
[ -r "$KUBECONFIG" ] && echo kubeconfig=readable
for i in $(seq 50); do [ "$(kubectl auth can-i create taskclaims.fleet.giteatools.dev -n ` + ns + ` 2>/dev/null)" = yes ] && break; sleep 0.2; done
echo "claims=$(kubectl auth can-i create taskclaims.fleet.giteatools.dev -n ` + ns + ` 2>/dev/null)"
exit 0`
		r = fleetCmd(ctx, ns, nil, "run", "--as-user", "nobody", "--identity", "bot-user", "--repository", repo, "--host-id", testHostID, "--", "sh", "-c", asUser)
		if os.Geteuid() != 0 {
			Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)
			Expect(r.stderr).To(ContainSubstring("only a launcher running as root"))
		} else {
			Expect(r.code).To(Equal(cli.ExitOK), "%s", r)
			Expect(r.stdout).NotTo(ContainSubstring("uid=0\n"), "the command runs as nobody")
			Expect(r.stdout).To(ContainSubstring("environ=refused"), "the command cannot read the launcher's environment")
			Expect(r.stdout).To(ContainSubstring("kubeconfig=readable"), "the command reads its own kubeconfig")
			Expect(r.stdout).To(ContainSubstring("claims=yes"), "and acts as its worker with it")
		}
		r = fleetCmd(ctx, ns, nil, "run", "--as-user", "no-such-user-here", "--identity", "bot-user", "--repository", repo, "--host-id", testHostID, "--", "true")
		Expect(r.code).To(Equal(cli.ExitUsage), "%s", r)

		By("the control: --isolate=false hands the command the launcher's credentials")
		r = fleetCmd(ctx, ns, nil, "run", "--isolate=false", "--identity", "bot-iso", "--repository", repo, "--host-id", testHostID, "--", "sh", "-c", script)
		Expect(r.code).To(Equal(cli.ExitOK), "%s", r)
		Expect(r.stdout).To(ContainSubstring("secrets=yes"))
	})
})

// managersOf lists the field managers of entries for subresource ("" for the object itself).
func managersOf(fields []metav1.ManagedFieldsEntry, subresource string) []string {
	var out []string
	for _, f := range fields {
		if f.Subresource == subresource {
			out = append(out, f.Manager)
		}
	}
	return out
}
