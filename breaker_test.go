package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

var errDown = errors.New("connection refused")

// fixedOpen is an open schedule without jitter, so that open times are
// exact: 1 s, 2 s, 4 s, 4 s ...
var fixedOpen = backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: time.Second, Factor: 2, Cap: 4 * time.Second})

// call makes one call through b that ends with err, and reports whether
// b let it through.
func call(t *testing.T, b *backoff.Breaker, err error) bool {
	t.Helper()
	p, refused := b.Allow()
	if refused != nil {
		require.ErrorIs(t, refused, backoff.ErrBreakerOpen)
		return false
	}
	p.Done(context.Background(), err)
	return true
}

// openFor returns the wait that a refusal of b carries, failing the test
// if b lets the call through or gives no wait.
func openFor(t *testing.T, b *backoff.Breaker) time.Duration {
	t.Helper()
	_, err := b.Allow()
	require.ErrorIs(t, err, backoff.ErrBreakerOpen)
	var ra *backoff.RetryAfterError
	require.ErrorAs(t, err, &ra, "an open breaker says when a probe may go through")
	return ra.Delay
}

func TestBreakerStartsClosedAndLetsCallsThrough(t *testing.T) {
	b := backoff.NewBreaker(backoff.WithClock(testingclock.NewFakeClock(epoch)))
	for range 1000 {
		require.True(t, call(t, b, nil))
	}
	assert.Equal(t, backoff.BreakerClosed, b.State())
	assert.Equal(t, "closed", backoff.BreakerClosed.String())
	assert.Equal(t, "open", backoff.BreakerOpen.String())
	assert.Equal(t, "half-open", backoff.BreakerHalfOpen.String())
	assert.Equal(t, "BreakerState(7)", backoff.BreakerState(7).String())
}

// TestBreakerTripsOnTheRatioOverARollingWindow: the ratio counts the
// outcomes of the last window, whichever fixed window they fall in, and
// only once there are minRequests of them.
func TestBreakerTripsOnTheRatioOverARollingWindow(t *testing.T) {
	newBreaker := func(clk *testingclock.FakeClock) *backoff.Breaker {
		return backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerFailureRatio(0.5, 20),
			backoff.WithBreakerWindow(10*time.Second), backoff.WithBreakerConsecutiveFailures(0))
	}
	t.Run("a burst across a fixed window's boundary", func(t *testing.T) {
		// 10 failures before 10 s and 10 after: a fixed window of 10 s
		// would hold 10 in each, never 20.
		clk := testingclock.NewFakeClock(epoch)
		b := newBreaker(clk)
		clk.Step(9 * time.Second)
		for range 10 {
			call(t, b, errDown)
		}
		clk.Step(2 * time.Second)
		for range 9 {
			call(t, b, errDown)
		}
		assert.Equal(t, backoff.BreakerClosed, b.State(), "19 outcomes: fewer than minRequests")
		call(t, b, errDown)
		assert.Equal(t, backoff.BreakerOpen, b.State(), "20 failures within 10 s")
	})
	t.Run("the ratio", func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		b := newBreaker(clk)
		for range 11 {
			call(t, b, nil)
		}
		for range 10 {
			call(t, b, errDown)
		}
		assert.Equal(t, backoff.BreakerClosed, b.State(), "10 of 21 is below half")
		call(t, b, errDown)
		assert.Equal(t, backoff.BreakerOpen, b.State(), "11 of 22 is half")
	})
	t.Run("outcomes leave the window", func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		b := newBreaker(clk)
		for range 15 {
			call(t, b, errDown)
		}
		clk.Step(11 * time.Second) // past a window and its bucket
		for range 19 {
			call(t, b, errDown)
		}
		assert.Equal(t, backoff.BreakerClosed, b.State(), "only 19 failures are left in the window")
		call(t, b, errDown)
		assert.Equal(t, backoff.BreakerOpen, b.State())
	})
	t.Run("outcomes stay a whole window", func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		b := newBreaker(clk)
		for range 15 {
			call(t, b, errDown)
		}
		clk.Step(9900 * time.Millisecond)
		for range 5 {
			call(t, b, errDown)
		}
		assert.Equal(t, backoff.BreakerOpen, b.State(), "15 failures 9.9 s ago are still in a 10 s window")
	})
}

// TestBreakerTripsOnConsecutiveFailuresThatDoNotDecay: one failure every
// 19 s is never 20 in a 10 s window, but 5 in a row trip the breaker
// however far apart; only a success resets the count, and a call the
// caller gave up on leaves it.
func TestBreakerTripsOnConsecutiveFailuresThatDoNotDecay(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	b := backoff.NewBreaker(backoff.WithClock(clk))
	for i := range 4 {
		call(t, b, errDown)
		clk.Step(19 * time.Second)
		require.Equal(t, backoff.BreakerClosed, b.State(), "after %d failures", i+1)
	}
	call(t, b, nil)
	for range 4 {
		call(t, b, errDown)
		clk.Step(19 * time.Second)
	}
	assert.Equal(t, backoff.BreakerClosed, b.State(), "a success reset the count")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := b.Allow()
	require.NoError(t, err)
	p.Done(ctx, ctx.Err())
	assert.Equal(t, backoff.BreakerClosed, b.State(), "the caller's cancellation is no failure")
	call(t, b, errDown)
	assert.Equal(t, backoff.BreakerOpen, b.State(), "the 5th failure in a row, 76 s after the first; the cancellation did not reset the count")

	off := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(0))
	for range 19 {
		call(t, off, errDown)
		clk.Step(19 * time.Second)
	}
	assert.Equal(t, backoff.BreakerClosed, off.State(), "0 turns the rule off")
}

// TestBreakerOpenTimeFollowsTheSchedule: the k-th trip in a row opens the
// breaker for the schedule's k-th wait; a close starts it over.
func TestBreakerOpenTimeFollowsTheSchedule(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	b := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(1), backoff.WithBreakerProbes(1), fixedOpen)
	call(t, b, errDown)
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		require.Equal(t, backoff.BreakerOpen, b.State())
		require.Equal(t, want, openFor(t, b))
		clk.Step(want - time.Millisecond)
		require.Equal(t, time.Millisecond, openFor(t, b), "the wait counts down")
		clk.Step(time.Millisecond)
		require.Equal(t, backoff.BreakerHalfOpen, b.State(), "open time over")
		require.True(t, call(t, b, errDown), "the probe goes through, and fails")
	}
	clk.Step(4 * time.Second)
	require.True(t, call(t, b, nil), "a probe that succeeds")
	require.Equal(t, backoff.BreakerClosed, b.State())
	call(t, b, errDown)
	assert.Equal(t, time.Second, openFor(t, b), "a close resets the schedule")
}

// TestBreakerDefaultOpenTimes: without options, 1 s, 2 s, then 4 s, each
// up to 10% longer.
func TestBreakerDefaultOpenTimes(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	b := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerProbes(1))
	for range 5 {
		call(t, b, errDown)
	}
	for _, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		d := openFor(t, b)
		require.GreaterOrEqual(t, d, base)
		require.Less(t, d, base+base/10)
		clk.Step(d)
		require.True(t, call(t, b, errDown))
	}
}

// TestBreakerRetryAfterHintExtendsTheOpenTime: the open time is the later
// of the schedule's and the hint of the failure that tripped it, or of one
// that arrives while it is open; the hint is bounded.
func TestBreakerRetryAfterHintExtendsTheOpenTime(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	newBreaker := func() *backoff.Breaker {
		return backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(1), fixedOpen)
	}
	b := newBreaker()
	call(t, b, backoff.RetryAfter(30*time.Second, errDown))
	assert.Equal(t, 30*time.Second, openFor(t, b), "the server's hint is later")

	b = newBreaker()
	call(t, b, backoff.RetryAfter(time.Millisecond, errDown))
	assert.Equal(t, time.Second, openFor(t, b), "the schedule is later")

	b = newBreaker()
	call(t, b, backoff.RetryAfter(time.Hour, errDown))
	assert.Equal(t, backoff.DefaultMaxRetryAfter, openFor(t, b), "a hint is bounded")

	b = newBreaker()
	late, err := b.Allow() // a call made before the trip, that answers after it
	require.NoError(t, err)
	call(t, b, errDown)
	clk.Step(100 * time.Millisecond)
	late.Done(context.Background(), backoff.RetryAfter(10*time.Second, errDown))
	assert.Equal(t, 10*time.Second, openFor(t, b), "a hint that arrives while open extends the open time")
}

