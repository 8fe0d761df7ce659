package liveness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

const (
	testHost  = "0123456789abcdef0123456789abcdef"
	otherHost = "fedcba9876543210fedcba9876543210"
	testBoot  = "11111111-2222-3333-4444-555555555555"
	oldBoot   = "99999999-8888-7777-6666-555555555555"
)

// statLine renders a /proc/<pid>/stat line in the kernel's layout.
func statLine(pid int64, comm string, state byte, start int64) string {
	return fmt.Sprintf("%d (%s) %c 1 1 1 0 -1 4194304 101 0 0 0 0 0 0 0 20 0 1 0 %d 3133440 379 18446744073709551615 0 0\n",
		pid, comm, state, start)
}

// fakeRoot is a directory laid out like the parts of / the package reads.
type fakeRoot struct {
	t    *testing.T
	root string
}

func newFakeRoot(t *testing.T, hostID, bootID string) *fakeRoot {
	t.Helper()
	f := &fakeRoot{t: t, root: t.TempDir()}
	if hostID != "" {
		f.write(machineIDPath, hostID+"\n")
	}
	if bootID != "" {
		f.write(bootIDPath, bootID+"\n")
	}
	// By default the tree is a procfs that hides nothing: mounted without
	// hidepid, with pid 1 visible.
	f.mountProc("rw,nosuid,nodev,noexec,relatime", "rw")
	f.process(sentinelPID, "init", 'S', 1)
	return f
}

// mountProc writes <root>/proc/self/mountinfo listing a few unrelated mounts
// and a procfs at <root>/proc with the given per-mount and superblock
// options.
func (f *fakeRoot) mountProc(mountOpts, superOpts string) {
	f.t.Helper()
	f.mkdir("proc")
	dir, err := resolvedProcDir(f.root)
	if err != nil {
		f.t.Fatal(err)
	}
	f.write(mountInfoPath, mountInfo(dir, mountOpts, superOpts))
}

// mountInfo renders a mountinfo with a procfs at dir.
func mountInfo(dir, mountOpts, superOpts string) string {
	return "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n" +
		"23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n" +
		"24 22 0:5 / /dev rw,nosuid master:2 - devtmpfs udev rw,size=4096k\n" +
		fmt.Sprintf("57 22 0:52 / %s %s shared:30 - proc proc %s\n", dir, mountOpts, superOpts)
}

// remove deletes <root>/<rel> and everything below it.
func (f *fakeRoot) remove(rel string) {
	f.t.Helper()
	if err := os.RemoveAll(filepath.Join(f.root, rel)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeRoot) write(rel, content string) {
	f.t.Helper()
	path := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeRoot) mkdir(rel string) {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Join(f.root, rel), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeRoot) process(pid int64, comm string, state byte, start int64) {
	f.t.Helper()
	f.write(filepath.Join("proc", strconv.FormatInt(pid, 10), "stat"), statLine(pid, comm, state, start))
}

func ptr(v int64) *int64 { return &v }
