package gateway_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/cli"
)

// asKubectlFleet makes this test binary run as kubectl-fleet (TestMain), so git can run it
// as its credential helper.
const asKubectlFleet = "FLEET_GATEWAY_TEST_AS_KUBECTL_FLEET"

// kubeconfig writes a kubeconfig that acts as w's ServiceAccount in w's namespace, as
// `kubectl fleet run` gives the command it starts.
func (w *worker) kubeconfig() string {
	GinkgoHelper()
	token, err := env.ServiceAccountToken(ctx, w.ns, w.name, "")
	Expect(err).NotTo(HaveOccurred())
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos[w.name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[w.name] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: w.name, Namespace: w.ns}
	kc.CurrentContext = w.name
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
	return path
}

// argvWatch samples every process's command line until stopped, and keeps those that
// carry a JSON Web Token (a ServiceAccount token starts "eyJ") and those that show the
// credential helper running (so the watch provably saw the helper's time).
type argvWatch struct {
	mu       sync.Mutex
	leaks    []string
	sawHelp  bool
	stop     chan struct{}
	finished chan struct{}
}

func watchArgv() *argvWatch {
	a := &argvWatch{stop: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(a.finished)
		for {
			select {
			case <-a.stop:
				return
			default:
			}
			procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, p := range procs {
				argv, err := os.ReadFile(p)
				if err != nil || len(argv) == 0 {
					continue
				}
				a.mu.Lock()
				if bytes.Contains(argv, []byte("eyJ")) {
					a.leaks = append(a.leaks, strings.ReplaceAll(string(argv), "\x00", " "))
				}
				if bytes.Contains(argv, []byte("git-credential\x00get")) {
					a.sawHelp = true
				}
				a.mu.Unlock()
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return a
}

func (a *argvWatch) done() (leaks []string, sawHelper bool) {
	close(a.stop)
	<-a.finished
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.leaks, a.sawHelp
}

var _ = Describe("kubectl fleet git-credential", func() {
	It("lets git clone and push through the gateway with no token in any command line", func() {
		a := newWorker(nsMain)
		tc := a.activate(issueTarget(newIssue("pushed with the credential helper")))
		branch := claim.WorkBranch(tc.Namespace, tc.Name)
		self, err := os.Executable()
		Expect(err).NotTo(HaveOccurred())
		// git runs the helper through the shell, as `!kubectl fleet git-credential` would be.
		helper := "credential.helper=!" + self + " git-credential"
		git := func(dir string, args ...string) (string, error) {
			cmd := execIn(dir, "git", append([]string{"-c", "credential.helper=", "-c", helper}, args...)...)
			cmd.Env = append(cmd.Env, asKubectlFleet+"=1", "KUBECONFIG="+a.kubeconfig(),
				cli.EnvGatewayURL+"="+gatewayURL, cli.EnvWorker+"="+a.name)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}

		watch := watchArgv()
		parent := GinkgoT().TempDir()
		out, err := git(parent, "clone", "-q", gatewayURL+"/"+repo+".git", "src")
		Expect(err).NotTo(HaveOccurred(), "clone with the helper: %s", out)
		dir := filepath.Join(parent, "src")
		Expect(os.WriteFile(filepath.Join(dir, "helped.txt"), []byte("work\n"), 0o600)).To(Succeed())
		for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=" + a.identity, "-c", "user.email=" + a.identity + "@example.invalid", "commit", "-q", "-m", "Work"}} {
			out, err := gitRun(dir, args...)
			Expect(err).NotTo(HaveOccurred(), out)
		}
		out, err = git(dir, "push", "origin", "HEAD:refs/heads/"+branch)
		leaks, sawHelper := watch.done()
		Expect(err).NotTo(HaveOccurred(), "push with the helper: %s", out)
		Expect(srv.BranchHead(ctx, repo, branch)).To(Equal(headOf(dir)))

		Expect(sawHelper).To(BeTrue(), "the command-line watch saw the helper run")
		Expect(leaks).To(BeEmpty(), "a token appeared in a command line")
		Expect(out).NotTo(ContainSubstring("eyJ"))
	})
})
