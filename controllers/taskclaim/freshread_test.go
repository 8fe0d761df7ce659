package taskclaim

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// A caller that asks while a read of its target is under way never gets that read: it
// gets the next one, which it shares with every caller that queued meanwhile. Callers
// on other targets never wait.
func TestFreshReadsNeverHandOutAnOlderRead(t *testing.T) {
	target := claim.Target{Repository: "o/r", Kind: claim.KindIssue, Number: 1}
	other := claim.Target{Repository: "o/r", Kind: claim.KindIssue, Number: 2}
	var (
		started atomic.Int64 // reads started so far, per target 1
		release = make(chan struct{})
		first   = make(chan struct{})
	)
	f := newFreshReads(func(_ context.Context, tg claim.Target) (claim.TargetState, error) {
		if tg == other {
			return claim.TargetState{Target: tg, RecordVersion: -1}, nil
		}
		n := started.Add(1)
		if n == 1 {
			close(first)
			<-release // the first read hangs until the late callers have queued
		}
		return claim.TargetState{Target: tg, RecordVersion: n}, nil
	})
	ctx := context.Background()

	var wg sync.WaitGroup
	var firstAnswer claim.TargetState
	wg.Go(func() { firstAnswer, _ = f.ReadTarget(ctx, target) })
	<-first

	// Asked while read 1 runs: each must get a read started after it asked (read 2).
	const late = 8
	answers := make([]claim.TargetState, late)
	for i := range late {
		wg.Go(func() { answers[i], _ = f.ReadTarget(ctx, target) })
	}
	// Another target is not held up by the hanging read.
	st, err := f.ReadTarget(ctx, other)
	if err != nil || st.RecordVersion != -1 {
		t.Fatalf("other target: %+v, %v", st, err)
	}
	waitQueued(t, f, target)
	close(release)
	wg.Wait()

	if firstAnswer.RecordVersion != 1 {
		t.Fatalf("first caller got read %d, want 1", firstAnswer.RecordVersion)
	}
	for i, a := range answers {
		if a.RecordVersion < 2 {
			t.Fatalf("late caller %d got read %d, which started before it asked", i, a.RecordVersion)
		}
	}
	// They queued while read 1 ran, so they share read 2 (a goroutine the scheduler
	// started only after read 2 began gets read 3).
	n := started.Load()
	if n > 3 {
		t.Fatalf("%d reads for 1+%d callers, want them shared (2, at most 3)", n, late)
	}
	// Nothing under way any more: the next caller starts a read of its own.
	if st, _ := f.ReadTarget(ctx, target); st.RecordVersion != n+1 {
		t.Fatalf("a later caller got read %d, want a new one (%d)", st.RecordVersion, n+1)
	}
}

// A caller whose context ends stops waiting; the others still get their answer.
func TestFreshReadsCallerGivesUp(t *testing.T) {
	target := claim.Target{Repository: "o/r", Kind: claim.KindIssue, Number: 1}
	release := make(chan struct{})
	f := newFreshReads(func(context.Context, claim.Target) (claim.TargetState, error) {
		<-release
		return claim.TargetState{RecordVersion: 7}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.ReadTarget(ctx, target); err == nil {
		t.Fatal("a caller whose context ended got an answer")
	}
	done := make(chan claim.TargetState)
	go func() {
		st, _ := f.ReadTarget(context.Background(), target)
		done <- st
	}()
	close(release)
	if st := <-done; st.RecordVersion != 7 {
		t.Fatalf("got %+v", st)
	}
}

// waitQueued waits until a caller queued for target's next read, and gives the other
// late callers' goroutines a moment to queue too.
func waitQueued(t *testing.T, f *freshReads, target claim.Target) {
	t.Helper()
	key := readKey{repository: target.Repository, kind: target.Kind, number: target.Number}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		queued := f.targets[key] != nil && f.targets[key].next != nil
		f.mu.Unlock()
		if queued {
			time.Sleep(50 * time.Millisecond) // the other late callers
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no caller queued for the next read of %v", target)
}
