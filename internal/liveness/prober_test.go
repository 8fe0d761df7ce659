package liveness

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
)

func TestProcProberProbe(t *testing.T) {
	// Processes in the fake tree: 100 and 101 ordinary, 102 a zombie, 103 a
	// command name with parens, 104 unparsable, 105 a directory as stat.
	f := newFakeRoot(t, testHost, testBoot)
	f.process(100, "worker", 'S', 5000)
	f.process(101, "x y", 'R', 6000)
	f.process(102, "defunct", 'Z', 7000)
	f.process(103, "a) b (c", 'S', 8000)
	f.write("proc/104/stat", "104 (broken")
	f.mkdir("proc/105/stat")
	facts := HostFacts{HostID: testHost, BootID: testBoot}

	tests := []struct {
		name       string
		facts      HostFacts
		target     Target
		want       State
		wantObs    *int64
		wantDetail string
	}{
		{name: "alive", target: Target{testHost, testBoot, 100, ptr(5000), nil}, want: Alive, wantObs: ptr(5000)},
		{name: "alive, command with space", target: Target{testHost, testBoot, 101, ptr(6000), nil}, want: Alive, wantObs: ptr(6000)},
		{name: "alive, command with parens", target: Target{testHost, testBoot, 103, ptr(8000), nil}, want: Alive, wantObs: ptr(8000)},
		{name: "zombie counts as alive", target: Target{testHost, testBoot, 102, ptr(7000), nil}, want: Alive, wantObs: ptr(7000), wantDetail: "zombie"},
		{name: "reused", target: Target{testHost, testBoot, 100, ptr(4999), nil}, want: Reused, wantObs: ptr(5000), wantDetail: "expected start time 4999"},
		{name: "zombie with other start time is reused", target: Target{testHost, testBoot, 102, ptr(1), nil}, want: Reused, wantObs: ptr(7000)},
		{name: "reused, command with parens", target: Target{testHost, testBoot, 103, ptr(1), nil}, want: Reused, wantObs: ptr(8000)},
		{name: "gone", target: Target{testHost, testBoot, 200, ptr(5000), nil}, want: Gone, wantDetail: "not found"},
		{name: "gone without recorded start time", target: Target{testHost, testBoot, 200, nil, nil}, want: Gone},
		{name: "gone, pid from an earlier boot", target: Target{testHost, oldBoot, 200, ptr(5000), nil}, want: Gone, wantDetail: oldBoot},

		{name: "pid zero", target: Target{testHost, testBoot, 0, ptr(1), nil}, want: Unknown},
		{name: "negative pid", target: Target{testHost, testBoot, -100, ptr(5000), nil}, want: Unknown},
		{name: "wrong host, occupied", target: Target{otherHost, testBoot, 100, ptr(5000), nil}, want: Unknown, wantDetail: "wrong host"},
		{name: "wrong host, free", target: Target{otherHost, testBoot, 200, ptr(5000), nil}, want: Unknown, wantDetail: "wrong host"},
		{name: "target host empty", target: Target{"", testBoot, 200, ptr(5000), nil}, want: Unknown},
		{name: "prober host empty", facts: HostFacts{BootID: testBoot}, target: Target{"", testBoot, 200, ptr(5000), nil}, want: Unknown},
		{name: "expected start time unknown, occupied", target: Target{testHost, testBoot, 100, nil, nil}, want: Unknown, wantObs: ptr(5000)},
		{name: "unparsable stat", target: Target{testHost, testBoot, 104, ptr(1), nil}, want: Unknown},
		{name: "unreadable stat", target: Target{testHost, testBoot, 105, ptr(1), nil}, want: Unknown},

		// A live pid is an absolute block, whatever the boot says.
		{name: "earlier boot, occupied", target: Target{testHost, oldBoot, 100, ptr(5000), nil}, want: Reused, wantObs: ptr(5000), wantDetail: "not the current boot"},
		{name: "earlier boot, occupied, no start time", target: Target{testHost, oldBoot, 100, nil, nil}, want: Reused, wantObs: ptr(5000)},
		{name: "earlier boot, zombie", target: Target{testHost, oldBoot, 102, ptr(7000), nil}, want: Reused, wantObs: ptr(7000)},
		{name: "target boot empty, occupied, same start", target: Target{testHost, "", 100, ptr(5000), nil}, want: Unknown, wantObs: ptr(5000)},
		{name: "target boot empty, occupied, other start", target: Target{testHost, "", 100, ptr(1), nil}, want: Reused, wantObs: ptr(5000)},
		{name: "target boot empty, occupied, no start", target: Target{testHost, "", 100, nil, nil}, want: Unknown, wantObs: ptr(5000)},
		{name: "target boot empty, free", target: Target{testHost, "", 200, ptr(5000), nil}, want: Unknown},
		{name: "prober boot empty, free", facts: HostFacts{HostID: testHost}, target: Target{testHost, testBoot, 200, ptr(5000), nil}, want: Unknown},
		{name: "prober boot empty, occupied, same start", facts: HostFacts{HostID: testHost}, target: Target{testHost, testBoot, 100, ptr(5000), nil}, want: Unknown, wantObs: ptr(5000)},
		{name: "prober boot empty, occupied, other start", facts: HostFacts{HostID: testHost}, target: Target{testHost, testBoot, 100, ptr(1), nil}, want: Reused, wantObs: ptr(5000)},
		{name: "prober boot stale, free", facts: HostFacts{HostID: testHost, BootID: oldBoot}, target: Target{testHost, oldBoot, 200, ptr(5000), nil}, want: Unknown, wantDetail: "differs"},
		{name: "prober boot stale, occupied, same start", facts: HostFacts{HostID: testHost, BootID: oldBoot}, target: Target{testHost, oldBoot, 100, ptr(5000), nil}, want: Unknown, wantObs: ptr(5000)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pf := tc.facts
			if pf == (HostFacts{}) {
				pf = facts
			}
			p := &ProcProber{Root: f.root, Facts: pf}
			got := p.Probe(context.Background(), tc.target)
			if got.State != tc.want {
				t.Fatalf("State = %s (%s), want %s", got.State, got.Detail, tc.want)
			}
			if !sameInt(got.ObservedStartTime, tc.wantObs) {
				t.Errorf("ObservedStartTime = %v, want %v", deref(got.ObservedStartTime), deref(tc.wantObs))
			}
			if got.Detail == "" {
				t.Errorf("Detail is empty")
			}
			if !strings.Contains(got.Detail, tc.wantDetail) {
				t.Errorf("Detail = %q, want it to contain %q", got.Detail, tc.wantDetail)
			}
		})
	}
}

