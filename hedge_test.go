package backoff_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
)

// The tests of this file drive the fake clock from inside the first
// attempt, which runs on Retry's goroutine after the hedge's timer is set:
// a step that fires the timer starts the hedge's goroutine before Step
// returns, so what has or has not started is known without waiting.

const hedgeDelay = 10 * time.Millisecond

var errHedgeTest = errors.New("attempt failed")

// TestHedgeStartsExactlyAfterTheDelay: nothing starts before the delay; the
// hedge starts at it, wins, and the first attempt sees its context cancelled.
func TestHedgeStartsExactlyAfterTheDelay(t *testing.T) {
	fc := newQueueClock()
	var calls atomic.Int32
	hedgeAt := make(chan time.Time, 1)
	var primaryErr error
	v, err := backoff.RetryValue(context.Background(), backoff.Schedule{Steps: 1}, func(ctx context.Context) (string, error) {
		if calls.Add(1) == 1 {
			fc.Step(hedgeDelay - time.Nanosecond)
			assert.Equal(t, 1, fc.Waiters(), "1ns before the delay the hedge's timer still waits")
			assert.Equal(t, int32(1), calls.Load(), "no hedge before the delay")
			fc.Step(time.Nanosecond)
			assert.Equal(t, epoch.Add(hedgeDelay), <-hedgeAt, "the hedge starts at the delay")
			<-ctx.Done()
			primaryErr = ctx.Err()
			return "", ctx.Err()
		}
		hedgeAt <- fc.Now()
		return "hedge", nil
	}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay))
	require.NoError(t, err)
	assert.Equal(t, "hedge", v, "the first success wins")
	assert.ErrorIs(t, primaryErr, context.Canceled, "the loser is cancelled through its context")
	assert.Equal(t, int32(2), calls.Load())
	assert.Zero(t, fc.Waiters(), "no timer outlives the call")
}

// TestHedgeLosersAreCancelledAndWaitedFor: when the first attempt wins, the
// hedge in flight is cancelled, and Retry returns only once it has returned.
func TestHedgeLosersAreCancelledAndWaitedFor(t *testing.T) {
	fc := newQueueClock()
	var calls atomic.Int32
	started := make(chan struct{})
	var hedgeErr error
	var hedgeReturned atomic.Bool
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			fc.Step(hedgeDelay)
			<-started
			return nil
		}
		close(started)
		<-ctx.Done()
		hedgeErr = ctx.Err()
		hedgeReturned.Store(true)
		return ctx.Err()
	}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay))
	require.NoError(t, err)
	assert.True(t, hedgeReturned.Load(), "Retry returned only after the loser")
	assert.ErrorIs(t, hedgeErr, context.Canceled)
}

// TestHedgeNeverStartsWhenTheAttemptAnswersInTime: an attempt that answers
// before the delay is alone, and its timer is gone.
func TestHedgeNeverStartsWhenTheAttemptAnswersInTime(t *testing.T) {
	fc := newQueueClock()
	calls := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(ctx context.Context) error {
		calls++
		fc.Step(hedgeDelay - time.Nanosecond)
		return nil
	}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay))
	require.NoError(t, err)
	assert.Equal(t, 1, calls)
	assert.Zero(t, fc.Waiters())
	fc.Step(time.Hour)
	assert.Equal(t, 1, calls, "no hedge after the call")
}

// TestHedgeAtMostMaxHedges: with WithMaxHedges(2), the k-th hedge starts k
// delays after the first attempt, and no third one ever does.
func TestHedgeAtMostMaxHedges(t *testing.T) {
	fc := newQueueClock()
	var calls, inflight, peak atomic.Int32
	started := make(chan time.Time, 2)
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(ctx context.Context) error {
		n := calls.Add(1)
		cur := inflight.Add(1)
		defer inflight.Add(-1)
		for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
		}
		if n == 1 {
			fc.Step(hedgeDelay)
			assert.Equal(t, epoch.Add(hedgeDelay), <-started)
			fc.Step(hedgeDelay)
			assert.Equal(t, epoch.Add(2*hedgeDelay), <-started)
			assert.Zero(t, fc.Waiters(), "the last hedge arms no timer")
			fc.Step(10 * hedgeDelay)
			return nil
		}
		started <- fc.Now()
		<-ctx.Done()
		return ctx.Err()
	}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay), backoff.WithMaxHedges(2))
	require.NoError(t, err)
	assert.Equal(t, int32(3), calls.Load())
	assert.Equal(t, int32(3), peak.Load(), "at most 1 + WithMaxHedges attempts in flight")
}

