package liveness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// A worker in a pod has a pid namespace of its own: the pid it registers is its pid in
// that namespace, a number that means nothing in the host's pid space (the host's pid of
// that number is some unrelated process, or none). Such a target names its pod
// (Target.Pod), and the prober never reads <root>/proc/<pid> for it. It resolves the
// target instead: among the host's processes it finds those whose cgroup is the pod's
// (the pod UID appears in every kubelet cgroup path, "pod<uid>" with the cgroupfs driver,
// "pod<uid with underscores>.slice" with systemd) and whose innermost namespace pid (the
// last NSpid of /proc/<pid>/status) is the target's pid. Decision table, after the host
// and boot checks of Probe:
//
//	target boot earlier than the verified host boot:
//	    process visibility proven                   -> Gone (nothing survives a reboot)
//	    otherwise                                   -> Unknown
//	the host's processes cannot all be read         -> Unknown
//	expected start time nil                         -> Unknown
//	one process of the pod matches pid and start    -> Alive
//	several match                                   -> Unknown (ambiguous)
//	none matches:
//	    process visibility not proven               -> Unknown
//	    the pod has processes with that pid         -> Reused (other incarnations)
//	    otherwise                                   -> Gone

// PodTarget names the pod a target's pid belongs to.
type PodTarget struct {
	// UID is the pod's UID.
	UID string
}

// podKey is one namespace pid of one pod.
type podKey struct {
	uid string
	pid int64
}

// podIndex maps a pod's namespace pid to the start times of the host processes that
// hold it (normally one; a pod's containers each have their own pid namespace).
type podIndex map[podKey][]int64

// podUID finds a kubelet pod cgroup in a /proc/<pid>/cgroup line.
var podUID = regexp.MustCompile(`pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12})`)

// normalUID is a pod UID as the API server writes it.
func normalUID(uid string) string {
	return strings.ToLower(strings.ReplaceAll(uid, "_", "-"))
}

// indexPods reads every process of <root>/proc that runs in a pod, in a pid namespace
// below the host's. A process that ends while it is read is left out (it holds nothing
// any more); any other read error fails the whole index, since a target resolved
// against an incomplete index could look gone.
func indexPods(root string) (podIndex, error) {
	dir := procDir(root)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	idx := podIndex{}
	for _, e := range entries {
		if !allDigits(e.Name()) {
			continue
		}
		hostPID, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil {
			continue
		}
		uid, nsPID, start, err := podProcess(root, hostPID)
		switch {
		case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH):
			continue
		case err != nil:
			return nil, err
		case uid == "" || nsPID == 0:
			continue // a host process, or in no pod
		}
		k := podKey{uid: uid, pid: nsPID}
		idx[k] = append(idx[k], start)
	}
	return idx, nil
}

// podProcess reads one host process: its pod's UID (empty when it is in no pod), its
// innermost namespace pid (0 when it runs in the host's pid namespace) and its start
// time.
func podProcess(root string, hostPID int64) (uid string, nsPID, start int64, err error) {
	base := filepath.Join(procDir(root), strconv.FormatInt(hostPID, 10))
	nsPID, err = innermostPID(filepath.Join(base, "status"))
	if err != nil || nsPID == 0 {
		return "", 0, 0, err
	}
	cg, err := os.ReadFile(filepath.Join(base, "cgroup"))
	if err != nil {
		return "", 0, 0, err
	}
	m := podUID.FindSubmatch(cg)
	if m == nil {
		return "", 0, 0, nil
	}
	start, _, err = readStat(root, hostPID)
	if err != nil {
		return "", 0, 0, err
	}
	return normalUID(string(m[1])), nsPID, start, nil
}

// innermostPID is the last pid of the NSpid line of a /proc/<pid>/status file, or 0
// when the line names one pid only (the process runs in the reader's pid namespace).
func innermostPID(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "NSpid:")
		if !ok {
			continue
		}
		pids := strings.Fields(rest)
		if len(pids) < 2 {
			return 0, nil
		}
		return strconv.ParseInt(pids[len(pids)-1], 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no NSpid line: cannot tell pid namespaces apart", path)
}

// probePod decides for a pod target, once the host matched (see the table above).
func probePod(t Target, hostBoot, bootNote string, index func() (podIndex, error), visibility func() string) Result {
	uid := normalUID(t.Pod.UID)
	what := fmt.Sprintf("namespace pid %d of pod %s", t.PID, uid)
	switch {
	case hostBoot == "":
		return unknown(nil, "%s: %s", what, bootNote)
	case t.BootID == "":
		return unknown(nil, "%s: target boot id is not recorded", what)
	case t.BootID != hostBoot:
		if why := visibility(); why != "" {
			return unknown(nil, "%s: target boot %s ended, but process visibility is not proven: %s", what, t.BootID, why)
		}
		return Result{State: Gone, Detail: fmt.Sprintf("%s: target boot %s ended (current boot %s)", what, t.BootID, hostBoot)}
	}
	idx, err := index()
	if err != nil {
		return unknown(nil, "%s: the host's processes cannot all be read: %v", what, err)
	}
	if t.StartTime == nil {
		return unknown(nil, "%s: expected start time not recorded", what)
	}
	starts := idx[podKey{uid: uid, pid: t.PID}]
	matches := 0
	for _, s := range starts {
		if s == *t.StartTime {
			matches++
		}
	}
	switch {
	case matches == 1:
		obs := *t.StartTime
		return Result{State: Alive, ObservedStartTime: &obs, Detail: fmt.Sprintf("%s held by its process started at %d on boot %s", what, obs, hostBoot)}
	case matches > 1:
		return unknown(nil, "%s: %d processes of the pod match it", what, matches)
	}
	if why := visibility(); why != "" {
		return unknown(nil, "%s not found, but process visibility is not proven: %s", what, why)
	}
	if len(starts) > 0 {
		obs := starts[0]
		return Result{State: Reused, ObservedStartTime: &obs, Detail: fmt.Sprintf("%s held by a process started at %d, expected start time %d", what, obs, *t.StartTime)}
	}
	return Result{State: Gone, Detail: fmt.Sprintf("no process of pod %s has namespace pid %d on boot %s", uid, t.PID, hostBoot)}
}