// An unmounted /proc looks like a tree in which every pid is free. The live
// boot id read from the same tree is what keeps that from turning into Gone.
func TestProbeUnverifiableProcIsNeverGone(t *testing.T) {
	f := newFakeRoot(t, testHost, "")
	f.mkdir("proc")
	p := &ProcProber{Root: f.root, Facts: HostFacts{HostID: testHost, BootID: testBoot}}
	got := p.Probe(context.Background(), Target{testHost, testBoot, 200, ptr(5000), nil})
	if got.State != Unknown {
		t.Fatalf("State = %s (%s), want unknown", got.State, got.Detail)
	}
}

func TestProbePermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files regardless of their mode")
	}
	f := newFakeRoot(t, testHost, testBoot)
	f.process(100, "worker", 'S', 5000)
	path := statPath(f.root, 100)
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	p := &ProcProber{Root: f.root, Facts: HostFacts{HostID: testHost, BootID: testBoot}}
	got := p.Probe(context.Background(), Target{testHost, testBoot, 100, ptr(5000), nil})
	if got.State != Unknown {
		t.Fatalf("State = %s (%s), want unknown", got.State, got.Detail)
	}
}

func TestProbeCanceledContext(t *testing.T) {
	f := newFakeRoot(t, testHost, testBoot)
	p := &ProcProber{Root: f.root, Facts: HostFacts{HostID: testHost, BootID: testBoot}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := p.Probe(ctx, Target{testHost, testBoot, 200, ptr(5000), nil})
	if got.State != Unknown {
		t.Fatalf("State = %s (%s), want unknown", got.State, got.Detail)
	}
}

// TestProbeInvariants runs every combination of host, boot, start time and
// pid occupancy and checks the guarantees callers rely on.
func TestProbeInvariants(t *testing.T) {
	f := newFakeRoot(t, testHost, testBoot)
	f.process(100, "worker", 'S', 5000)
	f.process(102, "defunct", 'Z', 5000)
	f.write("proc/104/stat", "104 (broken")
	occupiedPIDs := map[int64]bool{100: true, 102: true}

	hosts := []string{testHost, otherHost, ""}
	boots := []string{testBoot, oldBoot, ""}
	starts := []*int64{ptr(5000), ptr(4000), nil}
	pids := []int64{100, 102, 104, 200, 0}
	proberFacts := []HostFacts{
		{HostID: testHost, BootID: testBoot},
		{HostID: testHost, BootID: oldBoot},
		{HostID: testHost},
		{BootID: testBoot},
		{HostID: otherHost, BootID: testBoot},
	}
	for _, pf := range proberFacts {
		p := &ProcProber{Root: f.root, Facts: pf}
		for _, h := range hosts {
			for _, b := range boots {
				for _, s := range starts {
					for _, pid := range pids {
						tg := Target{HostID: h, BootID: b, PID: pid, StartTime: s}
						r := p.Probe(context.Background(), tg)
						desc := func() string { return r.Detail }
						switch r.State {
						case Gone:
							if occupiedPIDs[pid] || pid == 104 {
								t.Errorf("facts %+v target %+v: gone for a pid that is not free (%s)", pf, tg, desc())
							}
							if h == "" || h != pf.HostID {
								t.Errorf("facts %+v target %+v: gone without a host match (%s)", pf, tg, desc())
							}
							if pf.BootID != testBoot || b == "" {
								t.Errorf("facts %+v target %+v: gone without verified boots (%s)", pf, tg, desc())
							}
						case Alive:
							if !occupiedPIDs[pid] || s == nil || *s != 5000 || b != testBoot || pf.BootID != testBoot || h != pf.HostID {
								t.Errorf("facts %+v target %+v: alive without full proof (%s)", pf, tg, desc())
							}
						case Reused:
							if !occupiedPIDs[pid] {
								t.Errorf("facts %+v target %+v: reused for a pid that is not occupied (%s)", pf, tg, desc())
							}
						case Unknown:
						default:
							t.Errorf("unexpected state %q", r.State)
						}
						if occupiedPIDs[pid] && h != "" && h == pf.HostID && r.ObservedStartTime == nil {
							t.Errorf("facts %+v target %+v: occupied pid without observed start time", pf, tg)
						}
					}
				}
			}
		}
	}
}

func TestProbeConcurrent(t *testing.T) {
	f := newFakeRoot(t, testHost, testBoot)
	f.process(100, "worker", 'S', 5000)
	p := &ProcProber{Root: f.root, Facts: HostFacts{HostID: testHost, BootID: testBoot}}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				if r := p.Probe(context.Background(), Target{testHost, testBoot, 100, ptr(5000), nil}); r.State != Alive {
					t.Errorf("State = %s (%s)", r.State, r.Detail)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func sameInt(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
