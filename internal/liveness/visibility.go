package liveness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Paths read to prove that <Root>/proc shows every process, relative to a
// prober root.
const (
	mountInfoPath = "proc/self/mountinfo"
	// sentinelPID is a pid that exists in every pid namespace and that an
	// unprivileged reader normally does not own: if its stat cannot be read,
	// foreign processes are hidden (hidepid) or unreadable.
	sentinelPID = 1
)

// procVisibility reports whether <root>/proc is proven to show every
// process of its pid namespace, so that a pid missing from it is really
// free. It returns "" when visibility is proven, otherwise why it is not.
//
// Two independent proofs are required:
//
//  1. Mount options. <root>/proc/self/mountinfo must list a procfs mounted
//     exactly at <root>/proc (the topmost mount there counts), and neither
//     its per-mount nor its superblock options may restrict what is shown:
//     any hidepid other than 0/off (1/noaccess, 2/invisible,
//     4/ptraceable, or a value this code does not know) and any subset=
//     (subset=pid hides everything but the pid directories) fail. A gid=
//     exemption is not honoured: hidepid fails closed even for members of
//     that group.
//  2. A sentinel. <root>/proc/1/stat must be readable and parse. Under
//     hidepid=2 pid 1 is simply absent (ENOENT), under hidepid=1 or without
//     permission it is EACCES; both mean a foreign pid that looks free may
//     only be hidden.
//
// Every failure to read either source (a missing mountinfo, an unreadable
// one, a mount point that cannot be resolved) is a failure to prove.
func procVisibility(root string) string {
	if why := mountVisibility(root); why != "" {
		return why
	}
	if _, _, err := readStat(root, sentinelPID); err != nil {
		switch {
		case errors.Is(err, syscall.ENOENT):
			return fmt.Sprintf("pid %d is not visible under %s (hidden processes, e.g. hidepid=2)",
				sentinelPID, procDir(root))
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			return fmt.Sprintf("pid %d is not readable under %s (permission denied, e.g. hidepid=1)",
				sentinelPID, procDir(root))
		default:
			return fmt.Sprintf("pid %d cannot be examined: %v", sentinelPID, err)
		}
	}
	return ""
}

// mountVisibility checks the mount options of the procfs at <root>/proc.
func mountVisibility(root string) string {
	path := filepath.Join(rootOrSlash(root), mountInfoPath)
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Sprintf("proc mount options unknown: %s does not exist", path)
		}
		return fmt.Sprintf("proc mount options unknown: %v", err)
	}
	dir, err := resolvedProcDir(root)
	if err != nil {
		return fmt.Sprintf("proc mount options unknown: %v", err)
	}
	m, found, err := findMount(string(data), dir)
	switch {
	case err != nil:
		return fmt.Sprintf("proc mount options unknown: %s: %v", path, err)
	case !found:
		return fmt.Sprintf("proc mount options unknown: no mount at %s in %s", dir, path)
	case m.fsType != "proc":
		return fmt.Sprintf("%s is not a procfs mount (filesystem type %q)", dir, m.fsType)
	}
	return restrictedProcOptions(dir, m.mountOptions, m.superOptions)
}

// restrictedProcOptions returns why a procfs with these options may hide
// processes, or "" when it shows all of them.
func restrictedProcOptions(dir string, optionLists ...string) string {
	for _, list := range optionLists {
		for opt := range strings.SplitSeq(list, ",") {
			key, value, _ := strings.Cut(opt, "=")
			switch key {
			case "hidepid":
				if value != "0" && value != "off" {
					return fmt.Sprintf("%s is mounted with hidepid=%s: processes of other users may be hidden", dir, value)
				}
			case "subset":
				return fmt.Sprintf("%s is mounted with subset=%s: part of procfs is hidden", dir, value)
			}
		}
	}
	return ""
}

// mountEntry is the part of one mountinfo line the visibility check needs.
type mountEntry struct {
	mountPoint   string
	mountOptions string
	fsType       string
	superOptions string
}

// findMount returns the topmost (last listed) mount whose mount point is dir.
func findMount(mountinfo, dir string) (mountEntry, bool, error) {
	var (
		last  mountEntry
		found bool
	)
	for line := range strings.SplitSeq(mountinfo, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseMountInfoLine(line)
		if err != nil {
			return mountEntry{}, false, err
		}
		if m.mountPoint == dir {
			last, found = m, true
		}
	}
	return last, found, nil
}

// parseMountInfoLine parses one line of /proc/<pid>/mountinfo (see
// proc_pid_mountinfo(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// Fields: mount id, parent id, major:minor, root, mount point, mount
// options, zero or more optional fields, the separator "-", filesystem
// type, source, superblock options. Paths escape space, tab, newline and
// backslash as \ooo octal.
func parseMountInfoLine(line string) (mountEntry, error) {
	fields := strings.Fields(line)
	sep := -1
	for i := 6; i < len(fields); i++ {
		if fields[i] == "-" {
			sep = i
			break
		}
	}
	if len(fields) < 6 || sep < 0 || len(fields) < sep+3 {
		return mountEntry{}, fmt.Errorf("malformed mountinfo line %q", line)
	}
	m := mountEntry{
		mountPoint:   unescapeMountPath(fields[4]),
		mountOptions: fields[5],
		fsType:       fields[sep+1],
	}
	if len(fields) > sep+3 {
		m.superOptions = fields[sep+3]
	}
	return m, nil
}

// unescapeMountPath decodes the \ooo escapes the kernel writes in mountinfo
// paths.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// procDir is <root>/proc as written in details.
func procDir(root string) string {
	return filepath.Join(rootOrSlash(root), "proc")
}

// resolvedProcDir is the absolute, symlink-free path of <root>/proc, the
// form in which mountinfo lists mount points.
func resolvedProcDir(root string) (string, error) {
	dir, err := filepath.Abs(procDir(root))
	if err != nil {
		return "", err
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	return resolved, nil
}
