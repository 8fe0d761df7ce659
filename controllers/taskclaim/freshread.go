package taskclaim

import (
	"context"
	"sync"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// freshReads shares Gitea reads of one target among the claims that ask for it at the
// same time, without ever handing a claim a read older than its own request: a read
// is shared only by callers that all asked before it started. A caller that finds a
// read of its target already under way does not join it (that read may predate the
// caller's decision); it waits for the next read of that target, which starts as soon
// as the one under way ends and serves every caller that queued meanwhile. So every
// caller gets state read entirely after it asked, as the claim protocol requires of a
// re-read, and N claims deciding on one target at once cost about two reads instead of
// N. Claims on different targets never wait for each other.
//
// The state handed out is shared by the callers of one read: it must be treated as
// read-only (the decisions in internal/claim copy what they sort).
type freshReads struct {
	read targetReader

	mu      sync.Mutex
	targets map[readKey]*targetReads
}

// targetReader reads one target from the Gitea server of its repository.
type targetReader func(ctx context.Context, t claim.Target) (claim.TargetState, error)

// readKey names one item in Gitea: the repository's key (claim.RepositoryKey; two
// servers may have repositories of the same name) and the item as the caller spelled it
// (the head does not matter to the read; the answer names the item as asked, so
// spellings are not mixed).
type readKey struct {
	server     claim.RepositoryKey
	repository string
	kind       claim.Kind
	number     int64
}

// targetReads is the read of one target under way, and the next one callers queue for.
type targetReads struct {
	running, next *readCall
}

// readCall is one read and its answer, shared by the callers that asked before it began.
type readCall struct {
	ctx  context.Context // the first caller's, without its cancellation
	read targetReader    // the first caller's reader
	done chan struct{}
	st   claim.TargetState
	err  error
}

func newFreshReads(read targetReader) *freshReads {
	return &freshReads{read: read, targets: map[readKey]*targetReads{}}
}

// ReadTarget reads t as ReadTarget of the Gitea client does, sharing the read as the
// type's comment says. A caller whose ctx ends stops waiting; the read it queued for
// still serves the others.
func (f *freshReads) ReadTarget(ctx context.Context, t claim.Target) (claim.TargetState, error) {
	return f.ReadTargetIn(ctx, claim.RepositoryKey{}, f.read, t)
}

// ReadTargetIn is ReadTarget for a target of the repository key, read with read (the
// client of the repository's server).
func (f *freshReads) ReadTargetIn(ctx context.Context, repo claim.RepositoryKey, read targetReader, t claim.Target) (claim.TargetState, error) {
	key := readKey{server: repo, repository: t.Repository, kind: t.Kind, number: t.Number}
	f.mu.Lock()
	tr := f.targets[key]
	var call *readCall
	if tr == nil {
		// Nothing under way: this caller's read starts now.
		call = &readCall{ctx: context.WithoutCancel(ctx), read: read, done: make(chan struct{})}
		f.targets[key] = &targetReads{running: call}
		f.mu.Unlock()
		go f.run(key, t, call)
	} else {
		// A read is under way and may be older than this request: queue for the next.
		if tr.next == nil {
			tr.next = &readCall{ctx: context.WithoutCancel(ctx), read: read, done: make(chan struct{})}
		}
		call = tr.next
		f.mu.Unlock()
	}
	select {
	case <-call.done:
		return call.st, call.err
	case <-ctx.Done():
		return claim.TargetState{}, ctx.Err()
	}
}

// run performs call, then starts the read queued meanwhile, if any.
func (f *freshReads) run(key readKey, t claim.Target, call *readCall) {
	call.st, call.err = call.read(call.ctx, t)
	close(call.done)
	f.mu.Lock()
	tr := f.targets[key]
	next := tr.next
	if next == nil {
		delete(f.targets, key)
		f.mu.Unlock()
		return
	}
	tr.running, tr.next = next, nil
	f.mu.Unlock()
	f.run(key, t, next)
}
