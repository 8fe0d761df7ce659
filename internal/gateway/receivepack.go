package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// maxCommands bounds the ref-update commands of one push.
const maxCommands = 256

var errMalformedPush = errors.New("malformed receive-pack request")

// readRefUpdates reads the ref-update commands at the start of a git-receive-pack request
// (pkt-lines up to the first flush-pkt; "shallow" lines are skipped) and returns them
// with every byte it consumed, so the request can be forwarded unchanged: the consumed
// bytes followed by the rest of r (the pack).
func readRefUpdates(r *bufio.Reader) ([]claim.RefUpdate, []byte, error) {
	var consumed bytes.Buffer
	var updates []claim.RefUpdate
	for {
		var lenHex [4]byte
		if _, err := io.ReadFull(r, lenHex[:]); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", errMalformedPush, err)
		}
		consumed.Write(lenHex[:])
		n, err := strconv.ParseUint(string(lenHex[:]), 16, 16)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: bad pkt-line length %q", errMalformedPush, lenHex)
		}
		if n == 0 { // flush-pkt: the commands end
			return updates, consumed.Bytes(), nil
		}
		if n < 4 {
			return nil, nil, fmt.Errorf("%w: pkt-line length %d", errMalformedPush, n)
		}
		line := make([]byte, n-4)
		if _, err := io.ReadFull(r, line); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", errMalformedPush, err)
		}
		consumed.Write(line)
		text := string(line)
		if i := strings.IndexByte(text, 0); i >= 0 {
			text = text[:i] // capabilities follow the first command
		}
		text = strings.TrimSuffix(text, "\n")
		if strings.HasPrefix(text, "shallow ") {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 3 || !isObjectID(f[0]) || !isObjectID(f[1]) || !strings.HasPrefix(f[2], "refs/") {
			return nil, nil, fmt.Errorf("%w: bad command %q", errMalformedPush, text)
		}
		updates = append(updates, claim.RefUpdate{Old: f[0], New: f[1], Ref: f[2]})
		if len(updates) > maxCommands {
			return nil, nil, fmt.Errorf("%w: more than %d commands", errMalformedPush, maxCommands)
		}
	}
}

func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