// TestBreakerProbeFailureWithAHintReopensForTheHint: a failed probe's
// Retry-After hint is an open time too.
func TestBreakerProbeFailureWithAHintReopensForTheHint(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	b := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(1), fixedOpen)
	call(t, b, errDown)
	clk.Step(time.Second)
	require.True(t, call(t, b, backoff.RetryAfter(20*time.Second, errDown)))
	assert.Equal(t, 20*time.Second, openFor(t, b))
	clk.Step(20 * time.Second)
	require.True(t, call(t, b, errDown))
	assert.Equal(t, 4*time.Second, openFor(t, b), "the third trip in a row")
}

// TestBreakerHalfOpenAdmitsNProbes: at most n probes at once; n successes
// close the breaker; a probe the caller gave up on frees its place; a
// failure reopens it.
func TestBreakerHalfOpenAdmitsNProbes(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	b := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(1), backoff.WithBreakerProbes(3), fixedOpen)
	call(t, b, errDown)
	clk.Step(time.Second)
	var probes []backoff.BreakerPermit
	for range 3 {
		p, err := b.Allow()
		require.NoError(t, err)
		probes = append(probes, p)
	}
	_, err := b.Allow()
	require.ErrorIs(t, err, backoff.ErrBreakerOpen, "a 4th probe")
	var ra *backoff.RetryAfterError
	assert.False(t, errors.As(err, &ra), "while probes are out, no time is known")
	assert.Equal(t, backoff.BreakerHalfOpen, b.State())

	probes[0].Done(context.Background(), nil)
	probes[1].Release()
	probes[1].Release() // a second report does nothing
	p, err := b.Allow()
	require.NoError(t, err, "the released probe's place")
	probes[2].Done(context.Background(), nil)
	assert.Equal(t, backoff.BreakerHalfOpen, b.State(), "2 successes of 3")
	p.Done(context.Background(), nil)
	assert.Equal(t, backoff.BreakerClosed, b.State(), "3 successes")
	probes[0].Done(context.Background(), errDown) // reported twice: nothing
	assert.Equal(t, backoff.BreakerClosed, b.State())

	call(t, b, errDown)
	clk.Step(time.Second)
	p1, err := b.Allow()
	require.NoError(t, err)
	p2, err := b.Allow()
	require.NoError(t, err)
	p1.Done(context.Background(), errDown)
	assert.Equal(t, backoff.BreakerOpen, b.State(), "a failed probe reopens")
	assert.Equal(t, 2*time.Second, openFor(t, b), "the second trip since the close")
	p2.Done(context.Background(), nil) // a probe of the half-open state that ended
	assert.Equal(t, backoff.BreakerOpen, b.State(), "counts for nothing")
}

// TestBreakerCallerCancellationNeverCounts: calls that end with the
// caller's context, however they fail, neither trip a breaker nor fail a
// probe; the same errors with the caller's context alive are failures.
func TestBreakerCallerCancellationNeverCounts(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	b := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(1), backoff.WithBreakerProbes(1), fixedOpen)
	for _, err := range []error{context.Canceled, fmt.Errorf("query: %w", context.Canceled), context.DeadlineExceeded, errDown} {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		rerr := backoff.Retry(ctx, noWait, func(context.Context) error {
			calls++
			cancel() // the caller gives up during the attempt
			return err
		}, backoff.WithPacer(b), backoff.WithClock(clk))
		require.ErrorIs(t, rerr, context.Canceled)
		require.Equal(t, 1, calls)
		require.Equal(t, backoff.BreakerClosed, b.State(), "%v, with the caller's context ended", err)
	}

	// A probe the caller gives up on frees its place.
	call(t, b, errDown)
	clk.Step(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := b.Allow()
	require.NoError(t, err)
	cancel()
	p.Done(ctx, context.Canceled)
	assert.Equal(t, backoff.BreakerHalfOpen, b.State())
	assert.True(t, call(t, b, nil), "the place is free")
	assert.Equal(t, backoff.BreakerClosed, b.State())

	// The downstream's own cancellation, with the caller's context alive,
	// is a failure.
	call(t, b, context.Canceled)
	assert.Equal(t, backoff.BreakerOpen, b.State())
}

