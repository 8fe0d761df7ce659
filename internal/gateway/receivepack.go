package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// maxCommands bounds the ref-update commands of one push.
const maxCommands = 256

var errMalformedPush = errors.New("malformed receive-pack request")

// readRefUpdates reads the ref-update commands at the start of a git-receive-pack request
// (pkt-lines up to the first flush-pkt; "shallow" lines are skipped) and returns them, the
// capabilities the client asked for on its first command, and every byte it consumed, so
// the request can be forwarded unchanged: the consumed bytes followed by the rest of r
// (the pack).
func readRefUpdates(r *bufio.Reader) ([]claim.RefUpdate, []string, []byte, error) {
	var consumed bytes.Buffer
	var updates []claim.RefUpdate
	var caps []string
	for {
		var lenHex [4]byte
		if _, err := io.ReadFull(r, lenHex[:]); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: %w", errMalformedPush, err)
		}
		consumed.Write(lenHex[:])
		n, err := strconv.ParseUint(string(lenHex[:]), 16, 16)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: bad pkt-line length %q", errMalformedPush, lenHex)
		}
		if n == 0 { // flush-pkt: the commands end
			return updates, caps, consumed.Bytes(), nil
		}
		if n < 4 {
			return nil, nil, nil, fmt.Errorf("%w: pkt-line length %d", errMalformedPush, n)
		}
		line := make([]byte, n-4)
		if _, err := io.ReadFull(r, line); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: %w", errMalformedPush, err)
		}
		consumed.Write(line)
		text := string(line)
		if i := strings.IndexByte(text, 0); i >= 0 {
			if len(updates) == 0 {
				caps = strings.Fields(strings.TrimSuffix(text[i+1:], "\n"))
			}
			text = text[:i] // capabilities follow the first command
		}
		text = strings.TrimSuffix(text, "\n")
		if strings.HasPrefix(text, "shallow ") {
			continue
		}
		// "<old> SP <new> SP <ref>", split on the two ASCII spaces git writes and nothing
		// else: a ref may contain any other byte git allows (U+00A0 among them), and the
		// ref is compared as those exact bytes.
		oldID, rest, ok1 := strings.Cut(text, " ")
		newID, ref, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || !claim.IsObjectID(oldID) || !claim.IsObjectID(newID) || !strings.HasPrefix(ref, "refs/") {
			return nil, nil, nil, fmt.Errorf("%w: bad command %q", errMalformedPush, text)
		}
		updates = append(updates, claim.RefUpdate{Old: oldID, New: newID, Ref: ref})
		if len(updates) > maxCommands {
			return nil, nil, nil, fmt.Errorf("%w: more than %d commands", errMalformedPush, maxCommands)
		}
	}
}

// pushReport answers a refused push the way git reports a rejected ref, so the worker's git
// prints the gateway's reason ("! [remote rejected] ... (wrong_branch: ...)") instead of
// "the remote end hung up". It needs report-status (or report-status-v2) among the
// client's capabilities; reportable says whether it can be used. With side-band the
// report travels on band 1 and the reason is also printed as a "remote:" line (band 2).
type pushReport struct {
	refs []claim.RefUpdate
	caps []string
	// pack is the spooled pack (nil for REST writes).
	pack *spool
}

func (p pushReport) reportable() bool {
	return len(p.refs) > 0 && (slices.Contains(p.caps, "report-status") || slices.Contains(p.caps, "report-status-v2"))
}

// body renders the receive-pack result that rejects every ref with reason and message.
func (p pushReport) body(reason, message string) []byte {
	msg := strings.NewReplacer("\n", " ", "\x00", " ").Replace("fleet gateway: " + reason + ": " + message)
	var report bytes.Buffer
	report.WriteString(pkt("unpack ok\n"))
	for _, u := range p.refs {
		report.WriteString(pkt("ng " + u.Ref + " " + msg + "\n"))
	}
	report.WriteString("0000")
	if !slices.Contains(p.caps, "side-band-64k") && !slices.Contains(p.caps, "side-band") {
		return report.Bytes()
	}
	max := 65515 // side-band-64k: 65520 bytes a packet, less the length and band bytes
	if !slices.Contains(p.caps, "side-band-64k") {
		max = 995
	}
	var out bytes.Buffer
	out.WriteString(pkt("\x02" + msg + "\n"))
	data := report.Bytes()
	for len(data) > 0 {
		n := min(len(data), max)
		out.WriteString(pkt("\x01" + string(data[:n])))
		data = data[n:]
	}
	out.WriteString("0000")
	return out.Bytes()
}

// pkt frames s as one pkt-line.
func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }
