package fleet_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

const kubectlPath = "/usr/bin/kubectl"

// The repository every worker and plan binds to, and the namespace of the hosts' Leases.
const (
	repository     = "acme/widgets"
	agentNamespace = "fleet-agents"
)

// Short election and takeover timings keep a kill -9 and its recovery within seconds.
var managerTimings = []string{
	"--agent-lease-duration=4s", "--agent-renew-deadline=3s", "--agent-retry-period=500ms",
	"--apply-takeover-timeout=8s",
}

// manager is one manager process: the agent of one host.
type manager struct {
	hostID string
	cmd    *exec.Cmd
	log    string
	done   chan struct{}
}

// startManager starts the manager binary as the agent of hostID against the envtest API
// server (KUBECONFIG; no embedded control plane, no endpoints, no Gitea), with extra flags
// after the suite's own.
func startManager(hostID string, extra ...string) *manager {
	GinkgoHelper()
	logPath := filepath.Join(tmp, fmt.Sprintf("manager-%s-%d.log", hostID, time.Now().UnixNano()))
	f, err := os.Create(logPath)
	Expect(err).NotTo(HaveOccurred())
	args := append([]string{
		"--embedded=never", "--host-id=" + hostID, "--agent-namespace=" + agentNamespace, "--repository=" + repository,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--capability-bind-address=", "--gateway-bind-address=",
	}, managerTimings...)
	args = append(args, extra...)
	cmd := exec.Command(filepath.Join(binDir, "manager"), args...)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+tmp)
	cmd.Stdout, cmd.Stderr = f, f
	Expect(cmd.Start()).To(Succeed())
	m := &manager{hostID: hostID, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(m.done)
	}()
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			m.printLog()
		}
		m.Stop()
	})
	return m
}

