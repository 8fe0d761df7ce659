package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/gitpack"
)

// A push is decided on all of it. The gateway reads the ref updates, then the whole pack
// (spooled in memory up to spoolInMemory bytes, then to a temporary file, within
// MaxPush), reads every commit and tree in it, and only then decides and forwards. So a
// pack held back until its capability has ended is decided when it arrives, on the state
// of that moment, and Gitea never sees a pack the decision did not cover. Reading the
// pack has a deadline: the earlier of PushReadTimeout and the end of the caller's latest
// capability.
//
// What the pack shows:
//   - every commit message, which Gitea scans for references on its own (timeline
//     entries, closing keywords, time tracking): each must name only covered items;
//   - every commit's root tree when it is in the pack: its .fleet entry must be the
//     default branch's, so the fleet's own files are not changed (a root tree that is
//     not in the pack is one Gitea already holds, and a merge is checked on the pull
//     request's files).
//
// A thin pack (deltas against objects the pack does not carry) cannot be read alone. The
// gateway advertises no-thin on the receive-pack advertisement, which git honours; a thin
// pack that arrives anyway is refused.

const (
	// PushReadTimeout bounds reading one push.
	PushReadTimeout = 5 * time.Minute
	// spoolInMemory is how much of a pack is kept in memory before it goes to a file.
	spoolInMemory = 8 << 20
)

// errUnreadablePack is a pack the gateway cannot read on its own: refused.
var errUnreadablePack = errors.New("unreadable pack")

// spool holds a pack: in memory, or in a temporary file once it grew.
type spool struct {
	mem  bytes.Buffer
	file *os.File
	size int64
}

// spoolPack reads r to its end into a spool.
func spoolPack(r io.Reader) (*spool, error) {
	s := &spool{}
	if _, err := io.CopyN(&s.mem, r, spoolInMemory); errors.Is(err, io.EOF) {
		s.size = int64(s.mem.Len())
		return s, nil
	} else if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "fleet-gateway-pack-*")
	if err != nil {
		return nil, fmt.Errorf("spooling a push: %w", err)
	}
	_ = os.Remove(f.Name()) // unlinked: it goes when closed
	s.file = f
	if _, err := f.Write(s.mem.Bytes()); err != nil {
		s.close()
		return nil, fmt.Errorf("spooling a push: %w", err)
	}
	n, err := io.Copy(f, r)
	if err != nil {
		s.close()
		return nil, err
	}
	s.size = int64(s.mem.Len()) + n
	s.mem = bytes.Buffer{}
	return s, nil
}

// reader returns a reader of the whole pack from its start.
func (s *spool) reader() (io.Reader, error) {
	if s.file == nil {
		return bytes.NewReader(s.mem.Bytes()), nil
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return s.file, nil
}

func (s *spool) close() {
	if s != nil && s.file != nil {
		_ = s.file.Close()
	}
}

// pushDeadline sets the read deadline of a push: PushReadTimeout from now, or earlier
// when every capability the caller holds ends sooner. Capabilities are read from the
// cache: the decision itself reads them again, from the API server, once the pack is in.
func (g *Gateway) pushDeadline(ctx context.Context, w http.ResponseWriter, wr *fleetv1alpha1.WorkerRegistration) {
	deadline := g.Clock.Now().Add(PushReadTimeout)
	list := &fleetv1alpha1.TaskClaimList{}
	if err := g.Cache.List(ctx, list, client.InNamespace(wr.Namespace), client.UnsafeDisableDeepCopy); err == nil {
		var latest time.Time
		for _, tc := range list.Items {
			if tc.Spec.Worker == wr.Name && tc.Status.Phase == fleetv1alpha1.ClaimPhaseActive && tc.Status.Capability != nil &&
				tc.Status.Capability.ExpiresAt.After(latest) {
				latest = tc.Status.Capability.ExpiresAt.Time
			}
		}
		if !latest.IsZero() && latest.Before(deadline) {
			deadline = latest
		}
	}
	_ = http.NewResponseController(w).SetReadDeadline(deadline)
}

// inspectPack reads the pack and fills write.Commits and write.ChangedPaths. defaultEntry
// reads the default branch's .fleet entry (mode and id), only when a root tree needs it.
func inspectPack(s *spool, caps []string, maxPush int64, write *claim.Write, defaultEntry func() (string, string, error)) error {
	if s.size == 0 {
		return nil // only deletions: git sends no pack
	}
	r, err := s.reader()
	if err != nil {
		return err
	}
	format := gitpack.SHA1
	if slices.Contains(caps, "object-format=sha256") {
		format = gitpack.SHA256
	}
	contents, err := gitpack.Read(r, format, gitpack.Limits{MaxObjects: 1 << 20, MaxInflated: maxPush, MaxObjectSize: maxPush})
	if err != nil {
		return fmt.Errorf("%w: %w", errUnreadablePack, err)
	}
	trees := make(map[string]gitpack.Tree, len(contents.Trees))
	for _, t := range contents.Trees {
		trees[t.ID] = t
	}
	var want struct {
		read     bool
		mode, id string
	}
	for _, c := range contents.Commits {
		write.Commits = append(write.Commits, c.Message)
		root, ok := trees[c.Tree]
		if !ok {
			continue
		}
		if !want.read {
			m, i, err := defaultEntry()
			if err != nil {
				return err
			}
			want.read, want.mode, want.id = true, m, i
		}
		entries := make([]claim.TreeEntry, 0, len(root.Entries))
		for _, e := range root.Entries {
			entries = append(entries, claim.TreeEntry{Name: e.Name, Mode: e.Mode, ID: e.ID})
		}
		if claim.ProtectedDirChanged(entries, want.mode, want.id) {
			write.ChangedPaths = append(write.ChangedPaths, claim.ProtectedDir)
		}
	}
	return nil
}