// TestBreakerStateChangesReachTheCallbackInOrder: each change once, in
// order, with no lock held: the callback calls State and Allow, and a
// change it causes reaches it after it returns.
func TestBreakerStateChangesReachTheCallbackInOrder(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	type change struct{ from, to, seen backoff.BreakerState }
	var changes []change
	depth := 0
	var b *backoff.Breaker
	metrics := &breakerMetrics{}
	b = backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(1), backoff.WithBreakerProbes(1), fixedOpen,
		backoff.WithBreakerMetrics(metrics),
		backoff.WithBreakerStateChange(func(from, to backoff.BreakerState) {
			depth++
			defer func() { depth-- }()
			require.Equal(t, 1, depth, "a change the callback causes waits until it returns")
			changes = append(changes, change{from, to, b.State()})
			if p, err := b.Allow(); err == nil {
				p.Release()
			}
			if to == backoff.BreakerOpen && len(changes) == 1 {
				clk.Step(time.Second)
				require.Equal(t, backoff.BreakerHalfOpen, b.State(), "moves to half-open from inside the callback")
			}
		}))
	call(t, b, errDown)
	require.True(t, call(t, b, nil), "the probe")
	want := []change{
		{backoff.BreakerClosed, backoff.BreakerOpen, backoff.BreakerOpen},
		{backoff.BreakerOpen, backoff.BreakerHalfOpen, backoff.BreakerHalfOpen},
		{backoff.BreakerHalfOpen, backoff.BreakerClosed, backoff.BreakerClosed},
	}
	assert.Equal(t, want, changes)
	assert.Equal(t, []string{"closed>open", "open>half-open", "half-open>closed"}, metrics.changes())
	assert.Equal(t, int64(1), metrics.rejected.Load(), "the callback's call while open was refused")
	call(t, b, errDown)
	openFor(t, b)
	assert.False(t, call(t, b, nil))
	assert.Equal(t, int64(4), metrics.rejected.Load(), "three more: one in the callback, two here")
}

// breakerMetrics records what a breaker reports.
type breakerMetrics struct {
	mu       sync.Mutex
	seen     []string
	rejected atomic.Int64
}

func (m *breakerMetrics) ObserveStateChange(from, to backoff.BreakerState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, from.String()+">"+to.String())
}

func (m *breakerMetrics) IncRejected() { m.rejected.Add(1) }

func (m *breakerMetrics) changes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen...)
}

// TestBreakerCallbackPanicLeavesDeliveryUsable: a callback that panics
// makes the call that delivered panic; the next change is delivered.
func TestBreakerCallbackPanicLeavesDeliveryUsable(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	var seen []backoff.BreakerState
	b := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(1), backoff.WithBreakerProbes(1), fixedOpen,
		backoff.WithBreakerStateChange(func(_, to backoff.BreakerState) {
			seen = append(seen, to)
			if len(seen) == 1 {
				panic("callback")
			}
		}))
	assert.PanicsWithValue(t, "callback", func() { call(t, b, errDown) })
	clk.Step(time.Second)
	assert.Equal(t, backoff.BreakerHalfOpen, b.State())
	assert.Equal(t, []backoff.BreakerState{backoff.BreakerOpen, backoff.BreakerHalfOpen}, seen)
}

