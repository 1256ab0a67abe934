package backoff

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ErrExceedsBurst is the error of [Limiter.WaitN] when n exceeds the burst:
// the limiter can never hold that many tokens, so waiting would never end.
// x/time/rate returns an error with the same meaning.
var ErrExceedsBurst = errors.New("backoff: n exceeds the limiter's burst")

// ErrWaitExceedsDeadline is the error of a Wait that would have to wait past
// its context's deadline: it returns at once, takes no token, and the
// context is not done yet. x/time/rate returns an error with the same
// meaning. errors.Is(err, context.DeadlineExceeded) holds for it.
var ErrWaitExceedsDeadline error = waitDeadlineError{}

type waitDeadlineError struct{}

func (waitDeadlineError) Error() string {
	return "backoff: the wait would outlast the context's deadline"
}

func (waitDeadlineError) Is(target error) bool { return target == context.DeadlineExceeded }

// Wait is shorthand for WaitN(ctx, 1).
func (l *Limiter) Wait(ctx context.Context) error { return l.WaitN(ctx, 1) }

// WaitN blocks until n events may happen, taking their tokens, and returns
// nil; on a FakeClock it returns when the clock is stepped to that instant.
// It returns at once, without taking tokens, with [ErrExceedsBurst] if n
// exceeds the burst (and the limit is not infinite), with ctx's error if ctx
// is already done, and with [ErrWaitExceedsDeadline] if ctx has a deadline
// sooner than the tokens would be earned (as x/time/rate does: nobody waits
// for a wait that is bound to fail). If ctx ends while it waits, WaitN gives
// the tokens back (see [Reservation.Cancel]) and returns ctx's error, which
// also matches context.Cause(ctx) under errors.Is when a cause was given. A
// negative n counts as 0.
//
// WaitN starts no goroutine; while it waits it holds one timer of the clock,
// which it stops before returning. It allocates nothing in steady state:
// timers are reused.
func (l *Limiter) WaitN(ctx context.Context, n int) error {
	now := l.now()
	l.mu.Lock()
	tooMany := n > l.burst && l.limit != InfLimit
	l.mu.Unlock()
	if tooMany {
		return ErrExceedsBurst
	}
	if ctx.Err() != nil {
		return contextError(ctx)
	}
	maxWait := waitLimit(ctx, l.epoch, now)
	l.mu.Lock()
	r, wait := l.reserveLocked(now, n, maxWait)
	l.mu.Unlock()
	if !r.ok {
		return ErrWaitExceedsDeadline
	}
	if !l.timers.sleep(ctx, wait) {
		// Directly, not r.Cancel(): a call through the reservation's owner
		// interface would make r escape, one allocation per wait.
		l.cancelReservation(&r, l.now())
		return contextError(ctx)
	}
	return nil
}

// waitLimit is how long a Wait starting at instant now may wait before ctx's
// deadline; the largest time.Duration without a deadline.
func waitLimit(ctx context.Context, epoch time.Time, now time.Duration) time.Duration {
	deadline, ok := ctx.Deadline()
	if !ok {
		return maxDuration
	}
	// epoch carries the real clock's monotonic reading, and so does a
	// deadline from context.WithTimeout: the difference is monotonic.
	return deadline.Sub(epoch.Add(now))
}

// contextError is the error of a Wait that ctx ended: ctx.Err(), wrapped
// with context.Cause(ctx) when the cause says more.
func contextError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return &causeError{err: err, cause: cause}
	}
	return err
}

// causeError is ctx.Err() together with ctx's cause; errors.Is matches both.
type causeError struct{ err, cause error }

func (e *causeError) Error() string   { return e.err.Error() + ": " + e.cause.Error() }
func (e *causeError) Unwrap() []error { return []error{e.err, e.cause} }

// timerPool keeps the clock's timers that waits have finished with.
//
// A Wait that has to wait needs a timer of the injected clock, and
// clock.WithDelayedExecution offers no way to wait on the clock without one
// (a FakeClock releases only its registered waiters). Creating a timer
// allocates with every clock (a real clock's NewTimer allocates a
// time.Timer and its wrapper), so finished timers are kept and Reset for the
// next wait instead. A sync.Pool rather than one timer per limiter, because
// any number of goroutines may wait at once.
type timerPool struct {
	clock clock.WithDelayedExecution
	pool  sync.Pool // of clock.Timer, stopped and drained
}

// sleep waits d, or until ctx ends; it reports whether it waited d.
func (p *timerPool) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t, _ := p.pool.Get().(clock.Timer)
	if t == nil {
		t = p.clock.NewTimer(d)
	} else {
		t.Reset(d)
	}
	select {
	case <-t.C():
		p.pool.Put(t)
		return true
	case <-ctx.Done():
		if !t.Stop() {
			// It fired as ctx ended. A FakeClock's timer channel, and a
			// real one under the pre-Go 1.23 timer semantics, then holds the
			// tick: drain it, or the next Reset would wake at once.
			select {
			case <-t.C():
			default:
			}
		}
		p.pool.Put(t)
		return false
	}
}
