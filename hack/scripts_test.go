// Package hack_test checks the logic of the toolchain scripts in hack/.
package hack_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The envtest build replaces exactly the staging modules kubernetes both maps to
// ./staging and requires at v0.0.0 (sample-controller is replace-only and not served).
func TestStagingModules(t *testing.T) {
	out, err := exec.Command("bash", "-c", `source ./envtest.sh && staging_modules "$1" >&3`, "_",
		"testdata/kubernetes.go.mod").Output()
	if err != nil {
		t.Fatalf("staging_modules: %v", err)
	}
	got := strings.Fields(string(out))
	want := []string{"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go", "k8s.io/kubectl"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("staging_modules = %v, want %v", got, want)
	}
}

// make verify compares tree digests before and after regeneration: the digest must move
// with any content or name change and nothing else.
func TestTreeDigest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	digest := func() string {
		t.Helper()
		out, err := exec.Command("bash", "tree-digest.sh", dir).Output()
		if err != nil {
			t.Fatalf("tree-digest.sh: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	write("a/x.yaml", "one")
	write("b.go", "two")
	d0 := digest()
	if d1 := digest(); d1 != d0 {
		t.Fatal("digest of an unchanged tree moved")
	}
	write("a/x.yaml", "ONE")
	d2 := digest()
	if d2 == d0 {
		t.Fatal("content change did not move the digest")
	}
	write("a/x.yaml", "one")
	if digest() != d0 {
		t.Fatal("restoring the content did not restore the digest")
	}
	if err := os.Rename(filepath.Join(dir, "b.go"), filepath.Join(dir, "c.go")); err != nil {
		t.Fatal(err)
	}
	if digest() == d0 {
		t.Fatal("a rename did not move the digest")
	}
}

// gitea.sh stop signals only its own server: a pid file naming a server that already
// exited (gone, or a zombie nobody reaped yet, as after a Ctrl-C that reached the whole
// process group of `make run`) is cleaned up quietly, one naming another live program is
// left alone with a warning, and its own server is stopped without waiting on the zombie
// it becomes.
func TestGiteaStop(t *testing.T) {
	port := strconv.Itoa(40000 + os.Getpid()%20000)
	run, err := filepath.Abs(filepath.Join("..", ".cache", "gitea", "run-"+port))
	if err != nil {
		t.Fatal(err)
	}
	stop := func(t *testing.T, pid int) string {
		t.Helper()
		if err := os.MkdirAll(run, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run, "gitea.pid"), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "gitea.sh", "stop", "--purge")
		cmd.Env = append(os.Environ(), "GITEA_PORT="+port)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gitea.sh stop: %v\n%s", err, out)
		}
		if _, err := os.Stat(run); !os.IsNotExist(err) {
			t.Fatalf("the run directory is left: %v", err)
		}
		return string(out)
	}
	start := func(t *testing.T, name string, args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(name, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	expect := func(t *testing.T, out, want string) {
		t.Helper()
		if !strings.Contains(out, want) {
			t.Fatalf("stop said %q, want %q", out, want)
		}
	}

	t.Run("a zombie", func(t *testing.T) {
		// sh forks a child that exits at once, then becomes a sleep that never reaps it.
		parent := exec.Command("sh", "-c", `sleep 0 & echo $!; exec sleep 30`)
		stdout, err := parent.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := parent.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		zombie, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); ; {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(zombie) + "/status")
			if strings.Contains(string(b), "zombie") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d did not become a zombie: %s", zombie, b)
			}
			time.Sleep(10 * time.Millisecond)
		}
		expect(t, stop(t, zombie), "had already exited")
	})

	t.Run("a pid nobody holds", func(t *testing.T) {
		cmd := start(t, "true")
		_ = cmd.Wait()
		expect(t, stop(t, cmd.Process.Pid), "had already exited")
	})

	t.Run("another program", func(t *testing.T) {
		other := start(t, "sleep", "30")
		out := stop(t, other.Process.Pid)
		expect(t, out, "is not this server; not signalling it")
		if err := other.Process.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("the other program was signalled: %v", err)
		}
	})

	t.Run("its own server", func(t *testing.T) {
		// A stand-in whose command line names the run directory as gitea's does; it stays a
		// zombie after SIGTERM until this test reaps it, after stop returns.
		server := start(t, "sh", "-c", `trap 'exit 0' TERM; while :; do sleep 0.05; done`, "gitea", "--work-path", run, "web")
		time.Sleep(100 * time.Millisecond) // let sh set its trap
		began := time.Now()
		out := stop(t, server.Process.Pid)
		expect(t, out, "(pid "+strconv.Itoa(server.Process.Pid)+") stopped")
		if strings.Contains(out, "SIGKILL") || time.Since(began) > 5*time.Second {
			t.Fatalf("stop waited on the zombie of its server (%s): %s", time.Since(began), out)
		}
	})
}

// kubectl_complete-fleet is what kubectl runs to complete `kubectl fleet ...`: it hands
// the words to the plugin's cobra completion, found beside it (as make build installs
// both) or else on PATH.
func TestKubectlCompleteFleet(t *testing.T) {
	shim, err := filepath.Abs("../cmd/kubectl-fleet/kubectl_complete-fleet")
	if err != nil {
		t.Fatal(err)
	}
	complete := func(t *testing.T, path, dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(path, args...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+"/usr/bin:/bin")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %q: %v", path, args, err)
		}
		return string(out)
	}

	t.Run("passes the words on", func(t *testing.T) {
		fake := t.TempDir()
		if err := os.WriteFile(filepath.Join(fake, "kubectl-fleet"), []byte("#!/bin/sh\nprintf '<%s>' \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if got, want := complete(t, shim, fake, "claim", "--worker", ""), "<__complete><claim><--worker><>"; got != want {
			t.Fatalf("the plugin got %s, want %s", got, want)
		}
	})

	t.Run("completes with the real plugin", func(t *testing.T) {
		if testing.Short() {
			t.Skip("builds kubectl-fleet")
		}
		bin := t.TempDir()
		build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-fleet"), "../cmd/kubectl-fleet")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		installed := filepath.Join(bin, "kubectl_complete-fleet")
		b, err := os.ReadFile(shim)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(installed, b, 0o755); err != nil {
			t.Fatal(err)
		}
		// Beside the plugin, with no kubectl-fleet on PATH: as make build installs it.
		out := complete(t, installed, t.TempDir(), "cl")
		if !strings.Contains(out, "claim\t") || !strings.Contains(out, "\n:4\n") {
			t.Fatalf("kubectl_complete-fleet cl = %q, want claim and the directive :4 (no file completion)", out)
		}
		out = complete(t, installed, t.TempDir(), "")
		for _, cmd := range []string{"register\t", "claim\t", "release\t", "complete\t", "mcp\t", "status\t"} {
			if !strings.Contains(out, cmd) {
				t.Errorf("kubectl_complete-fleet '' lacks %q: %q", strings.TrimSpace(cmd), out)
			}
		}
	})
}
