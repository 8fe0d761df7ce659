// Package quickstart_test runs docs/quickstart.md: every block fenced as "sh quickstart",
// in order and in one shell, against `make run` (the embedded control plane, the demo
// Gitea and the manager) and the built kubectl-fleet, and checks what each step prints.
package quickstart_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

func TestQuickstart(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "docs/quickstart.md")
}

var (
	root    string            // the module root
	binDir  string            // the built kubectl-fleet
	banner  map[string]string // the export lines make run printed
	makeRun *exec.Cmd
	runLog  *os.File
	// gatewayURL is where the gateway listens.
	gatewayURL string
)

// goEnv is `go env NAME`, so make run's go invocations keep using the real caches while
// HOME points at an empty folder (no ~/.kube/config: the embedded control plane).
func goEnv(name string) string {
	out, err := exec.Command("go", "env", name).Output()
	Expect(err).NotTo(HaveOccurred())
	return strings.TrimSpace(string(out))
}

func freePort() string {
	p, err := testgitea.FreePort()
	Expect(err).NotTo(HaveOccurred())
	return p
}

var _ = SynchronizedBeforeSuite(func() {}, func() {
	var err error
	root, err = filepath.Abs("../..")
	Expect(err).NotTo(HaveOccurred())
	tmp := GinkgoT().TempDir()
	binDir = filepath.Join(tmp, "bin")

	By("building kubectl-fleet")
	build := exec.Command("go", "build", "-o", filepath.Join(binDir, "kubectl-fleet"), "./cmd/kubectl-fleet")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))

	By("starting make run: the embedded control plane, the demo Gitea and the manager")
	home := filepath.Join(tmp, "home")
	Expect(os.MkdirAll(home, 0o700)).To(Succeed())
	probe, gw := "127.0.0.1:"+freePort(), "127.0.0.1:"+freePort()
	gatewayURL = "http://" + gw
	args := strings.Join([]string{
		"--metrics-bind-address=127.0.0.1:" + freePort(),
		"--health-probe-bind-address=" + probe,
		"--capability-bind-address=127.0.0.1:" + freePort(),
		"--gateway-bind-address=" + gw,
	}, " ")
	makeRun = exec.Command("make", "--no-print-directory", "run", "ARGS="+args)
	makeRun.Dir = root
	makeRun.Env = append(withoutEnv("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "HOME", "KUBEBUILDER_ASSETS"),
		"HOME="+home, "GOCACHE="+goEnv("GOCACHE"), "GOMODCACHE="+goEnv("GOMODCACHE"), "GOPATH="+goEnv("GOPATH"),
		"DEMO_GITEA_PORT="+freePort(), "DEMO_DIR="+filepath.Join(tmp, "demo"))
	makeRun.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	runLog, err = os.Create(filepath.Join(tmp, "make-run.log"))
	Expect(err).NotTo(HaveOccurred())
	makeRun.Stderr = runLog
	stdout, err := makeRun.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(makeRun.Start()).To(Succeed())
	DeferCleanup(stopMakeRun)

	banner = map[string]string{}
	lines := make(chan string)
	go func() {
		defer GinkgoRecover()
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	deadline := time.After(20 * time.Minute) // cold builds of Gitea and envtest take long
	for inBlock, done := false, false; !done; {
		select {
		case l, ok := <-lines:
			Expect(ok).To(BeTrue(), "make run ended before printing its start-up block; see %s", runLog.Name())
			l = strings.TrimSpace(l)
			if kv, ok := strings.CutPrefix(l, "export "); ok {
				k, v, _ := strings.Cut(kv, "=")
				banner[k] = v
				inBlock = true
			}
			done = inBlock && l == "" // the block ends with an empty line
		case <-deadline:
			Fail("no start-up block from make run; see " + runLog.Name())
		}
	}
	go func() {
		for l := range lines {
			GinkgoWriter.Println("make run:", l)
		}
	}()
	Expect(banner).To(HaveKey("KUBECONFIG"))
	Expect(banner).To(HaveKeyWithValue("FLEET_REPOSITORY", "fleet/demo"))
	Expect(banner).To(HaveKeyWithValue("FLEET_GATEWAY_URL", gatewayURL))
	Expect(banner).To(HaveKeyWithValue("FLEET_METRICS_URL", HavePrefix("https://127.0.0.1:")))

	By("waiting until the manager is ready")
	Eventually(func() (int, error) {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Equal(http.StatusOK))
})

// stopMakeRun interrupts make run's process group (the manager stops, make run's trap
// stops Gitea) and waits for it.
func stopMakeRun() {
	if makeRun == nil || makeRun.Process == nil {
		return
	}
	_ = syscall.Kill(-makeRun.Process.Pid, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- makeRun.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-makeRun.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	_ = runLog.Close()
	b, _ := os.ReadFile(runLog.Name())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	GinkgoWriter.Printf("make run ended (%v); the end of its stderr:\n%s\n", err, strings.Join(lines[max(0, len(lines)-40):], "\n"))
}

func withoutEnv(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}

// shellEnv is the environment of the walkthrough's second shell: the pasted start-up
// block, the plugin on the PATH, and a git identity for the GitOps commit.
func shellEnv() []string {
	env := withoutEnv("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "PATH")
	env = append(env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GIT_AUTHOR_NAME=Fleet Operator", "GIT_AUTHOR_EMAIL=operator@example.invalid",
		"GIT_COMMITTER_NAME=Fleet Operator", "GIT_COMMITTER_EMAIL=operator@example.invalid")
	for k, v := range banner {
		env = append(env, k+"="+v)
	}
	return env
}

var ctx = context.Background()

// step is the output of one "sh quickstart" block.
type step struct {
	heading, script, output string
}

func (s step) String() string {
	return fmt.Sprintf("step %q:\n--- script\n%s\n--- output\n%s", s.heading, s.script, s.output)
}

func ctxWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
