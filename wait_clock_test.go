package backoff_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
)

// handshakeClock is a FakeClock that tells the test about the timers the code
// under test sets, so that a test never has to guess whether a goroutine is
// parked on the clock:
//
//   - every NewTimer and Reset sends the requested delay on armed, after the
//     timer is registered with the fake clock; a test that has received it
//     knows that stepping the clock by that delay fires the timer;
//   - every firing increments fired inside FakeClock.Step, on the stepping
//     goroutine, so right after Step returns the test knows whether a timer
//     fired.
//
// The timers are built on FakeClock.AfterFunc, whose callbacks run inside
// Step with the clock's lock held: the callback therefore only sends on a
// buffered channel and counts, and never calls the clock.
type handshakeClock struct {
	*testclock.FakeClock
	start time.Time
	armed chan time.Duration
	fired atomic.Int64
}

var _ clock.WithDelayedExecution = (*handshakeClock)(nil)

func newHandshakeClock() *handshakeClock {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	return &handshakeClock{
		FakeClock: testclock.NewFakeClock(start),
		start:     start,
		// Deep enough that code under test never blocks on it in these
		// tests, which make at most a few hundred waits each.
		armed: make(chan time.Duration, 4096),
	}
}

// elapsed returns the fake time since the clock was made.
func (c *handshakeClock) elapsed() time.Duration { return c.Since(c.start) }

func (c *handshakeClock) NewTimer(d time.Duration) clock.Timer {
	t := &handshakeTimer{clock: c, ch: make(chan time.Time, 1), target: c.Now().Add(d)}
	t.inner = c.FakeClock.AfterFunc(d, t.fire)
	c.armed <- d
	return t
}

type handshakeTimer struct {
	clock  *handshakeClock
	inner  clock.Timer
	ch     chan time.Time
	target time.Time // written before the timer is armed, read when it fires
}

func (t *handshakeTimer) fire() {
	select {
	case t.ch <- t.target: // capacity 1, like a real timer's channel
	default:
	}
	t.clock.fired.Add(1)
}

func (t *handshakeTimer) C() <-chan time.Time { return t.ch }
func (t *handshakeTimer) Stop() bool          { return t.inner.Stop() }

func (t *handshakeTimer) Reset(d time.Duration) bool {
	// A fresh AfterFunc each time: FakeClock gives every AfterFunc a
	// one-slot channel that nobody reads, so one that was Reset after firing
	// would block the second firing, and Step with it.
	active := t.inner.Stop()
	t.target = t.clock.Now().Add(d)
	t.inner = t.clock.FakeClock.AfterFunc(d, t.fire)
	t.clock.armed <- d
	return active
}

// nextArmed waits for the code under test to set a timer and returns its
// delay. It fails the test if done is closed first or nothing is armed
// within waitTimeout (a hang, not a timing assertion).
func (c *handshakeClock) nextArmed(t *testing.T, done <-chan struct{}) time.Duration {
	t.Helper()
	select {
	case d := <-c.armed:
		return d
	case <-done:
		t.Fatal("the code under test returned instead of setting a timer")
	case <-time.After(waitTimeout):
		t.Fatalf("timed out (%v real time) waiting for the code under test to set a timer; %s", waitTimeout, describeClock(c))
	}
	return 0
}

// stepUntilFired steps the clock by step until one of its timers fires, and
// returns how far it stepped. It is deterministic: the firing happens inside
// Step, on this goroutine. It fails after limit steps.
func (c *handshakeClock) stepUntilFired(t *testing.T, step time.Duration, limit int) time.Duration {
	t.Helper()
	before := c.fired.Load()
	for i := 1; i <= limit; i++ {
		c.Step(step)
		if c.fired.Load() != before {
			return time.Duration(i) * step
		}
	}
	t.Fatalf("no timer fired in %d steps of %v", limit, step)
	return 0
}

// driveLimit bounds the waits that drive steps through: no test makes
// more than a few hundred, and code that loops for ever on the fake clock
// (a retry that never stops) must fail the test, not step it for ever.
const driveLimit = 4096

// drive steps c by every delay the code under test arms, until done is
// closed: the fake clock then moves exactly from one wait to the next. It
// fails the test if the code under test neither arms a timer nor returns
// within waitTimeout, or has not returned after driveLimit waits or
// waitTimeout in all.
func (c *handshakeClock) drive(t *testing.T, done <-chan struct{}) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for steps := 0; ; steps++ {
		if steps == driveLimit {
			t.Fatalf("the code under test did not return after %d waits on the fake clock; %s", steps, describeClock(c))
		}
		select {
		case d := <-c.armed:
			c.Step(d)
		case <-done:
			return
		case <-deadline.C:
			t.Fatalf("timed out (%v real time) waiting for the code under test to return, after stepping through %d waits; %s",
				waitTimeout, steps, describeClock(c))
		}
	}
}

// wtGo runs f on a new goroutine and returns a channel closed when it
// returns.
func wtGo(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

// wtCanceled returns a context that is already done.
func wtCanceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