// Stop ends the manager gracefully (SIGTERM) and waits for it.
func (m *manager) Stop() {
	select {
	case <-m.done:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

// Kill ends the manager with SIGKILL, as a crash would, and waits for it.
func (m *manager) Kill() {
	GinkgoHelper()
	Expect(m.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	<-m.done
}

func (m *manager) printLog() {
	b, _ := os.ReadFile(m.log)
	lines := strings.Split(string(b), "\n")
	GinkgoWriter.Printf("--- last lines of the manager of %s (%s) ---\n%s\n", m.hostID, m.log, strings.Join(lines[max(0, len(lines)-60):], "\n"))
}

// kubectl runs /usr/bin/kubectl with the administrator's kubeconfig and returns stdout.
func kubectl(args ...string) string {
	GinkgoHelper()
	out, err := kubectlErr(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

func kubectlErr(args ...string) (string, error) {
	cmd := exec.Command(kubectlPath, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// kubectlApply applies a manifest given as text.
func kubectlApply(ns, manifest string) {
	GinkgoHelper()
	path := filepath.Join(tmp, fmt.Sprintf("manifest-%d.yaml", time.Now().UnixNano()))
	Expect(os.WriteFile(path, []byte(manifest), 0o600)).To(Succeed())
	kubectl("-n", ns, "apply", "-f", path)
}

// jsonpath reads one field of a RetirementPlan with kubectl.
func jsonpath(ns, plan, path string) string {
	GinkgoHelper()
	return strings.TrimSpace(kubectl("-n", ns, "get", "retirementplan", plan, "-o", "jsonpath={"+path+"}"))
}

// worker is a `kubectl fleet run` process: a registered worker whose command is `sleep`,
// heartbeating every second while the command runs.
type worker struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// regPID is the registered process: the command's own pid.
	regPID int
}

// startWorker runs `kubectl fleet run -- sleep 600` as worker name on hostID in ns, bound
// to the managers' --repository, and waits until its registration exists.
func startWorker(ns, name, hostID string) *worker {
	GinkgoHelper()
	return startWorkerOf(ns, name, hostID, repository)
}

// startWorkerOf is startWorker for a worker bound to repo.
func startWorkerOf(ns, name, hostID, repo string) *worker {
	GinkgoHelper()
	cmd := exec.Command(filepath.Join(binDir, "kubectl-fleet"), "--kubeconfig", kubeconfig, "-n", ns, "run",
		"--identity", "bot-"+name, "--repository", repo, "--host-id", hostID, "--name", name,
		"--ttl", "4s", "--every", "1s", "--", "sleep", "600")
	cmd.Env = append(os.Environ(), "HOME="+tmp)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	Expect(cmd.Start()).To(Succeed())
	w := &worker{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	DeferCleanup(func() {
		if w.regPID > 0 {
			_ = syscall.Kill(w.regPID, syscall.SIGKILL)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-w.done
	})
	Eventually(func(g Gomega) {
		out, err := kubectlErr("-n", ns, "get", "workerregistration", name, "-o", "jsonpath={.spec.process.pid}")
		g.Expect(err).NotTo(HaveOccurred())
		w.regPID, err = strconv.Atoi(strings.TrimSpace(out))
		g.Expect(err).NotTo(HaveOccurred())
	}, 30*time.Second).Should(Succeed(), "worker %s registered (stderr: %s)", name, &errOut)
	return w
}

// kill ends the worker's command with SIGKILL: `kubectl fleet run` then stops
// heartbeating and exits. The row stays, with its process gone.
func (w *worker) kill() {
	GinkgoHelper()
	Expect(syscall.Kill(w.regPID, syscall.SIGKILL)).To(Succeed())
	Eventually(w.done, 10*time.Second).Should(BeClosed(), "kubectl fleet run exits once its command died")
}

// heartbeatOnly keeps renewing a registration's heartbeat with `kubectl fleet heartbeat`
// (its process may be gone: a pid-gone, heartbeat-fresh row).
func heartbeatOnly(ns, name string) {
	GinkgoHelper()
	cmd := exec.Command(filepath.Join(binDir, "kubectl-fleet"), "--kubeconfig", kubeconfig, "-n", ns, "heartbeat", "--worker", name, "--every", "1s")
	cmd.Env = append(os.Environ(), "HOME="+tmp)
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
}

// newNamespace creates a namespace with kubectl.
func newNamespace(prefix string) string {
	GinkgoHelper()
	ns := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
	kubectl("create", "namespace", ns)
	return ns
}

// planManifest is a fleet RetirementPlan (no spec.hostID) as a user writes it, bound to
// the managers' --repository, with an optional approval block (indented for spec).
func planManifest(name, approval string) string {
	return planManifestOf(name, repository, approval)
}

// planManifestOf is planManifest for a plan bound to repo.
func planManifestOf(name, repo, approval string) string {
	return fmt.Sprintf(`apiVersion: fleet.giteatools.dev/v1alpha1
kind: RetirementPlan
metadata:
  name: %s
spec:
  remote: origin
  canonicalRepository: %s
%s`, name, repo, approval)
}

// candidateApproval is the approval block that binds the candidate set the plan shows,
// in the name of the user kubectl acts as (admission checks that it is that user). It
// names no binding: an approval of the candidate tokens alone binds the candidate set.
func candidateApproval(ns, plan string) string {
	GinkgoHelper()
	user := strings.TrimSpace(kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"))
	groups := strings.Fields(kubectl("auth", "whoami", "-o", `jsonpath={range .status.userInfo.groups[*]}{@}{" "}{end}`))
	ids := strings.Fields(jsonpath(ns, plan, `range .status.candidateWorkerIdentities[*]}{@}{" "}{end`))
	var b strings.Builder
	fmt.Fprintf(&b, "  approval:\n    candidateFingerprint: %q\n    workerIdentities:\n", jsonpath(ns, plan, ".status.candidateFingerprint"))
	for _, id := range ids {
		fmt.Fprintf(&b, "    - %s\n", id)
	}
	fmt.Fprintf(&b, "    approvedBy: %q\n    approvedGroups:\n", user)
	for _, g := range groups {
		fmt.Fprintf(&b, "    - %q\n", g)
	}
	return b.String()
}

// outcomeOf reads a plan's outcome with kubectl.
func outcomeOf(ns, plan string) string {
	out, err := kubectlErr("-n", ns, "get", "retirementplan", plan, "-o", "jsonpath={.status.outcome}")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// retiredBy lists, with kubectl, the rows of ns that carry plan ns/plan in retiredBy.
func retiredBy(ns, plan string) []string {
	GinkgoHelper()
	out := kubectl("-n", ns, "get", "workerregistrations", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.retiredBy}{"\n"}{end}`)
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if name, by, ok := strings.Cut(strings.TrimSpace(l), "="); ok && by == ns+"/"+plan {
			names = append(names, name)
		}
	}
	return names
}