// TestBreakerRetryWaitsUntilTheProbeTime: Retry with an open breaker does
// not spin through its attempts: the refusal's hint makes it wait until a
// probe may go through, which then succeeds.
func TestBreakerRetryWaitsUntilTheProbeTime(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	b := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(1), fixedOpen)
	call(t, b, errDown)
	clk.Step(300 * time.Millisecond)
	start := clk.Now()
	calls := 0
	var waits []time.Duration
	err := backoff.Retry(context.Background(), backoff.Schedule{Duration: 10 * time.Millisecond, Steps: 3}, func(context.Context) error {
		calls++
		return nil
	}, backoff.WithPacer(b), backoff.WithClock(clk), backoff.WithNotify(func(attempt int, err error, next time.Duration) {
		assert.ErrorIs(t, err, backoff.ErrBreakerOpen)
		waits = append(waits, next)
		clk.Step(next)
	}))
	require.NoError(t, err)
	assert.Equal(t, 1, calls, "fn is never called while the breaker refuses")
	assert.Equal(t, []time.Duration{700 * time.Millisecond}, waits, "one wait, until the probe time, instead of the schedule's 10 ms")
	assert.Equal(t, 700*time.Millisecond, clk.Since(start))
	assert.Equal(t, backoff.BreakerHalfOpen, b.State(), "one probe of 3 succeeded")
}

// TestBreakerRefusalIsAnAttemptThatFailedAtOnce: without a success, Retry
// reports the refusal as its last error.
func TestBreakerRefusalIsAnAttemptThatFailedAtOnce(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	b := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(1), fixedOpen)
	call(t, b, errDown)
	calls := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Duration: 10 * time.Millisecond, Steps: 1}, func(context.Context) error {
		calls++
		return nil
	}, backoff.WithPacer(b), backoff.WithClock(clk))
	assert.ErrorIs(t, err, backoff.ErrBreakerOpen)
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
	assert.Zero(t, calls)
}

// TestRunWorkersWithABreaker: items refused while the breaker is open are
// requeued with backoff without reaching handle; once it closes, every
// item is handled.
func TestRunWorkersWithABreaker(t *testing.T) {
	fc := newQueueClock()
	metrics := &breakerMetrics{}
	const items = 20
	// The worker asks the breaker before it takes an item: the 21st refusal
	// is the one it holds while it waits for the next item.
	allRefused := make(chan struct{})
	b := backoff.NewBreaker(backoff.WithClock(fc), backoff.WithBreakerConsecutiveFailures(1), fixedOpen,
		backoff.WithBreakerMetrics(refusalSignal{metrics, items + 1, allRefused}))
	call(t, b, errDown)
	q := backoff.NewRateLimitingQueue[int](newQLimiter[int](func(int) time.Duration { return 2 * time.Second }), backoff.WithClock(fc),
		backoff.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	for i := range items {
		q.Add(i)
	}
	var handled atomic.Int64
	reached := map[int64]chan struct{}{items - 1: make(chan struct{}), items: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		backoff.RunWorkers(context.Background(), q, 1, func(context.Context, int) (backoff.Result, error) {
			if ch, ok := reached[handled.Add(1)]; ok {
				close(ch)
			}
			return backoff.Result{}, nil
		}, backoff.WithPacer(b))
		close(done)
	}()
	waitFor(t, "every item to be refused", allRefused, fc)
	assert.Zero(t, handled.Load(), "no item reached handle while the breaker was open")
	// After the open time and the items' backoff, the first item meets the
	// refusal the worker held, and waits 2 s more; the others go through,
	// as probes, then with the breaker closed.
	fc.Step(2 * time.Second)
	waitFor(t, "all items but one to be handled", reached[items-1], fc)
	assert.Equal(t, backoff.BreakerClosed, b.State(), "the probes succeeded")
	fc.Step(2 * time.Second)
	waitFor(t, "every item to be handled", reached[items], fc)
	waitForCall(t, "the queue to drain", q.ShutDownWithDrain, fc)
	waitFor(t, "RunWorkers", done, fc)
}

// refusalSignal closes ch at the n-th refusal.
type refusalSignal struct {
	*breakerMetrics
	n  int64
	ch chan struct{}
}

func (s refusalSignal) IncRejected() {
	if s.rejected.Add(1) == s.n {
		close(s.ch)
	}
}

// TestBreakerUnderConcurrentCalls: many goroutines call a breaker whose
// downstream fails half the time and whose callers sometimes give up: the
// changes of state are legal and in order, and afterwards the breaker
// still opens, half-opens and closes (no probe place was leaked).
func TestBreakerUnderConcurrentCalls(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(epoch)
	var mu sync.Mutex
	last := backoff.BreakerClosed
	b := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerFailureRatio(0.3, 10), backoff.WithBreakerProbes(4), fixedOpen,
		backoff.WithBreakerStateChange(func(from, to backoff.BreakerState) {
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, last, from, "changes arrive in order")
			assert.True(t, legalBreakerChange(from, to), "%v to %v", from, to)
			last = to
		}))
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cancelled, cancel := context.WithCancel(context.Background())
			cancel()
			for i := range 2000 {
				p, err := b.Allow()
				if err != nil {
					continue
				}
				switch (g + i) % 5 {
				case 0, 1:
					p.Done(context.Background(), errDown)
				case 2:
					p.Done(cancelled, context.Canceled)
				default:
					p.Done(context.Background(), nil)
				}
				if i%200 == 0 && g == 0 {
					clk.Step(time.Second)
				}
			}
		}()
	}
	wg.Wait()
	// Every permit was reported: from any state, the breaker closes after
	// its open time and 4 successful probes, and trips again.
	clk.Step(time.Minute)
	for range 4 {
		require.True(t, call(t, b, nil), "a probe's place was leaked")
	}
	require.Equal(t, backoff.BreakerClosed, b.State())
	for range 5 {
		call(t, b, errDown)
	}
	require.Equal(t, backoff.BreakerOpen, b.State())
	mu.Lock()
	assert.Equal(t, backoff.BreakerOpen, last, "the callback saw the last change")
	mu.Unlock()
}

