package liveness

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestReadHostFacts(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(f *fakeRoot)
		want      HostFacts
		wantErr   bool
		wantNoAny bool
	}{
		{
			name: "both present, whitespace trimmed",
			setup: func(f *fakeRoot) {
				f.write(machineIDPath, "  "+testHost+"\n\n")
				f.write(bootIDPath, testBoot+"\n")
			},
			want: HostFacts{HostID: testHost, BootID: testBoot},
		},
		{
			name:  "machine-id missing",
			setup: func(f *fakeRoot) { f.write(bootIDPath, testBoot+"\n") },
			want:  HostFacts{BootID: testBoot},
		},
		{
			name:  "boot_id missing",
			setup: func(f *fakeRoot) { f.write(machineIDPath, testHost+"\n") },
			want:  HostFacts{HostID: testHost},
		},
		{
			name:      "both missing",
			setup:     func(*fakeRoot) {},
			wantErr:   true,
			wantNoAny: true,
		},
		{
			name: "machine-id uninitialized",
			setup: func(f *fakeRoot) {
				f.write(machineIDPath, "uninitialized\n")
				f.write(bootIDPath, testBoot+"\n")
			},
			want: HostFacts{BootID: testBoot},
		},
		{
			name: "machine-id empty",
			setup: func(f *fakeRoot) {
				f.write(machineIDPath, "\n")
				f.write(bootIDPath, testBoot+"\n")
			},
			want: HostFacts{BootID: testBoot},
		},
		{
			name: "machine-id unreadable keeps boot id",
			setup: func(f *fakeRoot) {
				f.mkdir(machineIDPath)
				f.write(bootIDPath, testBoot+"\n")
			},
			want:    HostFacts{BootID: testBoot},
			wantErr: true,
		},
		{
			name: "boot time from proc/stat",
			setup: func(f *fakeRoot) {
				f.write(bootIDPath, testBoot+"\n")
				f.write(procStatPath, "cpu  1 2 3 4\nintr 5\nctxt 6\nbtime 1796107504\nprocesses 7\n")
			},
			want: HostFacts{BootID: testBoot, BootTime: time.Unix(1796107504, 0).UTC()},
		},
		{
			name: "proc/stat without btime",
			setup: func(f *fakeRoot) {
				f.write(bootIDPath, testBoot+"\n")
				f.write(procStatPath, "cpu  1 2 3 4\n")
			},
			want: HostFacts{BootID: testBoot},
		},
		{
			name: "btime malformed",
			setup: func(f *fakeRoot) {
				f.write(bootIDPath, testBoot+"\n")
				f.write(procStatPath, "btime -5\n")
			},
			want:    HostFacts{BootID: testBoot},
			wantErr: true,
		},
		{
			name: "btime zero",
			setup: func(f *fakeRoot) {
				f.write(bootIDPath, testBoot+"\n")
				f.write(procStatPath, "btime 0\n")
			},
			want:    HostFacts{BootID: testBoot},
			wantErr: true,
		},
		{
			name: "boot_id unreadable keeps host id",
			setup: func(f *fakeRoot) {
				f.write(machineIDPath, testHost+"\n")
				f.mkdir(bootIDPath)
			},
			want:    HostFacts{HostID: testHost},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRoot(t, "", "")
			tc.setup(f)
			got, err := ReadHostFacts(f.root)
			if got != tc.want {
				t.Errorf("facts = %+v, want %+v", got, tc.want)
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrNoHostFacts); got != tc.wantNoAny {
				t.Errorf("errors.Is(%v, ErrNoHostFacts) = %v, want %v", err, got, tc.wantNoAny)
			}
		})
	}
}

func TestReadHostFactsRealRoot(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	facts, err := ReadHostFacts("")
	if err != nil {
		t.Fatalf("ReadHostFacts(\"\"): %v", err)
	}
	want, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	if facts.BootID == "" || facts.BootID+"\n" != string(want) {
		t.Fatalf("BootID = %q, want %q", facts.BootID, want)
	}
	if facts.BootTime.IsZero() || facts.BootTime.After(time.Now()) {
		t.Fatalf("BootTime = %v, want a past instant", facts.BootTime)
	}
}

func TestNewProcProber(t *testing.T) {
	f := newFakeRoot(t, testHost, testBoot)
	p, err := NewProcProber(f.root)
	if err != nil {
		t.Fatalf("NewProcProber: %v", err)
	}
	if got := p.Host(); got != (HostFacts{HostID: testHost, BootID: testBoot}) {
		t.Fatalf("Host() = %+v", got)
	}
	if p.Root != f.root {
		t.Fatalf("Root = %q, want %q", p.Root, f.root)
	}

	empty := newFakeRoot(t, "", "")
	if p, err := NewProcProber(empty.root); err == nil || p != nil {
		t.Fatalf("NewProcProber on an empty root = %v, %v, want nil and an error", p, err)
	}
}
