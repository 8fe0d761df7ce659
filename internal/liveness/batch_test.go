package liveness

import (
	"context"
	"reflect"
	"testing"
)

// ProbeAll gives every target the answer Probe gives it, in every tree the prober may
// face: visible, hiding processes, without a verified boot.
func TestProbeAllEqualsProbe(t *testing.T) {
	targets := []Target{
		{testHost, testBoot, 100, ptr(5000), nil}, // alive
		{testHost, testBoot, 100, ptr(4999), nil}, // reused
		{testHost, testBoot, 200, ptr(5000), nil}, // free
		{testHost, oldBoot, 200, ptr(5000), nil},  // free, earlier boot
		{testHost, oldBoot, 100, ptr(5000), nil},  // occupied, earlier boot
		{otherHost, testBoot, 200, ptr(5000), nil},
		{testHost, "", 200, ptr(5000), nil},
		{testHost, testBoot, 0, ptr(1), nil},
		{testHost, testBoot, 104, ptr(1), nil}, // unparsable stat
	}
	trees := map[string]func(f *fakeRoot){
		"visible":      func(*fakeRoot) {},
		"hidepid=2":    func(f *fakeRoot) { f.mountProc("rw,relatime", "rw,hidepid=invisible") },
		"pid 1 hidden": func(f *fakeRoot) { f.remove("proc/1") },
		"no mountinfo": func(f *fakeRoot) { f.remove(mountInfoPath) },
		"rebooted":     func(f *fakeRoot) { f.write(bootIDPath, oldBoot+"\n") },
	}
	for name, prepare := range trees {
		t.Run(name, func(t *testing.T) {
			f := newFakeRoot(t, testHost, testBoot)
			f.process(100, "worker", 'S', 5000)
			f.write("proc/104/stat", "104 (broken")
			prepare(f)
			p := &ProcProber{Root: f.root, Facts: HostFacts{HostID: testHost, BootID: testBoot}}
			got := p.ProbeAll(context.Background(), targets)
			if len(got) != len(targets) {
				t.Fatalf("%d answers for %d targets", len(got), len(targets))
			}
			for i, target := range targets {
				if want := p.Probe(context.Background(), target); !reflect.DeepEqual(got[i], want) {
					t.Errorf("target %+v: ProbeAll = %+v, Probe = %+v", target, got[i], want)
				}
			}
		})
	}
}

// A batch whose facts change while it runs is probed again one target at a time, so no
// answer rests on a fact that stopped holding.
func TestProbeAllRechecksAfterTheBatch(t *testing.T) {
	targets := []Target{{testHost, testBoot, 200, ptr(1), nil}, {testHost, testBoot, 201, ptr(1), nil}}
	changes := map[string]func(f *fakeRoot){
		"hidepid mounted": func(f *fakeRoot) { f.mountProc("rw,relatime", "rw,hidepid=invisible") },
		"rebooted":        func(f *fakeRoot) { f.write(bootIDPath, oldBoot+"\n") },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			f := newFakeRoot(t, testHost, testBoot)
			p := &ProcProber{Root: f.root, Facts: HostFacts{HostID: testHost, BootID: testBoot}}
			if r := p.ProbeAll(context.Background(), targets); r[0].State != Gone {
				t.Fatalf("before the change: %s (%s), want gone", r[0].State, r[0].Detail)
			}
			for i, r := range p.probeAll(context.Background(), targets, func() { change(f) }) {
				if r.State != Unknown {
					t.Errorf("target %d: %s (%s), want unknown: the batch's facts no longer hold", i, r.State, r.Detail)
				}
			}
		})
	}
}