// legalBreakerChange reports whether a breaker may go from one state to the
// other.
func legalBreakerChange(from, to backoff.BreakerState) bool {
	switch from {
	case backoff.BreakerClosed:
		return to == backoff.BreakerOpen
	case backoff.BreakerOpen:
		return to == backoff.BreakerHalfOpen
	case backoff.BreakerHalfOpen:
		return to == backoff.BreakerOpen || to == backoff.BreakerClosed
	}
	return false
}

// TestBreakerClosedPathAllocatesNothing: Allow and Done in the closed
// state, and a paced Retry, allocate nothing.
func TestBreakerClosedPathAllocatesNothing(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	b := backoff.NewBreaker(backoff.WithClock(clk))
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		p, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		p.Done(ctx, nil)
	})
	assert.Zero(t, allocs)
	opts := []backoff.Option{backoff.WithClock(clk), backoff.WithPacer(b)}
	fn := func(context.Context) error { return nil }
	allocs = testing.AllocsPerRun(200, func() { _ = backoff.Retry(ctx, noWait, fn, opts...) })
	assert.Zero(t, allocs)
}

func TestBreakerPermitDonePanicsOnNilContext(t *testing.T) {
	b := backoff.NewBreaker(backoff.WithClock(testingclock.NewFakeClock(epoch)))
	p, err := b.Allow()
	require.NoError(t, err)
	var nilCtx context.Context
	assert.PanicsWithValue(t, "backoff: BreakerPermit.Done: ctx must not be nil, got <nil>", func() { p.Done(nilCtx, nil) })
	var zero backoff.BreakerPermit
	zero.Done(context.Background(), errDown) // the zero permit does nothing
	zero.Release()
}

// BenchmarkBreakerAllowRecord is the closed state's cost per call: Allow
// and the report of a success, on the real clock.
func BenchmarkBreakerAllowRecord(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		br := backoff.NewBreaker()
		b.ReportAllocs()
		for range b.N {
			p, err := br.Allow()
			if err != nil {
				b.Fatal(err)
			}
			p.Done(ctx, nil)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		br := backoff.NewBreaker()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := br.Allow()
				if err != nil {
					b.Error(err) // not Fatal: this is not the benchmark's goroutine
					return
				}
				p.Done(ctx, nil)
			}
		})
	})
}

