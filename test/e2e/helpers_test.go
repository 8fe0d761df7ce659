//go:build e2e

package e2e_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// kubectl runs /usr/bin/kubectl (or the first kubectl on PATH) against the e2e cluster
// and returns its standard output; a failure fails the spec with both streams.
func kubectl(args ...string) string {
	GinkgoHelper()
	out, err := kubectlErr(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

func kubectlErr(args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// kubectlFleet runs the kubectl-fleet plugin hack/e2e.sh built ($FLEET_E2E_PLUGIN).
func kubectlFleet(args ...string) string {
	GinkgoHelper()
	plugin := os.Getenv("FLEET_E2E_PLUGIN")
	Expect(plugin).NotTo(BeEmpty(), "hack/e2e.sh sets FLEET_E2E_PLUGIN")
	cmd := exec.CommandContext(ctx, plugin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "kubectl fleet %s: %s", strings.Join(args, " "), stderr.String())
	return string(out)
}

// hostPIDOf finds, in this machine's /proc (the nodes of hack/cluster.sh share it), the
// host pid of the process of pod uid whose pid in its own namespace is nsPID and whose
// command line contains command. (Each container of a pod, the sandbox's pause
// included, has a pid namespace of its own, so several of a pod's processes are pid 1.)
func hostPIDOf(uid string, nsPID int64, command string) (int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var found []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(cg), "pod"+uid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if innermost(filepath.Join("/proc", d.Name(), "status")) == nsPID && strings.Contains(string(cmdline), command) {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("%d host processes of pod %s running %s have namespace pid %d", len(found), uid, command, nsPID)
	}
	return found[0], nil
}

func innermost(status string) int64 {
	f, err := os.Open(status)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			fields := strings.Fields(rest)
			if len(fields) < 2 {
				return 0
			}
			n, _ := strconv.ParseInt(fields[len(fields)-1], 10, 64)
			return n
		}
	}
	return 0
}