// TestHedgesAreChargedToTheRetryBudget: a budget of one retry per window
// lets the hedge go, and then refuses the retry.
func TestHedgesAreChargedToTheRetryBudget(t *testing.T) {
	fc := newQueueClock()
	budget := backoff.NewRetryBudget(0, 1, time.Second, backoff.WithClock(fc))
	var calls atomic.Int32
	hedgeFailed := make(chan struct{})
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 3, Duration: time.Millisecond}, func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			fc.Step(hedgeDelay)
			<-hedgeFailed
			return errHedgeTest
		}
		close(hedgeFailed)
		return errHedgeTest
	}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay), backoff.WithRetryBudget(budget))
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, backoff.ErrRetryBudgetExhausted, "the hedge spent the one retry")
	assert.Equal(t, 2, re.Attempts, "the hedge counts as an attempt")
	assert.Equal(t, int32(2), calls.Load())
}

// budgetRefusals is a RetryBudgetMetrics that reports refusals on a channel.
type budgetRefusals chan struct{}

func (budgetRefusals) IncRequests()  {}
func (budgetRefusals) IncRetries()   {}
func (s budgetRefusals) IncRefused() { s <- struct{}{} }

// TestHedgeBudgetRefusalSuppressesTheHedgeOnly: a budget that refuses
// suppresses the hedge, and never cancels the attempt in flight, which goes
// on and wins (failsafe-go #141 cancelled it).
func TestHedgeBudgetRefusalSuppressesTheHedgeOnly(t *testing.T) {
	fc := newQueueClock()
	refused := make(budgetRefusals, 1)
	budget := backoff.NewRetryBudget(0, 0, time.Second, backoff.WithClock(fc), backoff.WithRetryBudgetMetrics(refused))
	var calls atomic.Int32
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(ctx context.Context) error {
		calls.Add(1)
		fc.Step(hedgeDelay)
		<-refused
		assert.NoError(t, ctx.Err(), "the attempt in flight is not cancelled")
		fc.Step(10 * hedgeDelay)
		return nil
	}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay), backoff.WithRetryBudget(budget))
	require.NoError(t, err)
	assert.Equal(t, int32(1), calls.Load(), "the refused hedge was not sent")
}

// TestHedgePermanentErrorEndsTheCall: a Permanent error from a hedge ends
// the call at once, cancelling the first attempt, however many attempts the
// schedule has left.
func TestHedgePermanentErrorEndsTheCall(t *testing.T) {
	fc := newQueueClock()
	var calls atomic.Int32
	var primaryErr error
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 5, Duration: time.Second}, func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			fc.Step(hedgeDelay)
			<-ctx.Done()
			primaryErr = ctx.Err()
			return ctx.Err()
		}
		return backoff.Permanent(errHedgeTest)
	}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay))
	assert.ErrorIs(t, err, errHedgeTest)
	assert.True(t, backoff.IsPermanent(err), "returned as the hedge returned it")
	assert.ErrorIs(t, primaryErr, context.Canceled)
	assert.Equal(t, int32(2), calls.Load())
}

// TestHedgeRoundThatFailsContinuesTheSchedule: when the attempt and its
// hedge both fail, Retry waits and tries again, as without hedging;
// RetryError.Attempts counts the hedge, WithNotify sees one call per round.
func TestHedgeRoundThatFailsContinuesTheSchedule(t *testing.T) {
	fc := newQueueClock()
	var calls atomic.Int32
	errFirst, errHedge, errSecond := errors.New("first"), errors.New("hedge"), errors.New("second")
	hedgeStarted := make(chan struct{})
	var notified []int
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 2, Duration: time.Second}, func(ctx context.Context) error {
		switch calls.Add(1) {
		case 1:
			fc.Step(hedgeDelay)
			<-hedgeStarted
			return errFirst
		case 2:
			close(hedgeStarted)
			return errHedge
		default:
			return errSecond // the second round answers before its delay: no hedge
		}
	}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay), backoff.WithNotify(func(attempt int, err error, next time.Duration) {
		notified = append(notified, attempt)
		assert.True(t, errors.Is(err, errFirst) || errors.Is(err, errHedge), "the round's last error: %v", err)
		fc.Step(next)
	}))
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
	assert.ErrorIs(t, err, errSecond)
	assert.Equal(t, 3, re.Attempts, "two rounds, one hedge")
	assert.Equal(t, []int{1}, notified)
}