// A breaker trips after 3 failures in a row, refuses calls while open,
// saying when a probe may go through, and closes after a successful probe.
func ExampleNewBreaker() {
	clk := testingclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	b := backoff.NewBreaker(backoff.WithClock(clk),
		backoff.WithBreakerConsecutiveFailures(3), backoff.WithBreakerProbes(1),
		backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: time.Second, Factor: 2, Cap: 4 * time.Second}),
		backoff.WithBreakerStateChange(func(from, to backoff.BreakerState) {
			fmt.Printf("%v: %v → %v\n", clk.Since(start), from, to)
		}))
	call := func(err error) {
		p, refused := b.Allow()
		if refused != nil {
			var ra *backoff.RetryAfterError
			if errors.As(refused, &ra) {
				fmt.Printf("%v: refused (%v); a probe in %v\n", clk.Since(start), refused, ra.Delay)
			}
			return
		}
		p.Done(context.Background(), err) // the caller's context, and the call's error
	}
	for range 3 {
		call(errors.New("connection refused"))
	}
	clk.Step(400 * time.Millisecond)
	call(nil)
	clk.Step(600 * time.Millisecond)
	call(nil) // the probe
	fmt.Println(b.State())
	// Output:
	// 0s: closed → open
	// 400ms: refused (backoff: circuit breaker open); a probe in 600ms
	// 1s: open → half-open
	// 1s: half-open → closed
	// closed
}

// With a breaker as its pacer, Retry does not spin through its attempts
// while the breaker is open: the refusal says when a probe may go through,
// and Retry waits until then, as for a server's Retry-After.
func ExampleBreaker_retry() {
	clk := testingclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	b := backoff.NewBreaker(backoff.WithClock(clk),
		backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: time.Second}))
	for range 5 { // 5 failures in a row: the breaker opens for 1s
		p, _ := b.Allow()
		p.Done(context.Background(), errors.New("connection refused"))
	}
	err := backoff.Retry(context.Background(), backoff.Schedule{Duration: 10 * time.Millisecond, Steps: 5},
		func(context.Context) error {
			fmt.Println("called at", clk.Since(start))
			return nil
		}, backoff.WithPacer(b), backoff.WithClock(clk),
		backoff.WithNotify(func(attempt int, err error, next time.Duration) {
			fmt.Printf("attempt %d: %v; next in %v\n", attempt, err, next)
			clk.Step(next)
		}))
	fmt.Println("err:", err)
	// Output:
	// attempt 1: backoff: circuit breaker open; next in 1s
	// called at 1s
	// err: <nil>
}

// TestBreakerCountsRefusalsAndTransitions: Rejected counts every refusal,
// open or half-open with its probes out, and Transitions the changes into
// each state, the initial closed state aside.
func TestBreakerCountsRefusalsAndTransitions(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	b := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(1), backoff.WithBreakerProbes(1), fixedOpen)
	assert.Zero(t, b.Rejected())
	assert.Zero(t, b.Transitions(backoff.BreakerClosed), "the initial state is not a change")
	require.True(t, call(t, b, errDown)) // trips
	require.False(t, call(t, b, nil))    // refused while open
	require.False(t, call(t, b, nil))
	assert.EqualValues(t, 2, b.Rejected())
	clk.Step(time.Second)
	p, err := b.Allow() // the probe
	require.NoError(t, err)
	require.False(t, call(t, b, nil), "refused: the probe is out")
	assert.EqualValues(t, 3, b.Rejected())
	p.Done(context.Background(), errDown) // re-trips
	clk.Step(2 * time.Second)
	require.True(t, call(t, b, nil)) // a probe that closes it
	assert.Equal(t, backoff.BreakerClosed, b.State())
	assert.EqualValues(t, 2, b.Transitions(backoff.BreakerOpen))
	assert.EqualValues(t, 2, b.Transitions(backoff.BreakerHalfOpen))
	assert.EqualValues(t, 1, b.Transitions(backoff.BreakerClosed))
	assert.Zero(t, b.Transitions(backoff.BreakerState(7)))
	assert.EqualValues(t, 3, b.Rejected())
}
