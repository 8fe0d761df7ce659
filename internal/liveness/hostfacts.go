package liveness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Paths of the host identity files, relative to a prober root.
const (
	machineIDPath = "etc/machine-id"
	bootIDPath    = "proc/sys/kernel/random/boot_id"
	procStatPath  = "proc/stat"
)

// uninitializedMachineID is what systemd leaves in /etc/machine-id before the
// first boot has committed a real id; it names no machine.
const uninitializedMachineID = "uninitialized"

// ErrNoHostFacts is returned by ReadHostFacts when neither the machine id nor
// the boot id exists under the given root, which almost always means the root
// is wrong.
var ErrNoHostFacts = errors.New("liveness: neither machine-id nor boot_id found")

// HostFacts identifies the host and the current boot of the host a prober
// runs on. An empty field means the fact is not known; it is never guessed.
type HostFacts struct {
	// HostID is the content of /etc/machine-id, trimmed.
	HostID string
	// BootID is the content of /proc/sys/kernel/random/boot_id, trimmed.
	BootID string
	// BootTime is when the current boot began: the btime line of
	// /proc/stat (whole seconds since the epoch, UTC). Zero when unknown.
	BootTime time.Time
}

// ReadHostFacts reads <root>/etc/machine-id and
// <root>/proc/sys/kernel/random/boot_id, trimming surrounding whitespace.
// An empty root means "/".
//
// The boot time comes from the btime line of <root>/proc/stat.
//
// Each field is read independently and the returned HostFacts always holds
// exactly what could be read:
//   - a file that does not exist leaves its field empty and is not an error
//     (containers often have no machine-id);
//   - a file that is empty, or a machine-id reading "uninitialized", leaves
//     its field empty and is not an error;
//   - any other failure (permission denied, a directory in place of the file,
//     I/O errors) leaves the field empty and is reported in the error;
//   - when both files are missing the error wraps ErrNoHostFacts.
//
// Callers that get an error may still use the partial facts: a prober with
// an empty field answers Unknown wherever that fact is needed.
func ReadHostFacts(root string) (HostFacts, error) {
	var facts HostFacts
	hostID, hostMissing, hostErr := readIDFile(root, machineIDPath)
	if hostID != uninitializedMachineID {
		facts.HostID = hostID
	}
	bootID, bootMissing, bootErr := readIDFile(root, bootIDPath)
	facts.BootID = bootID
	bootTime, bootTimeErr := readBootTime(root)
	facts.BootTime = bootTime

	errs := []error{hostErr, bootErr, bootTimeErr}
	if hostMissing && bootMissing {
		errs = append(errs, fmt.Errorf("under root %q: %w", rootOrSlash(root), ErrNoHostFacts))
	}
	return facts, errors.Join(errs...)
}

// readIDFile returns the trimmed content of <root>/<rel>. missing reports a
// file that does not exist, which is not an error.
func readIDFile(root, rel string) (value string, missing bool, err error) {
	path := filepath.Join(rootOrSlash(root), rel)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", true, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("liveness: read %s: %w", path, err)
	}
	return strings.TrimSpace(string(data)), false, nil
}

// readBootID reads the live boot id under root, failing on anything that is
// not a non-empty value.
func readBootID(root string) (string, error) {
	id, missing, err := readIDFile(root, bootIDPath)
	switch {
	case err != nil:
		return "", err
	case missing:
		return "", fmt.Errorf("liveness: %s does not exist", filepath.Join(rootOrSlash(root), bootIDPath))
	case id == "":
		return "", fmt.Errorf("liveness: %s is empty", filepath.Join(rootOrSlash(root), bootIDPath))
	}
	return id, nil
}

// readBootTime returns the btime of <root>/proc/stat. A missing file, or one
// without a btime line, yields the zero time and no error; a btime that is
// not a positive decimal number of seconds is an error.
func readBootTime(root string) (time.Time, error) {
	path := filepath.Join(rootOrSlash(root), procStatPath)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("liveness: read %s: %w", path, err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "btime ")
		if !ok {
			continue
		}
		raw := strings.TrimSpace(rest)
		secs, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || secs <= 0 || !allDigits(raw) {
			return time.Time{}, fmt.Errorf("liveness: %s: btime %q is not a positive number of seconds", path, raw)
		}
		return time.Unix(secs, 0).UTC(), nil
	}
	return time.Time{}, nil
}

func rootOrSlash(root string) string {
	if root == "" {
		return "/"
	}
	return root
}
