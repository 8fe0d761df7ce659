package liveness

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
	"github.com/giteatools/fleet-controller/internal/retirement"
)

// Pids of the simulated hidepid hosts: the agent's own processes (visible
// to it) and a foreign worker it cannot see.
const (
	ownPID     = 500
	ownStart   = 50000
	foreignPID = 300
)

// hiddenRoot simulates a /proc mounted with hidepid=2 as seen by an
// unprivileged agent: only the agent's own processes are listed; pid 1 and
// every other user's process are absent.
func hiddenRoot(t *testing.T) *fakeRoot {
	t.Helper()
	f := newFakeRoot(t, testHost, testBoot)
	f.remove("proc/1")
	f.mountProc("rw,nosuid,nodev,noexec,relatime", "rw,hidepid=invisible,gid=0")
	f.process(ownPID, "fleet-controller", 'S', ownStart)
	f.process(ownPID+1, "fleet-controller", 'S', ownStart+1)
	return f
}

// noSentinelRoot simulates a procfs whose mount options look harmless (for
// example a kernel or bind mount that does not show hidepid) but in which
// pid 1 cannot be seen.
func noSentinelRoot(t *testing.T) *fakeRoot {
	t.Helper()
	f := newFakeRoot(t, testHost, testBoot)
	f.remove("proc/1")
	f.process(ownPID, "fleet-controller", 'S', ownStart)
	return f
}

func TestProcVisibility(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(f *fakeRoot)
		wantDetail string // "" means visibility is proven
	}{
		{name: "plain procfs", setup: func(*fakeRoot) {}},
		{name: "hidepid=0", setup: func(f *fakeRoot) { f.mountProc("rw", "rw,hidepid=0") }},
		{name: "hidepid=off", setup: func(f *fakeRoot) { f.mountProc("rw", "rw,hidepid=off") }},
		{name: "hidepid=1", setup: func(f *fakeRoot) { f.mountProc("rw", "rw,hidepid=1") }, wantDetail: "hidepid=1"},
		{name: "hidepid=2", setup: func(f *fakeRoot) { f.mountProc("rw", "rw,hidepid=2") }, wantDetail: "hidepid=2"},
		{name: "hidepid=noaccess", setup: func(f *fakeRoot) { f.mountProc("rw", "rw,hidepid=noaccess") }, wantDetail: "hidepid=noaccess"},
		{name: "hidepid=invisible", setup: func(f *fakeRoot) { f.mountProc("rw", "rw,hidepid=invisible") }, wantDetail: "hidepid=invisible"},
		{name: "hidepid=ptraceable", setup: func(f *fakeRoot) { f.mountProc("rw", "rw,hidepid=ptraceable") }, wantDetail: "hidepid=ptraceable"},
		{name: "hidepid=4", setup: func(f *fakeRoot) { f.mountProc("rw", "rw,hidepid=4") }, wantDetail: "hidepid=4"},
		{name: "hidepid with an unknown value", setup: func(f *fakeRoot) { f.mountProc("rw", "rw,hidepid=7") }, wantDetail: "hidepid=7"},
		{name: "hidepid with a gid exemption", setup: func(f *fakeRoot) { f.mountProc("rw", "rw,gid=1000,hidepid=2") }, wantDetail: "hidepid=2"},
		{name: "hidepid in the per-mount options", setup: func(f *fakeRoot) { f.mountProc("rw,hidepid=2", "rw") }, wantDetail: "hidepid=2"},
		{name: "subset=pid", setup: func(f *fakeRoot) { f.mountProc("rw", "rw,subset=pid") }, wantDetail: "subset=pid"},
		{name: "mountinfo missing", setup: func(f *fakeRoot) { f.remove(mountInfoPath) }, wantDetail: "does not exist"},
		{name: "mountinfo unreadable", setup: func(f *fakeRoot) {
			f.remove(mountInfoPath)
			f.mkdir(mountInfoPath)
		}, wantDetail: "proc mount options unknown"},
		{name: "mountinfo malformed", setup: func(f *fakeRoot) { f.write(mountInfoPath, "22 1 8:1 / /\n") }, wantDetail: "malformed"},
		{name: "no mount at proc", setup: func(f *fakeRoot) {
			f.write(mountInfoPath, mountInfo("/elsewhere/proc", "rw", "rw"))
		}, wantDetail: "no mount at"},
		{name: "proc is not a procfs", setup: func(f *fakeRoot) {
			dir, _ := resolvedProcDir(f.root)
			f.write(mountInfoPath, mountInfo(dir, "rw", "rw")+"58 57 0:53 / "+dir+" rw - tmpfs tmpfs rw\n")
		}, wantDetail: `filesystem type "tmpfs"`},
		{name: "a plain procfs stacked over a hidepid one", setup: func(f *fakeRoot) {
			dir, _ := resolvedProcDir(f.root)
			f.write(mountInfoPath, mountInfo(dir, "rw", "rw,hidepid=2")+"58 57 0:53 / "+dir+" rw - proc proc rw\n")
		}},
		{name: "a hidepid procfs stacked over a plain one", setup: func(f *fakeRoot) {
			dir, _ := resolvedProcDir(f.root)
			f.write(mountInfoPath, mountInfo(dir, "rw", "rw")+"58 57 0:53 / "+dir+" rw - proc proc rw,hidepid=2\n")
		}, wantDetail: "hidepid=2"},
		{name: "pid 1 absent", setup: func(f *fakeRoot) { f.remove("proc/1") }, wantDetail: "pid 1 is not visible"},
		{name: "pid 1 unparsable", setup: func(f *fakeRoot) { f.write("proc/1/stat", "1 (init") }, wantDetail: "pid 1 cannot be examined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRoot(t, testHost, testBoot)
			tc.setup(f)
			got := procVisibility(f.root)
			if tc.wantDetail == "" {
				if got != "" {
					t.Fatalf("procVisibility = %q, want proven", got)
				}
			} else if !strings.Contains(got, tc.wantDetail) {
				t.Fatalf("procVisibility = %q, want it to contain %q", got, tc.wantDetail)
			}

			// The prober's answer for a free pid follows the same verdict.
			p := &ProcProber{Root: f.root, Facts: HostFacts{HostID: testHost, BootID: testBoot}}
			r := p.Probe(context.Background(), Target{testHost, testBoot, foreignPID, ptr(5000), nil})
			want := Gone
			if tc.wantDetail != "" {
				want = Unknown
			}
			if r.State != want || (tc.wantDetail != "" && !strings.Contains(r.Detail, tc.wantDetail)) {
				t.Fatalf("Probe = %s (%s), want %s", r.State, r.Detail, want)
			}
		})
	}
}

func TestProcVisibilitySentinelPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files regardless of their mode")
	}
	f := newFakeRoot(t, testHost, testBoot)
	if err := os.Chmod(statPath(f.root, sentinelPID), 0); err != nil {
		t.Fatal(err)
	}
	if got := procVisibility(f.root); !strings.Contains(got, "permission denied") {
		t.Fatalf("procVisibility = %q, want permission denied", got)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		`/proc`:              "/proc",
		`/host\040root/proc`: "/host root/proc",
		`/a\011b\012c\134d`:  "/a\tb\nc\\d",
		`/trailing\04`:       `/trailing\04`,
		`/not\999octal`:      `/not\999octal`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// A mount point with a space is found through its escaped mountinfo form.
func TestProcVisibilityEscapedMountPoint(t *testing.T) {
	f := &fakeRoot{t: t, root: t.TempDir() + "/host root"}
	f.write(bootIDPath, testBoot+"\n")
	f.process(sentinelPID, "init", 'S', 1)
	dir, err := resolvedProcDir(f.root)
	if err != nil {
		t.Fatal(err)
	}
	f.write(mountInfoPath, mountInfo(strings.ReplaceAll(dir, " ", `\040`), "rw", "rw"))
	if got := procVisibility(f.root); got != "" {
		t.Fatalf("procVisibility = %q, want proven", got)
	}
}

// TestHiddenProcessesAreNeverGone probes a hidepid=2 tree and a tree without
// pid 1 with every combination of target facts: no answer may be Gone, a
// free-looking pid is Unknown with a reason, and the agent's own, visible
// processes are still reported (alive or reused: blocks either way).
func TestHiddenProcessesAreNeverGone(t *testing.T) {
	for name, f := range map[string]*fakeRoot{"hidepid=2": hiddenRoot(t), "no pid 1": noSentinelRoot(t)} {
		t.Run(name, func(t *testing.T) {
			p := &ProcProber{Root: f.root, Facts: HostFacts{HostID: testHost, BootID: testBoot}}
			for _, b := range []string{testBoot, oldBoot, ""} {
				for _, s := range []*int64{ptr(5000), ptr(ownStart), nil} {
					for _, pid := range []int64{foreignPID, 1, ownPID, 999999} {
						tg := Target{HostID: testHost, BootID: b, PID: pid, StartTime: s}
						r := p.Probe(context.Background(), tg)
						if r.State == Gone {
							t.Errorf("target %+v: gone in a tree that hides processes (%s)", tg, r.Detail)
						}
						if pid != ownPID && r.State != Unknown {
							t.Errorf("target %+v: %s (%s), want unknown", tg, r.State, r.Detail)
						}
					}
				}
			}
			r := p.Probe(context.Background(), Target{testHost, testBoot, foreignPID, ptr(5000), nil})
			if !strings.Contains(r.Detail, "visibility is not proven") {
				t.Errorf("detail %q does not say why", r.Detail)
			}
			if r := p.Probe(context.Background(), Target{testHost, testBoot, ownPID, ptr(ownStart), nil}); r.State != Alive {
				t.Errorf("own process: %s (%s), want alive", r.State, r.Detail)
			}
		})
	}
}

// TestHiddenProcessesRetireNothing feeds the probes of a hidepid tree into
// the (pure) retirement plan: every foreign row, each one otherwise a
// perfect candidate, must be preserved, and so must the agent's own
// running process.
func TestHiddenProcessesRetireNothing(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	host := retirement.Host{HostID: testHost, BootID: testBoot, BootTime: now.Add(-24 * time.Hour)}
	row := func(name string, pid int64, start int64, boot string) retirement.Row {
		st := start
		return retirement.Row{
			Name: name, Namespace: "fleet", ClientInstanceID: "inst-" + name, WorkerNamespace: "team",
			Identity: "bot-" + name, Remote: "origin", Repository: "acme/widgets", Binding: "acme/widgets", HeartbeatTTLSeconds: "900",
			HostID: testHost, BootID: boot, PID: pid, StartTime: &st, GenerationID: "gen-" + name,
			SessionID: "sess-" + name, Phase: fleet.Active, OwnershipState: fleet.Stale,
			LastHeartbeatAt: now.Add(-48 * time.Hour).Format(time.RFC3339),
		}
	}
	for name, f := range map[string]*fakeRoot{"hidepid=2": hiddenRoot(t), "no pid 1": noSentinelRoot(t)} {
		t.Run(name, func(t *testing.T) {
			p := &ProcProber{Root: f.root, Facts: HostFacts{HostID: testHost, BootID: testBoot}}
			rows := []retirement.Row{
				row("foreign", foreignPID, 5000, testBoot),
				row("foreign-old-boot", foreignPID+1, 5000, oldBoot),
				row("sentinel", 1, 1, testBoot),
				row("own", ownPID, ownStart, testBoot),
			}
			probes := map[string]retirement.Probe{}
			for _, r := range rows {
				res := p.Probe(context.Background(), Target{HostID: r.HostID, BootID: r.BootID, PID: r.PID, StartTime: r.StartTime})
				probes[r.Name] = retirement.Probe{State: fleet.PIDState(res.State), ObservedStartTime: res.ObservedStartTime, Detail: res.Detail}
			}
			plan := retirement.BuildPlan(retirement.Input{
				Rows: rows, CanonicalRepository: "acme/widgets", CanonicalBinding: "acme/widgets", Now: now, Host: host, Probes: probes,
			})
			if plan.CandidateCount != 0 || len(plan.CandidateWorkerIdentities) != 0 {
				t.Fatalf("candidates %v from a tree that hides processes", plan.CandidateWorkerIdentities)
			}
			want := map[string]string{
				"foreign":          retirement.ReasonPIDLivenessUnknown,
				"foreign-old-boot": retirement.ReasonPIDLivenessUnknown,
				"sentinel":         retirement.ReasonPIDLivenessUnknown,
				"own":              retirement.ReasonPIDAlive,
			}
			for _, a := range plan.Preserved {
				if a.ReasonCode != want[a.WorkerIdentity] {
					t.Errorf("%s: %s (%s), want %s", a.WorkerIdentity, a.ReasonCode, a.Detail, want[a.WorkerIdentity])
				}
			}
			// The same tree with visibility restored retires the foreign rows,
			// so the preservation above is the visibility check's doing.
			f.mountProc("rw", "rw")
			f.process(sentinelPID, "init", 'S', 1)
			for _, r := range rows {
				res := p.Probe(context.Background(), Target{HostID: r.HostID, BootID: r.BootID, PID: r.PID, StartTime: r.StartTime})
				probes[r.Name] = retirement.Probe{State: fleet.PIDState(res.State), ObservedStartTime: res.ObservedStartTime, Detail: res.Detail}
			}
			rows = rows[:2]
			plan = retirement.BuildPlan(retirement.Input{
				Rows: rows, CanonicalRepository: "acme/widgets", CanonicalBinding: "acme/widgets", Now: now, Host: host, Probes: probes,
			})
			if plan.CandidateCount != 2 {
				t.Fatalf("visible tree: candidates %v, preserved %+v", plan.CandidateWorkerIdentities, plan.Preserved)
			}
		})
	}
}