// TestHedgeReleaseGetsTheLateLoserOnce: RetryValue returns the winner's
// value and hands the loser's, which came later, to WithHedgeRelease once,
// whichever attempt won.
func TestHedgeReleaseGetsTheLateLoserOnce(t *testing.T) {
	for _, hedgeWins := range []bool{true, false} {
		name := "first attempt wins"
		if hedgeWins {
			name = "hedge wins"
		}
		t.Run(name, func(t *testing.T) {
			fc := newQueueClock()
			var calls atomic.Int32
			var mu sync.Mutex
			var released []any
			started := make(chan struct{})
			v, err := backoff.RetryValue(context.Background(), backoff.Schedule{Steps: 1}, func(ctx context.Context) (string, error) {
				if calls.Add(1) == 1 {
					fc.Step(hedgeDelay)
					<-started
					if hedgeWins {
						<-ctx.Done()
						return "first", nil // an answer that came as the cancellation did
					}
					return "first", nil
				}
				if hedgeWins {
					close(started)
					return "hedge", nil
				}
				close(started)
				<-ctx.Done()
				return "hedge", nil
			}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay), backoff.WithHedgeRelease(func(v any) {
				mu.Lock()
				defer mu.Unlock()
				released = append(released, v)
			}))
			require.NoError(t, err)
			winner, loser := "first", "hedge"
			if hedgeWins {
				winner, loser = loser, winner
			}
			assert.Equal(t, winner, v)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []any{loser}, released, "released once, before RetryValue returned")
		})
	}
}

// TestHedgeCallerCancellationCancelsEveryAttempt: the end of the caller's
// context reaches the first attempt and its hedge.
func TestHedgeCallerCancellationCancelsEveryAttempt(t *testing.T) {
	fc := newQueueClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	started := make(chan struct{})
	var hedgeErr error
	err := backoff.Retry(ctx, backoff.Schedule{Steps: 5, Duration: time.Second}, func(actx context.Context) error {
		if calls.Add(1) == 1 {
			fc.Step(hedgeDelay)
			<-started
			cancel()
			<-actx.Done()
			return actx.Err()
		}
		close(started)
		<-actx.Done()
		hedgeErr = actx.Err()
		return actx.Err()
	}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay))
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, hedgeErr, context.Canceled)
	assert.Equal(t, 2, re.Attempts)
}

// TestHedgeFollowsTheLearnedDelay: with WithHedgeDelay, the hedge starts at
// the learned delay, not at WithHedge's, which is the one used before the
// HedgeDelay has learned; each attempt's latency is reported to it.
func TestHedgeFollowsTheLearnedDelay(t *testing.T) {
	hd := backoff.NewHedgeDelay(0.95, time.Millisecond, time.Second)
	_, ok := hd.Delay()
	require.False(t, ok)
	for range 100 {
		hd.Observe(30 * time.Millisecond)
	}
	learned, ok := hd.Delay()
	require.True(t, ok)
	require.InDelta(t, float64(30*time.Millisecond), float64(learned), float64(3*time.Millisecond))

	fc := newQueueClock()
	var calls atomic.Int32
	hedgeAt := make(chan time.Time, 1)
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			fc.Step(learned - time.Nanosecond)
			assert.Equal(t, int32(1), calls.Load())
			fc.Step(time.Nanosecond)
			assert.Equal(t, epoch.Add(learned), <-hedgeAt)
			<-ctx.Done()
			return ctx.Err()
		}
		hedgeAt <- fc.Now()
		fc.Step(time.Millisecond)
		return nil
	}, backoff.WithClock(fc), backoff.WithHedge(time.Hour), backoff.WithHedgeDelay(hd))
	require.NoError(t, err)
}

