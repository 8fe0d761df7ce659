package cli

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// poll re-reads obj (by its name and namespace) every o.Poll and reports step's line
// after each read, until cond says done or fails, or ctx ends.
//
// An error the API server answered (forbidden, deleted) ends the wait with that error. A
// read that got no answer (a broken connection, the client's rate limiter overrunning the
// deadline) is retried. When ctx ends first, the result is an ExitTimeout error with
// timeout's message and the last unanswered read's error.
func (o *Options) poll(ctx context.Context, c client.Client, obj client.Object, pg *progress,
	step func() string, cond func() (bool, error), timeout func() string) error {
	key := client.ObjectKeyFromObject(obj)
	var transient error
	err := wait.PollUntilContextCancel(ctx, o.Poll, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return false, fmt.Errorf("%s was deleted while waiting", key.Name)
			}
			if errors.As(err, new(apierrors.APIStatus)) {
				return false, err
			}
			transient = err
			return false, nil
		}
		pg.step(step())
		return cond()
	})
	pg.done()
	if err != nil && ctx.Err() != nil {
		msg := timeout()
		if transient != nil {
			msg += "; last read: " + transient.Error()
		}
		return &ExitError{Code: ExitTimeout, Err: errors.New(msg)}
	}
	return err
}
