package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// watchedReread is how long a wait that watches its object goes without a change before
// it reads the object again anyway (a change the watch missed is seen at the latest then).
const watchedReread = 10 * time.Second

// poll re-reads obj (by its name and namespace) whenever it changes and reports step's
// line after each read, until cond says done or fails, or ctx ends. A change is seen
// through a watch of that one object, so the wait ends as soon as the controller wrote
// the answer; without a watch (the client cannot watch, or may not) it re-reads every
// o.Poll instead.
//
// An error the API server answered (forbidden, deleted) ends the wait with that error. A
// read that got no answer (a broken connection, the client's rate limiter overrunning the
// deadline) is retried. When ctx ends first, the result is an ExitTimeout error with
// timeout's message and the last unanswered read's error.
func (o *Options) poll(ctx context.Context, c client.Client, obj client.Object, pg *progress,
	step func() string, cond func() (bool, error), timeout func() string) error {
	key := client.ObjectKeyFromObject(obj)
	var transient error
	answered := false // the last read got an answer
	read := func() (bool, error) {
		answered = false
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
		answered = true
		pg.step(step())
		return cond()
	}
	var w watch.Interface
	var rewatch time.Time // a watch that ended is opened again only from then on
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	err := func() error {
		for {
			if done, err := read(); done || err != nil {
				return err
			}
			if w == nil && answered && !time.Now().Before(rewatch) {
				w = watchOne(ctx, c, obj)
			}
			var changed <-chan watch.Event
			wait := o.Poll
			if w != nil {
				changed, wait = w.ResultChan(), max(o.Poll, watchedReread)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case ev, open := <-changed:
				if !open || ev.Type == watch.Error {
					// The watch ended (a timeout, a broken connection, a version too old):
					// read, and watch again from that read.
					w.Stop()
					w, rewatch = nil, time.Now().Add(o.Poll)
				}
			case <-time.After(wait):
			}
		}
	}()
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

// watchOne watches obj alone (a field selector on its name) from the version just read,
// so no change after that read is missed. It returns nil when the watch cannot be had:
// the wait then re-reads on a timer.
func watchOne(ctx context.Context, c client.Client, obj client.Object) watch.Interface {
	wc, ok := c.(client.WithWatch)
	if !ok {
		return nil
	}
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return nil
	}
	gvk.Kind += "List"
	o, err := c.Scheme().New(gvk)
	if err != nil {
		return nil
	}
	list, ok := o.(client.ObjectList)
	if !ok {
		return nil
	}
	w, err := wc.Watch(ctx, list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{"metadata.name": obj.GetName()},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: obj.GetResourceVersion()}})
	if err != nil {
		return nil
	}
	return w
}