// TestHedgedCallWhoseHedgeNeverFiresAllocatesLessThanATimer: what a hedged
// call whose attempt answers before the delay costs beyond a plain call is
// one allocation, the first attempt's own context (fn may keep it, so it is
// never reused); the timer, with the rest of the round's state, is kept
// across calls. That is less than the timer itself (on the real clock,
// time.AfterFunc's timer and clock.RealClock's wrapper). An fn that calls
// ctx.Done() adds the context's channel, and with a ctx that can end, the
// registration with it (context.AfterFunc), as context.WithCancel would.
func TestHedgedCallWhoseHedgeNeverFiresAllocatesLessThanATimer(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops what the round keeps")
	}
	ctx := context.Background()
	s := backoff.Schedule{Steps: 1}
	fn := func(context.Context) error { return nil }
	hedge := backoff.WithHedge(time.Hour)
	plain := testing.AllocsPerRun(1000, func() { _ = backoff.Retry(ctx, s, fn) })
	hedged := testing.AllocsPerRun(1000, func() { _ = backoff.Retry(ctx, s, fn, hedge) })
	var clk clock.WithDelayedExecution = clock.RealClock{}
	timer := testing.AllocsPerRun(1000, func() { clk.AfterFunc(time.Hour, func() {}).Stop() })
	assert.Zero(t, plain)
	// The timer is two: the runtime's and the clock package's wrapper,
	// which a kept timer needs on the heap (timer measures it unkept).
	assert.GreaterOrEqual(t, timer, 1.0)
	assert.Equal(t, plain+3, hedged, "the first attempt's context and the timer")

	valueFn := func(context.Context) (int, error) { return 1, nil }
	hedgedValue := testing.AllocsPerRun(1000, func() { _, _ = backoff.RetryValue(ctx, s, valueFn, hedge) })
	assert.Equal(t, plain+3, hedgedValue, "RetryValue: the same")

	// On a fake clock the round keeps its timer from call to call.
	fc := newQueueClock()
	withFake := backoff.WithClock(fc)
	plainOnFake := testing.AllocsPerRun(1000, func() { _ = backoff.Retry(ctx, s, fn, withFake) })
	onFake := testing.AllocsPerRun(1000, func() { _ = backoff.Retry(ctx, s, fn, hedge, withFake) })
	assert.Less(t, onFake-plainOnFake, hedged-plain, "fewer than on the real clock: the timer is kept")
}

// BenchmarkRetryHedgeNotFired measures a Retry call with WithHedge whose
// attempt answers before the delay: the cost of hedging that is not needed
// (see TestHedgedCallWhoseHedgeNeverFiresAllocatesLessThanATimer).
func BenchmarkRetryHedgeNotFired(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	s := backoff.Schedule{Steps: 1}
	fn := func(context.Context) error { return nil }
	hedge := backoff.WithHedge(time.Hour)
	for i := 0; i < b.N; i++ {
		if err := backoff.Retry(ctx, s, fn, hedge); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHedgePanicInTheAttemptStopsTheHedges: a panic in the first attempt
// cancels its hedge and waits for it before it goes on up.
func TestHedgePanicInTheAttemptStopsTheHedges(t *testing.T) {
	fc := newQueueClock()
	var calls atomic.Int32
	started := make(chan struct{})
	var hedgeErr error
	assert.PanicsWithValue(t, "boom", func() {
		_ = backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(ctx context.Context) error {
			if calls.Add(1) == 1 {
				fc.Step(hedgeDelay)
				<-started
				panic("boom")
			}
			close(started)
			<-ctx.Done()
			hedgeErr = ctx.Err()
			return ctx.Err()
		}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay), backoff.WithMaxHedges(2))
	})
	assert.ErrorIs(t, hedgeErr, context.Canceled)
	assert.Zero(t, fc.Waiters(), "no timer left")
}

// TestHedgePanicInAHedgeReachesTheCaller: a panic in a hedge's goroutine
// does not end the program: it cancels the first attempt and is raised again
// on Retry's goroutine.
func TestHedgePanicInAHedgeReachesTheCaller(t *testing.T) {
	fc := newQueueClock()
	var calls atomic.Int32
	var primaryErr error
	assert.PanicsWithValue(t, "hedge boom", func() {
		_ = backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(ctx context.Context) error {
			if calls.Add(1) == 1 {
				fc.Step(hedgeDelay)
				<-ctx.Done()
				primaryErr = ctx.Err()
				return ctx.Err()
			}
			panic("hedge boom")
		}, backoff.WithClock(fc), backoff.WithHedge(hedgeDelay))
	})
	assert.ErrorIs(t, primaryErr, context.Canceled)
	assert.Zero(t, fc.Waiters())
}
