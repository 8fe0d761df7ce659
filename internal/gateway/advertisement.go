package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// maxAdvertisement bounds the receive-pack advertisement the gateway reads to amend.
const maxAdvertisement = 32 << 20

// amendAdvertisement adds the no-thin capability to Gitea's receive-pack advertisement
// (GET info/refs?service=git-receive-pack): git then sends a pack that carries every
// object its deltas are built on, which the gateway can read on its own (push.go). Other
// responses pass unchanged.
func amendAdvertisement(resp *http.Response) error {
	a, _ := resp.Request.Context().Value(actingKey{}).(acting)
	if !a.pushAdvert || resp.StatusCode != http.StatusOK {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAdvertisement+1))
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	if len(body) > maxAdvertisement {
		return errors.New("the receive-pack advertisement is too large to amend")
	}
	out, err := addCapability(body, "no-thin")
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	resp.Header.Del("Content-Encoding")
	return nil
}

// addCapability adds capability to the capability list of a smart-HTTP advertisement: the
// "# service=..." pkt-line and its flush, then the first ref line, which carries the
// capabilities after a NUL byte.
func addCapability(adv []byte, capability string) ([]byte, error) {
	pos := 0
	next := func() ([]byte, int, error) { // one pkt-line: its payload and where the next starts
		if pos+4 > len(adv) {
			return nil, 0, errors.New("advertisement: truncated pkt-line")
		}
		n, err := strconv.ParseUint(string(adv[pos:pos+4]), 16, 16)
		if err != nil {
			return nil, 0, fmt.Errorf("advertisement: bad pkt-line length %q", adv[pos:pos+4])
		}
		if n == 0 {
			return nil, pos + 4, nil
		}
		if n < 4 || pos+int(n) > len(adv) {
			return nil, 0, errors.New("advertisement: bad pkt-line")
		}
		return adv[pos+4 : pos+int(n)], pos + int(n), nil
	}
	payload, end, err := next()
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(payload, []byte("# service=")) {
		pos = end
		if _, end, err = next(); err != nil { // the flush after the service line
			return nil, err
		}
		pos = end
		if payload, end, err = next(); err != nil {
			return nil, err
		}
	}
	nul := bytes.IndexByte(payload, 0)
	if payload == nil || nul < 0 {
		return nil, errors.New("advertisement: no capabilities on the first ref line")
	}
	line := bytes.TrimSuffix(payload, []byte("\n"))
	amended := append(append(append([]byte{}, line...), ' '), capability...)
	amended = append(amended, '\n')
	var out bytes.Buffer
	out.Write(adv[:pos])
	fmt.Fprintf(&out, "%04x", len(amended)+4)
	out.Write(amended)
	out.Write(adv[end:])
	return out.Bytes(), nil
}
