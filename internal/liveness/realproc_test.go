package liveness

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// realProber probes this machine's /proc. A machine without a machine-id
// gets a stand-in host id, used consistently by prober and targets.
func realProber(t *testing.T) *ProcProber {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux /proc")
	}
	p, err := NewProcProber("")
	if err != nil {
		t.Fatalf("NewProcProber: %v", err)
	}
	if p.Facts.BootID == "" {
		t.Skip("no boot id on this machine")
	}
	if p.Facts.HostID == "" {
		p.Facts.HostID = testHost
	}
	return p
}

func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

func TestRealProcessLifecycle(t *testing.T) {
	p := realProber(t)
	ctx := context.Background()
	cmd := startSleep(t)
	pid := int64(cmd.Process.Pid)

	start, err := ProcessStartTime("", pid)
	if err != nil {
		t.Fatalf("ProcessStartTime: %v", err)
	}
	target := Target{HostID: p.Facts.HostID, BootID: p.Facts.BootID, PID: pid, StartTime: &start}

	if r := p.Probe(ctx, target); r.State != Alive || r.ObservedStartTime == nil || *r.ObservedStartTime != start {
		t.Fatalf("running child: %+v, want alive with start time %d", r, start)
	}

	wrong := start + 1
	reused := target
	reused.StartTime = &wrong
	if r := p.Probe(ctx, reused); r.State != Reused {
		t.Fatalf("other start time: %+v, want reused", r)
	}

	// Killed but not yet reaped: a zombie still holds the pid.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitForState(t, pid, 'Z')
	if r := p.Probe(ctx, target); r.State != Alive || !strings.Contains(r.Detail, "zombie") {
		t.Fatalf("zombie child: %+v, want alive (zombie)", r)
	}

	_ = cmd.Wait()
	if r := p.Probe(ctx, target); r.State != Gone {
		t.Fatalf("reaped child: %+v, want gone", r)
	}
}

func TestRealOwnProcess(t *testing.T) {
	p := realProber(t)
	ctx := context.Background()
	pid := int64(os.Getpid())
	start, err := ProcessStartTime("", pid)
	if err != nil {
		t.Fatalf("ProcessStartTime: %v", err)
	}

	self := Target{HostID: p.Facts.HostID, BootID: p.Facts.BootID, PID: pid, StartTime: &start}
	if r := p.Probe(ctx, self); r.State != Alive {
		t.Fatalf("own process: %+v, want alive", r)
	}

	elsewhere := self
	elsewhere.HostID = otherHost
	if p.Facts.HostID == otherHost {
		elsewhere.HostID = testHost
	}
	if r := p.Probe(ctx, elsewhere); r.State != Unknown || !strings.Contains(r.Detail, "wrong host") {
		t.Fatalf("own process on another host: %+v, want unknown (wrong host)", r)
	}

	earlier := self
	earlier.BootID = oldBoot
	if r := p.Probe(ctx, earlier); r.State != Reused {
		t.Fatalf("own pid claimed by an earlier boot: %+v, want reused", r)
	}
}

func waitForState(t *testing.T, pid int64, want byte) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, state, err := readStat("", pid)
		if err == nil && state == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not reach state %c (last state %c, err %v)", pid, want, state, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
