package backoff_test

import (
	"context"
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain fails the run if any test leaves a goroutine running.
//
// The suite's longest tests (randomised models, scenarios, table sweeps)
// are CPU-bound and share nothing, so they call t.Parallel and run two at a
// time on a 2-core machine. A test that reads heap or goroutine counts,
// counts allocations or uses a synctest bubble stays sequential.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// longTests reports whether the long mode is on (BACKOFF_LONG=1): CI runs
// the long scenarios and models once at full length, without -race, and the
// README's test command runs them short.
func longTests() bool { return os.Getenv("BACKOFF_LONG") == "1" }

// epoch is where every fake clock of the black-box tests starts. Tests of
// every part of the package share it, so it lives in a file of its own.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// armingClock is a FakeClock that reports, on armed, every timer it creates,
// once the timer is registered: a test can then count the waiters without
// polling.
type armingClock struct {
	*testingclock.FakeClock
	armed chan time.Duration
}

func (c *armingClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.armed <- d
	return t
}

// TestClockWaitersAreAsDocumented checks WithClock's table of waiters for
// the helpers a test most often runs on a goroutine.
func TestClockWaitersAreAsDocumented(t *testing.T) {
	newClock := func() *armingClock {
		return &armingClock{testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), make(chan time.Duration)}
	}
	t.Run("PollUntilContextTimeout: the timeout and the interval", func(t *testing.T) {
		c := newClock()
		done := wtGo(func() {
			_ = backoff.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, false,
				func(context.Context) (bool, error) { return true, nil }, backoff.WithClock(c))
		})
		assert.Equal(t, time.Second, waitFor(t, "the wait's timer", c.armed, c))
		assert.Equal(t, 2, c.Waiters(), "the timeout's AfterFunc, and the wait's timer")
		c.Step(time.Second)
		waitFor(t, "PollUntilContextTimeout to return", done, c)
		assert.Equal(t, 0, c.Waiters(), "none outlives the call")
	})
	t.Run("Retry: one timer during a wait", func(t *testing.T) {
		c := newClock()
		done := wtGo(func() {
			_ = backoff.Retry(context.Background(), backoff.Schedule{Duration: time.Second, Steps: 2},
				func(context.Context) error { return errFlaky }, backoff.WithClock(c))
		})
		assert.Equal(t, time.Second, waitFor(t, "the wait's timer", c.armed, c))
		assert.Equal(t, 1, c.Waiters())
		c.Step(time.Second)
		waitFor(t, "Retry to return", done, c)
		assert.Equal(t, 0, c.Waiters())
	})
}

// newQueueClock returns a FakeClock at the tests' shared epoch.
func newQueueClock() *testingclock.FakeClock { return testingclock.NewFakeClock(epoch) }

// qLimiter is a RateLimiter for the queue tests: the delay of an item's n-th
// failure (n from 0) is delay(n). It counts its When calls.
type qLimiter[T comparable] struct {
	mu     sync.Mutex
	delay  func(n int) time.Duration
	counts map[T]int
	whens  int
}

func newQLimiter[T comparable](delay func(n int) time.Duration) *qLimiter[T] {
	return &qLimiter[T]{delay: delay, counts: map[T]int{}}
}

// qExponential is client-go's item-exponential series: base·2^n.
func qExponential(base time.Duration) func(n int) time.Duration {
	return func(n int) time.Duration { return base << n }
}

func (l *qLimiter[T]) When(item T) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.counts[item]
	l.counts[item] = n + 1
	l.whens++
	return l.delay(n)
}

func (l *qLimiter[T]) Forget(item T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.counts, item)
}

func (l *qLimiter[T]) NumRequeues(item T) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[item]
}

func (l *qLimiter[T]) Whens() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.whens
}

// getReady takes every item Get can hand out without blocking, in order,
// and marks each Done.
func getReady[T comparable](t *testing.T, q interface {
	Len() int
	Get() (T, bool)
	Done(T)
}) []T {
	t.Helper()
	var out []T
	for q.Len() > 0 {
		item, shutdown := q.Get()
		require.False(t, shutdown)
		q.Done(item)
		out = append(out, item)
	}
	return out
}

// getAsync calls Get on a goroutine and delivers what it returns.
type getResult[T any] struct {
	item     T
	shutdown bool
}

