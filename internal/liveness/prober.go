package liveness

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// State is the answer of a liveness probe.
type State string

const (
	// Alive means the pid exists and its start time equals the expected one,
	// on the same, verified boot.
	Alive State = "alive"
	// Gone means no process holds the pid on the target's host, and the
	// prober could verify that it was looking at that host's live process
	// table and that the table hides no process. It is the only answer on
	// which callers may act (and, for a target of an earlier boot, only
	// together with the boot-time rule of internal/retirement).
	Gone State = "gone"
	// Reused means the pid number is held by a different incarnation: its
	// start time differs from the expected one, or the registered process
	// belonged to an earlier boot.
	Reused State = "reused"
	// Unknown means the prober cannot decide: wrong or unknown host, unknown
	// or unverified boot, unreadable or unparsable stat, a free-looking pid
	// in a /proc that may hide processes, or an occupied pid whose expected
	// start time was never recorded. It is never a synonym for Gone.
	Unknown State = "unknown"
)

// Target names one registered process.
type Target struct {
	// HostID is the machine id of the host the process was started on.
	HostID string
	// BootID is the boot id of that host when the process was started.
	BootID string
	// PID is the process id.
	PID int64
	// StartTime is field 22 of /proc/<pid>/stat (clock ticks since boot) at
	// registration; nil when it was not recorded.
	StartTime *int64
	// Pod, when set, is the pod the process runs in, and PID its pid in the pod's pid
	// namespace (pod.go): the prober resolves it and never reads /proc/<PID>.
	Pod *PodTarget
}

// Result is the outcome of one probe.
type Result struct {
	// State is the answer.
	State State
	// ObservedStartTime is the start time of the process currently holding
	// the pid, when one was found and its stat could be parsed.
	ObservedStartTime *int64
	// Detail is a short human-readable explanation, suitable as evidence.
	Detail string
}

// Prober probes the liveness of registered processes on one host.
type Prober interface {
	// Host returns the host facts the prober compares targets against.
	Host() HostFacts
	// Probe reports whether the target process is still running.
	Probe(ctx context.Context, t Target) Result
}

// ProcProber implements Prober by reading <Root>/proc. It keeps no state
// between probes and is safe for concurrent use.
type ProcProber struct {
	// Root is the filesystem root holding proc/ (and etc/); empty means "/".
	Root string
	// Facts are the identity of the host and boot this prober runs on.
	// HostID may come from configuration; BootID is re-verified against
	// <Root>/proc/sys/kernel/random/boot_id on every probe.
	Facts HostFacts
}

var _ BatchProber = (*ProcProber)(nil)

// BatchProber is a Prober that can also probe many targets at once, giving the
// answers Probe would give each of them.
type BatchProber interface {
	Prober
	ProbeAll(ctx context.Context, targets []Target) []Result
}

// NewProcProber returns a ProcProber over root whose facts are read with
// ReadHostFacts. It fails when ReadHostFacts fails; facts that are merely
// absent are left empty and make the prober answer Unknown where they are
// needed.
func NewProcProber(root string) (*ProcProber, error) {
	facts, err := ReadHostFacts(root)
	if err != nil {
		return nil, fmt.Errorf("liveness: new prober: %w", err)
	}
	return &ProcProber{Root: root, Facts: facts}, nil
}

// Host returns the prober's host facts.
func (p *ProcProber) Host() HostFacts { return p.Facts }

// Probe reports the liveness of t. See the package documentation for the
// full decision table; in short, Gone needs the same host, a verified boot
// and a free pid, and an occupied pid is never Gone.
func (p *ProcProber) Probe(ctx context.Context, t Target) Result {
	return p.probe(ctx, t, p.verifiedBoot, func() string { return procVisibility(p.Root) }, func() (podIndex, error) { return indexPods(p.Root) })
}

// probe is Probe with the boot check and the visibility proof supplied by the
// caller (ProbeAll checks them once for a whole batch).
func (p *ProcProber) probe(ctx context.Context, t Target, boot func() (string, string), visibility func() string, pods func() (podIndex, error)) Result {
	if t.PID <= 0 {
		return unknown(nil, "pid %d is not a valid process id", t.PID)
	}
	if err := ctx.Err(); err != nil {
		return unknown(nil, "probe of pid %d not run: %v", t.PID, err)
	}
	switch {
	case p.Facts.HostID == "":
		return unknown(nil, "host binding unproven: prober host id is unknown")
	case t.HostID == "":
		return unknown(nil, "host binding unproven: target host id is not recorded")
	case t.HostID != p.Facts.HostID:
		return unknown(nil, "wrong host: target host %s, prober host %s", t.HostID, p.Facts.HostID)
	}

	hostBoot, bootNote := boot()
	if t.Pod != nil {
		return probePod(t, hostBoot, bootNote, pods, visibility)
	}

	observed, state, err := readStat(p.Root, t.PID)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return p.free(t, hostBoot, bootNote, visibility)
		}
		return unknown(nil, "pid %d: cannot read process status: %v", t.PID, err)
	}
	return occupied(t, hostBoot, bootNote, observed, state)
}

