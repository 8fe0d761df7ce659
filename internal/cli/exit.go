package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// Exit codes. A refused claim exits with the code of its class, so a script can tell
// contention (normal: choose again after fresh inspection) from the rest.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitFailure: the API server, Gitea or the local system failed, or an object ended in
	// a state other than the one waited for (the message says which).
	ExitFailure = 1
	// ExitUsage: bad input (flags, arguments, an unknown worker, target, pid or plan, a
	// plan that is not ready). Nothing was changed.
	ExitUsage = 2
	// ExitTimeout: a wait ran past --timeout (or was interrupted). The object stays as it
	// was, except a claim, which is given back (spec.release).
	ExitTimeout = 3
	// ExitContention: the claim was refused, class contention.
	ExitContention = 10
	// ExitStaleState: the claim was refused, class stale_state.
	ExitStaleState = 11
	// ExitEligibility: the claim was refused, class eligibility.
	ExitEligibility = 12
	// ExitPolicy: the claim was refused, class policy.
	ExitPolicy = 13
	// ExitAuthority: the claim was refused, class authority.
	ExitAuthority = 14
)

// exitCodeTable documents the codes in --help.
const exitCodeTable = `   0  success
   1  error: API server, Gitea or system failure, or an unexpected end state
   2  bad input (flags, arguments, unknown worker/target/pid/plan, plan not ready);
      nothing was changed
   3  timed out waiting (--timeout) or interrupted; the object stays as it was,
      except a claim, which is given back
  10  claim refused: contention (another claim holds or won the target; normal)
  11  claim refused: stale_state (pinned or requested state moved)
  12  claim refused: eligibility (terminal, dependency-gated or blocked target)
  13  claim refused: policy (binding, shape, one claim per worker)
  14  claim refused: authority (registration, verdict, independence)
  run passes on the exit code of its command (128+N when a signal N ended it).`

// ClassExitCode is the exit code of a refusal of class c (ExitFailure for an unknown class).
func ClassExitCode(c claim.Class) int {
	switch c {
	case claim.ClassContention:
		return ExitContention
	case claim.ClassStaleState:
		return ExitStaleState
	case claim.ClassEligibility:
		return ExitEligibility
	case claim.ClassPolicy:
		return ExitPolicy
	case claim.ClassAuthority:
		return ExitAuthority
	}
	return ExitFailure
}

// ExitError is an error with the exit code it ends the command with.
type ExitError struct {
	Code int
	Err  error
	// Silent errors were already reported (a refusal, a command's own exit code).
	Silent bool
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// usageErrorf is bad input: exit code 2, nothing changed.
func usageErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// ExitCodeOf returns the exit code err ends a command with.
func ExitCodeOf(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ExitTimeout
	}
	return ExitFailure
}

// signalContext is cancelled on SIGINT or SIGTERM.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
