package liveness

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

const (
	podA = "6f1c2a52-3b7d-4e2a-9a4f-0c1d2e3f4a5b"
	podB = "0a0b0c0d-1111-2222-3333-444455556666"
)

// podProcess writes host process hostPID as a process of pod uid with namespace pid
// nsPID (cgroupfs layout unless systemd).
func (f *fakeRoot) podProcess(hostPID, nsPID int64, uid string, start int64, systemd bool) {
	f.t.Helper()
	f.process(hostPID, "worker", 'S', start)
	f.write(fmt.Sprintf("proc/%d/status", hostPID), fmt.Sprintf("Name:\tworker\nState:\tS (sleeping)\nNSpid:\t%d\t%d\n", hostPID, nsPID))
	cg := fmt.Sprintf("12:memory:/kubepods/besteffort/pod%s/0123abcd\n11:cpu:/kubepods/besteffort/pod%s/0123abcd\n", uid, uid)
	if systemd {
		u := strings.ReplaceAll(uid, "-", "_")
		cg = fmt.Sprintf("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice/cri-containerd-0123abcd.scope\n", u)
	}
	f.write(fmt.Sprintf("proc/%d/cgroup", hostPID), cg)
}

// hostProcess writes an ordinary host process (one NSpid, no pod cgroup).
func (f *fakeRoot) hostProcess(pid, start int64) {
	f.t.Helper()
	f.process(pid, "host", 'S', start)
	f.write(fmt.Sprintf("proc/%d/status", pid), fmt.Sprintf("Name:\thost\nNSpid:\t%d\n", pid))
	f.write(fmt.Sprintf("proc/%d/cgroup", pid), "12:memory:/user.slice\n")
}

func TestProbePod(t *testing.T) {
	f := newFakeRoot(t, testHost, testBoot)
	// Host pid 7 is an unrelated host process: a pod target with namespace pid 7 must
	// never be judged by it.
	f.hostProcess(7, 5000)
	f.podProcess(4100, 7, podA, 9000, false) // pod A's worker, namespace pid 7
	f.podProcess(4200, 1, podA, 8000, false) // pod A's other container, namespace pid 1
	f.podProcess(4300, 1, podA, 8500, false) // and a third with namespace pid 1 too
	f.podProcess(4400, 12, podB, 9100, true) // pod B, systemd cgroup names
	facts := HostFacts{HostID: testHost, BootID: testBoot}
	pod := func(uid string, pid, start int64) Target {
		return Target{HostID: testHost, BootID: testBoot, PID: pid, StartTime: ptr(start), Pod: &PodTarget{UID: uid}}
	}
	tests := []struct {
		name       string
		target     Target
		want       State
		wantDetail string
	}{
		{"alive in its pod", pod(podA, 7, 9000), Alive, "pod " + podA},
		{"alive, uid in upper case", pod(strings.ToUpper(podA), 7, 9000), Alive, ""},
		{"alive under the systemd driver", pod(podB, 12, 9100), Alive, ""},
		{"one of two containers' namespace pid 1", pod(podA, 1, 8500), Alive, ""},
		{"host pid 7 is alive, but the pod's pid 7 started elsewhen", pod(podA, 7, 5000), Reused, "expected start time 5000"},
		{"no process of the pod holds the pid", pod(podA, 8, 9000), Gone, "no process of pod"},
		{"another pod's pid is not this pod's", pod(podB, 7, 9000), Gone, ""},
		{"start time not recorded", Target{HostID: testHost, BootID: testBoot, PID: 7, Pod: &PodTarget{UID: podA}}, Unknown, "start time not recorded"},
		{"earlier boot", Target{HostID: testHost, BootID: oldBoot, PID: 7, StartTime: ptr(9000), Pod: &PodTarget{UID: podA}}, Gone, "ended"},
		{"boot not recorded", Target{HostID: testHost, PID: 7, StartTime: ptr(9000), Pod: &PodTarget{UID: podA}}, Unknown, "boot id is not recorded"},
		{"wrong host", Target{HostID: otherHost, BootID: testBoot, PID: 7, StartTime: ptr(9000), Pod: &PodTarget{UID: podA}}, Unknown, "wrong host"},
	}
	p := &ProcProber{Root: f.root, Facts: facts}
	var targets []Target
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Probe(context.Background(), tc.target)
			if got.State != tc.want || !strings.Contains(got.Detail, tc.wantDetail) {
				t.Fatalf("Probe = %s (%s), want %s containing %q", got.State, got.Detail, tc.want, tc.wantDetail)
			}
		})
		targets = append(targets, tc.target)
	}
	for i, got := range p.ProbeAll(context.Background(), targets) {
		if want := p.Probe(context.Background(), targets[i]); got != want && (got.State != want.State || got.Detail != want.Detail) {
			t.Errorf("ProbeAll[%d] = %+v, Probe = %+v", i, got, want)
		}
	}
}

// A pod's process that hides behind hidepid, or a host whose processes cannot all be
// read, proves nothing gone.
func TestProbePodFailsClosed(t *testing.T) {
	target := Target{HostID: testHost, BootID: testBoot, PID: 7, StartTime: ptr(9000), Pod: &PodTarget{UID: podA}}
	facts := HostFacts{HostID: testHost, BootID: testBoot}

	hidden := newFakeRoot(t, testHost, testBoot)
	hidden.mountProc("rw,nosuid,nodev,noexec,relatime", "rw,hidepid=invisible")
	if got := (&ProcProber{Root: hidden.root, Facts: facts}).Probe(context.Background(), target); got.State != Unknown {
		t.Errorf("hidepid: %s (%s), want unknown", got.State, got.Detail)
	}

	noNSpid := newFakeRoot(t, testHost, testBoot)
	noNSpid.process(4100, "worker", 'S', 9000)
	noNSpid.write("proc/4100/status", "Name:\tworker\n") // a kernel too old to say
	if got := (&ProcProber{Root: noNSpid.root, Facts: facts}).Probe(context.Background(), target); got.State != Unknown || !strings.Contains(got.Detail, "NSpid") {
		t.Errorf("no NSpid: %s (%s), want unknown", got.State, got.Detail)
	}

	unreadable := newFakeRoot(t, testHost, testBoot)
	unreadable.podProcess(4100, 7, podA, 9000, false)
	unreadable.remove("proc/4100/cgroup")
	unreadable.mkdir("proc/4100/cgroup") // reading it fails with EISDIR
	if got := (&ProcProber{Root: unreadable.root, Facts: facts}).Probe(context.Background(), target); got.State != Unknown {
		t.Errorf("unreadable cgroup: %s (%s), want unknown", got.State, got.Detail)
	}
}