// ProbeAll probes every target as Probe would, checking the host's boot id and
// the visibility of its processes once for the whole batch instead of once per
// target: before the first probe and again after the last. When either check
// gives a different answer afterwards (a reboot, or /proc remounted with hidden
// processes meanwhile), every target is probed again one by one, so no answer
// rests on a fact that did not hold throughout. The answers equal Probe's.
func (p *ProcProber) ProbeAll(ctx context.Context, targets []Target) []Result {
	return p.probeAll(ctx, targets, nil)
}

// probeAll is ProbeAll; meanwhile, when set, runs between the batch and the checks after
// it (a test seam for facts that change while a batch runs).
func (p *ProcProber) probeAll(ctx context.Context, targets []Target, meanwhile func()) []Result {
	bootID, bootNote := p.verifiedBoot()
	var visible *string // computed at the first free pid, as Probe does
	visibility := func() string {
		if visible == nil {
			v := procVisibility(p.Root)
			visible = &v
		}
		return *visible
	}
	var pods podIndex // read at the first pod target, once for the batch
	var podsErr error
	podIndexOnce := func() (podIndex, error) {
		if pods == nil && podsErr == nil {
			pods, podsErr = indexPods(p.Root)
		}
		return pods, podsErr
	}
	out := make([]Result, len(targets))
	for i, t := range targets {
		out[i] = p.probe(ctx, t, func() (string, string) { return bootID, bootNote }, visibility, podIndexOnce)
	}
	if meanwhile != nil {
		meanwhile()
	}
	afterID, afterNote := p.verifiedBoot()
	if afterID == bootID && afterNote == bootNote && (visible == nil || procVisibility(p.Root) == *visible) {
		return out
	}
	for i, t := range targets {
		out[i] = p.Probe(ctx, t)
	}
	return out
}

// verifiedBoot returns the prober's boot id when it is known and matches the
// live boot id under Root, or "" plus the reason it is not usable.
func (p *ProcProber) verifiedBoot() (bootID, note string) {
	if p.Facts.BootID == "" {
		return "", "prober boot id is unknown"
	}
	live, err := readBootID(p.Root)
	if err != nil {
		return "", fmt.Sprintf("live boot id unreadable: %v", err)
	}
	if live != p.Facts.BootID {
		return "", fmt.Sprintf("live boot id %s differs from prober boot id %s", live, p.Facts.BootID)
	}
	return live, ""
}

// free decides for a pid number that no process appears to hold. It is
// Gone only when the boot is verified and <Root>/proc is proven to show
// every process (see procVisibility).
func (p *ProcProber) free(t Target, hostBoot, bootNote string, visibility func() string) Result {
	switch {
	case hostBoot == "":
		return unknown(nil, "pid %d not found, but %s", t.PID, bootNote)
	case t.BootID == "":
		return unknown(nil, "pid %d not found, but target boot id is not recorded", t.PID)
	}
	// A pid missing from a tree that may hide processes proves nothing.
	if why := visibility(); why != "" {
		return unknown(nil, "pid %d not found, but process visibility is not proven: %s", t.PID, why)
	}
	switch {
	case t.BootID != hostBoot:
		return Result{State: Gone, Detail: fmt.Sprintf(
			"pid %d not found; target boot %s ended (current boot %s)", t.PID, t.BootID, hostBoot)}
	default:
		return Result{State: Gone, Detail: fmt.Sprintf("pid %d not found on boot %s", t.PID, hostBoot)}
	}
}

// occupied decides for a pid number held by a process with the observed
// start time and state.
func occupied(t Target, hostBoot, bootNote string, observed int64, state byte) Result {
	obs := &observed
	holder := fmt.Sprintf("pid %d held by a process started at %d (state %c%s)",
		t.PID, observed, state, zombieNote(state))

	if hostBoot != "" && t.BootID != "" && t.BootID != hostBoot {
		return Result{State: Reused, ObservedStartTime: obs, Detail: fmt.Sprintf(
			"%s, but target boot %s is not the current boot %s", holder, t.BootID, hostBoot)}
	}
	if t.StartTime == nil {
		return unknown(obs, "%s; expected start time not recorded", holder)
	}
	if *t.StartTime != observed {
		return Result{State: Reused, ObservedStartTime: obs, Detail: fmt.Sprintf(
			"%s, expected start time %d", holder, *t.StartTime)}
	}
	switch {
	case hostBoot == "":
		return unknown(obs, "%s matching the expected start time, but %s", holder, bootNote)
	case t.BootID == "":
		return unknown(obs, "%s matching the expected start time, but target boot id is not recorded", holder)
	}
	return Result{State: Alive, ObservedStartTime: obs, Detail: fmt.Sprintf(
		"%s matching the expected start time on boot %s", holder, hostBoot)}
}

func zombieNote(state byte) string {
	if state == 'Z' {
		return ", zombie"
	}
	return ""
}

func unknown(observed *int64, format string, args ...any) Result {
	return Result{State: Unknown, ObservedStartTime: observed, Detail: fmt.Sprintf(format, args...)}
}
