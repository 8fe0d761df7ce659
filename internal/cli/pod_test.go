package cli

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// podOf tells a process of the host's pid namespace from one in a namespace of its own
// (a real one, made with unshare), and registers the latter only as a pod's.
func TestPodOf(t *testing.T) {
	env := map[string]string{}
	o := &Options{ProcRoot: "/", Getenv: func(k string) string { return env[k] }}
	if p, err := o.podOf(int64(os.Getpid())); err != nil || p != nil {
		t.Fatalf("this test process: pod %+v, %v; want the host's pid namespace", p, err)
	}

	// A child in a pid namespace of its own: unshare forks it as pid 1 of the new namespace.
	cmd := exec.Command("unshare", "--pid", "--fork", "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var child int64
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children")
		if f := strings.Fields(string(b)); len(f) > 0 {
			child, _ = strconv.ParseInt(f[0], 10, 64)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("unshare started no child")
	}
	_, err := o.podOf(child)
	if ExitCodeOf(err) != ExitUsage || !strings.Contains(err.Error(), EnvPodUID) {
		t.Fatalf("a namespaced pid without the pod's variables: %v; want a usage error naming %s", err, EnvPodUID)
	}
	env = map[string]string{EnvPodNamespace: "team-a", EnvPodName: "worker-0", EnvPodUID: "6f1c2a52-3b7d-4e2a-9a4f-0c1d2e3f4a5b", EnvNodeName: "node1", EnvContainerName: "agent"}
	p, err := o.podOf(child)
	if err != nil || p == nil || p.UID != env[EnvPodUID] || p.NodeName != "node1" || p.Container != "agent" || p.Name != "worker-0" || p.Namespace != "team-a" {
		t.Fatalf("pod %+v, %v", p, err)
	}
}