func getAsync[T comparable](q interface{ Get() (T, bool) }) <-chan getResult[T] {
	ch := make(chan getResult[T], 1)
	go func() {
		item, shutdown := q.Get()
		ch <- getResult[T]{item, shutdown}
	}()
	return ch
}

// get calls getFn (a queue's Get) on a goroutine and returns what it
// returns, through waitFor: a test that expects an item to be ready fails in
// seconds, naming the wait, when none is, instead of blocking in Get.
func get[T any](t testing.TB, getFn func() (T, bool), clocks ...fakeClockState) (T, bool) {
	t.Helper()
	ch := make(chan getResult[T], 1)
	go func() {
		item, shutdown := getFn()
		ch <- getResult[T]{item, shutdown}
	}()
	r := waitFor(t, "Get to hand out an item or report shutdown (is an item ready?)", ch, clocks...)
	return r.item, r.shutdown
}

// interfaces with client-go's method sets, checked at compile time below.
type (
	typedInterface[T comparable] interface {
		Add(item T)
		Len() int
		Get() (item T, shutdown bool)
		Done(item T)
		ShutDown()
		ShutDownWithDrain()
		ShuttingDown() bool
	}
	typedDelayingInterface[T comparable] interface {
		typedInterface[T]
		AddAfter(item T, duration time.Duration)
	}
	typedRateLimitingInterface[T comparable] interface {
		typedDelayingInterface[T]
		AddRateLimited(item T)
		Forget(item T)
		NumRequeues(item T) int
	}
)

var (
	_ typedInterface[string]             = (*backoff.Queue[string])(nil)
	_ typedDelayingInterface[string]     = (*backoff.DelayingQueue[string])(nil)
	_ typedRateLimitingInterface[string] = (*backoff.RateLimitingQueue[string])(nil)
	_ backoff.RateLimiter[int]           = (*qLimiter[int])(nil)
)

// waitTimeout is how long, in real time, a test waits for the code under
// test before it fails. It is a safety net, not a timing assertion: on a
// FakeClock everything a test waits for happens as soon as the goroutines
// involved are scheduled, so a wait that lasts this long means a bug (a
// missed wake-up, a timer that was never armed, a wait on a clock nobody
// steps). It is short so that such a bug costs seconds, not go test's
// 10-minute timeout, and long enough for a loaded machine under -race.
const waitTimeout = 5 * time.Second

// fakeClockState is what a failed wait reports about a fake clock:
// testingclock.FakeClock and the tests' handshakeClock both have it.
type fakeClockState interface {
	Now() time.Time
	Waiters() int
}

// describeClock says where each clock stands and how many timers, tickers
// and sleeps wait on it, for the message of a failed wait: "0 waiters" on a
// clock the code under test should be waiting on points at a wait that
// ended too early, or was never set; waiters on a clock that nobody steps
// point at a wait that should not have been made.
func describeClock(clocks ...fakeClockState) string {
	if len(clocks) == 0 {
		return "no fake clock given"
	}
	parts := make([]string, len(clocks))
	for i, c := range clocks {
		parts[i] = fmt.Sprintf("fake clock at %s has %d waiter(s)", c.Now().Format(time.RFC3339Nano), c.Waiters())
	}
	return strings.Join(parts, "; ")
}

// waitFor returns the next value received from ch. If none comes within
// waitTimeout of real time, it fails the test at once, saying what did not
// happen (what completes "timed out waiting for ...") and the state of the
// given fake clocks. Every test that blocks waiting for the code under test
// waits through waitFor or waitForCall.
func waitFor[T any](t testing.TB, what string, ch <-chan T, clocks ...fakeClockState) T {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	select {
	case v := <-ch:
		return v
	case <-timeout.C:
		t.Fatalf("timed out (%v real time) waiting for %s; %s", waitTimeout, what, describeClock(clocks...))
	}
	var zero T
	return zero
}

// waitForCall runs wait (a WaitGroup's Wait, a function that drains a
// channel, ...) on a goroutine and waits for it to return, as waitFor does.
// On timeout the goroutine is left blocked: the test has failed anyway.
func waitForCall(t testing.TB, what string, wait func(), clocks ...fakeClockState) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait()
	}()
	waitFor(t, what, done, clocks...)
}
