package backoff_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// TestRetryBudgetRefusalEndsRetryAtOnce: a budget that allows no retry makes
// Retry return after the first attempt, without arming a timer for the hour
// its Schedule asks for, with an error that is both the budget's and fn's.
func TestRetryBudgetRefusalEndsRetryAtOnce(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0, 0, time.Minute, backoff.WithClock(fc))
	calls := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Duration: time.Hour, Steps: 5},
		func(context.Context) error { calls++; return errFlaky },
		backoff.WithClock(fc), backoff.WithRetryBudget(b))
	assert.Equal(t, 1, calls)
	assert.False(t, fc.HasWaiters(), "a refused retry is not waited for")
	assert.ErrorIs(t, err, backoff.ErrRetryBudgetExhausted)
	assert.ErrorIs(t, err, errFlaky)
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, backoff.RetryError{Attempts: 1, Last: errFlaky, Reason: backoff.ErrRetryBudgetExhausted}, *re)
	assert.Equal(t, "backoff: retry stopped after 1 attempt: retry budget exhausted; last error: flaky", err.Error())
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 1, Refused: 1}, b.Snapshot())

	v, err := backoff.RetryValue(context.Background(), backoff.Schedule{Duration: time.Hour, Steps: 5},
		func(context.Context) (int, error) { return 7, errFlaky },
		backoff.WithClock(fc), backoff.WithRetryBudget(b))
	assert.Zero(t, v)
	assert.ErrorIs(t, err, backoff.ErrRetryBudgetExhausted)
	assert.ErrorIs(t, err, errFlaky)
}

// TestRetryBudgetDecidesAtTheSameTimeWithMaxElapsedTime: with
// WithMaxElapsedTime, Retry hands the budget the times it has just read (for
// the request and for the decision) instead of the budget reading the clock
// again; the outcome is the one the budget reaches on its own. The budget was
// created a window before Retry starts, so a request counted at the budget's
// creation would have left the window, and a decision at the time elapsed
// since Retry's start, rather than since the budget's creation, would still
// count the request.
func TestRetryBudgetDecidesAtTheSameTimeWithMaxElapsedTime(t *testing.T) {
	const window = 10 * time.Second
	for _, tc := range []struct {
		name    string
		step    time.Duration // what the first attempt takes
		allowed bool
	}{
		{"request still in the window", window * 95 / 100, true},
		{"request left the window", window * 105 / 100, false},
	} {
		for _, maxElapsed := range []time.Duration{0, time.Hour} {
			t.Run(fmt.Sprintf("%s/max-elapsed=%v", tc.name, maxElapsed), func(t *testing.T) {
				fc := testingclock.NewFakeClock(epoch)
				b := backoff.NewRetryBudget(1, 0, window, backoff.WithClock(fc))
				fc.Step(window)
				calls := 0
				opts := []backoff.Option{backoff.WithClock(fc), backoff.WithRetryBudget(b)}
				if maxElapsed > 0 {
					opts = append(opts, backoff.WithMaxElapsedTime(maxElapsed))
				}
				err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 2},
					func(context.Context) error {
						if calls++; calls == 1 {
							fc.Step(tc.step)
							return errFlaky
						}
						return nil
					}, opts...)
				if tc.allowed {
					require.NoError(t, err)
					assert.Equal(t, 2, calls)
					assert.Equal(t, int64(1), b.Snapshot().Retries)
				} else {
					require.ErrorIs(t, err, backoff.ErrRetryBudgetExhausted)
					assert.Equal(t, 1, calls)
					assert.Equal(t, int64(1), b.Snapshot().Refused)
				}
			})
		}
	}
}

// TestRetryBudgetSuccessSpendsNoRetry: a first attempt that succeeds records
// a request and nothing else; retries that the budget allows go ahead.
func TestRetryBudgetRetryWithinBudget(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, time.Minute, backoff.WithClock(fc))
	require.NoError(t, backoff.Retry(context.Background(), backoff.Schedule{Steps: 5},
		func(context.Context) error { return nil }, backoff.WithClock(fc), backoff.WithRetryBudget(b)))
	calls := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 5},
		func(context.Context) error {
			if calls++; calls < 3 {
				return errFlaky
			}
			return nil
		}, backoff.WithClock(fc), backoff.WithRetryBudget(b))
	require.NoError(t, err, "two requests pay for two retries")
	assert.Equal(t, 3, calls)
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 2, Retries: 2}, b.Snapshot())
}

func TestRetryBudgetOnError(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0, 0.1, 10*time.Second, backoff.WithClock(fc)) // a floor of one retry
	calls := 0
	err := backoff.OnError(backoff.Schedule{Steps: 5}, nil,
		func() error { calls++; return errFlaky }, backoff.WithClock(fc), backoff.WithRetryBudget(b))
	assert.Equal(t, 2, calls, "the first call and the one retry of the floor")
	assert.ErrorIs(t, err, backoff.ErrRetryBudgetExhausted)
	assert.ErrorIs(t, err, errFlaky)
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 2, re.Attempts)
}

// TestRetryBudgetSharedByRetryAndQueue: two Retry loops and a queue spend from
// one budget, in this order, with ratio 1 (one retry per request): the queue's
// hand-out and each Retry's first attempt are requests; the first loop's
// retries leave room for one more, which the second loop takes, and the
// queue's retry is refused, but not dropped.
func TestRetryBudgetSharedByRetryAndQueue(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, 10*time.Second, backoff.WithClock(fc))
	q := backoff.NewRateLimitingQueue[string](
		backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Minute),
		backoff.WithClock(fc), backoff.WithRetryBudget(b))
	defer q.ShutDown()
	q.Add("x")
	item, _ := get(t, q.Get, fc) // request 1

	failing := func(context.Context) error { return errFlaky }
	s := backoff.Schedule{Steps: 3}
	err := backoff.Retry(context.Background(), s, failing, backoff.WithClock(fc), backoff.WithRetryBudget(b))
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted, "request 2 and retries 1 and 2")
	err = backoff.Retry(context.Background(), s, failing, backoff.WithClock(fc), backoff.WithRetryBudget(b))
	assert.ErrorIs(t, err, backoff.ErrRetryBudgetExhausted, "request 3 and retry 3; retry 4 refused")
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 2, re.Attempts)

	q.AddRateLimited(item) // refused: retry 4 does not fit either
	q.Done(item)
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 3, Retries: 3, Refused: 2}, b.Snapshot())
	at, ok := q.NextReadyAt()
	require.True(t, ok, "the refused item waits")
	// With no floor, only new requests can make room: the item comes back a
	// window later, plus up to one window.
	assert.False(t, at.Before(epoch.Add(10*time.Second)), "ready at %v", at.Sub(epoch))
	assert.True(t, at.Before(epoch.Add(20*time.Second)), "ready at %v", at.Sub(epoch))
	fc.SetTime(at)
	item, _ = get(t, q.Get, fc)
	assert.Equal(t, "x", item)
	q.Done(item)
}

// TestRetryBudgetQueueRefusedRetriesWaitWithinTheCap: with a budget that
// refuses every retry, failed items are requeued, each at its own time: when
// the budget would allow a retry plus a spread of up to one window, but
// never later than the limiter's cap; at ShutDownWithDrain none is lost.
func TestRetryBudgetQueueRefusedRetriesWaitWithinTheCap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limiter  backoff.RateLimiter[int]
		from, to time.Duration // the range of the ready times
	}{
		{"budget's time", backoff.NewItemExponentialFailureRateLimiter[int](time.Millisecond, time.Hour), 10 * time.Second, 20 * time.Second},
		{"limiter's cap", backoff.NewWithMaxWaitRateLimiter[int](backoff.NewItemExponentialFailureRateLimiter[int](time.Millisecond, time.Hour), 3*time.Second), 3 * time.Second, 3 * time.Second},
		{"limiter's delay", backoff.NewItemFastSlowRateLimiter[int](time.Minute, time.Minute, 1), time.Minute, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := testingclock.NewFakeClock(epoch)
			b := backoff.NewRetryBudget(0, 0, 10*time.Second, backoff.WithClock(fc))
			q := backoff.NewRateLimitingQueue(tc.limiter, backoff.WithClock(fc), backoff.WithRetryBudget(b))
			const n = 100
			for i := range n {
				q.Add(i)
			}
			for range n {
				item, _ := q.Get()
				q.AddRateLimited(item)
				q.Done(item)
			}
			assert.Equal(t, int64(n), b.Snapshot().Refused)
			q.ShutDownWithDrain()
			waiting := q.TakeWaiting()
			require.Len(t, waiting, n, "no refused item is lost")
			distinct := map[time.Time]bool{}
			for _, w := range waiting {
				d := w.ReadyAt.Sub(epoch)
				assert.True(t, d >= tc.from && d <= tc.to, "ready after %v, want in [%v, %v]", d, tc.from, tc.to)
				distinct[w.ReadyAt] = true
			}
			if tc.from != tc.to {
				assert.Greater(t, len(distinct), n/2, "refused items come back at different times")
			}
		})
	}
}

// TestRetryBudgetQueueConverges runs workers over a queue whose items each
// fail three times, with a 10% budget: every item is processed to success,
// none by two workers at once, within the limiter's cap of each failure.
func TestRetryBudgetQueueConverges(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0.1, 0, 10*time.Second, backoff.WithClock(fc))
	adds := &addCounter{}
	limiter := backoff.NewItemExponentialFailureRateLimiter[int](10*time.Millisecond, 2*time.Second)
	q := backoff.NewRateLimitingQueue[int](limiter, backoff.WithClock(fc), backoff.WithRetryBudget(b), backoff.WithMetrics(adds))
	defer q.ShutDown() // a failed wait below ends the test: let the workers go
	const n, failures, workers = 200, 3, 4
	var mu sync.Mutex
	inFlight := map[int]bool{}
	attempts := map[int]int{}
	succeeded := 0
	settled := make(chan struct{}, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				if inFlight[item] {
					t.Errorf("item %d handed out while in flight", item)
				}
				inFlight[item] = true
				attempts[item]++
				fail := attempts[item] <= failures
				if !fail {
					succeeded++
				}
				mu.Unlock()
				if fail {
					q.AddRateLimited(item)
				} else {
					q.Forget(item)
				}
				mu.Lock()
				delete(inFlight, item)
				mu.Unlock()
				q.Done(item)
				settled <- struct{}{}
			}
		}()
	}
	for i := range n {
		q.Add(i)
	}
	// Every item that became queued is handed out once and settled once:
	// when the settled count catches up with the adds, the workers are idle
	// and the clock can move to the next ready time.
	var stepped time.Time // the last time the clock was set to
	for done := int64(0); ; {
		for done < adds.adds.Load() {
			waitFor(t, fmt.Sprintf("a worker to settle item %d of %d queued so far", done+1, adds.adds.Load()), settled, fc)
			done++
		}
		at, ok := q.NextReadyAt()
		if done < adds.adds.Load() {
			continue // NextReadyAt queued items that were due: process them first
		}
		if !ok {
			break
		}
		// Every step queues at least the item due then; the same time twice
		// means it stayed waiting although due (and this loop would spin).
		require.False(t, at.Equal(stepped), "an item due at %v was not queued when the clock reached it", at.Sub(epoch))
		fc.SetTime(at)
		stepped = at
	}
	waitForCall(t, "ShutDownWithDrain to return", q.ShutDownWithDrain, fc)
	waitForCall(t, "the workers to return after the shutdown", wg.Wait, fc)
	assert.Equal(t, n, succeeded, "every item converges")
	for i := range n {
		assert.Equal(t, failures+1, attempts[i], "item %d", i)
	}
	s := b.Snapshot()
	assert.Positive(t, s.Refused, "the budget refused retries")
	assert.LessOrEqual(t, fc.Since(epoch), failures*2*time.Second, "no wait longer than the limiter's cap of 2 s")
	assert.Empty(t, q.TakeWaiting())
}

// addCounter is a QueueMetrics that counts the items that became queued.
type addCounter struct {
	backoff.NopQueueMetrics
	adds atomic.Int64
}

func (c *addCounter) IncAdds() { c.adds.Add(1) }

// TestRetryBudgetQueueRefusedRetryWaitsForTheBudget: a floor of one retry per
// window lets the first retry through; the second waits until the first has
// left the window (the budget counts retries over 11 buckets of 1 s), plus a
// spread of up to one window.
func TestRetryBudgetQueueRefusedRetryWaitsForTheBudget(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0, 0.1, 10*time.Second, backoff.WithClock(fc))
	q := backoff.NewRateLimitingQueue[string](
		backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Hour),
		backoff.WithClock(fc), backoff.WithRetryBudget(b))
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	for range 2 {
		item, _ := q.Get()
		q.AddRateLimited(item)
		q.Done(item)
	}
	waiting := q.TakeWaiting()
	require.Len(t, waiting, 2)
	assert.Equal(t, epoch.Add(time.Millisecond), waiting[0].ReadyAt, "the allowed retry waits the limiter's delay")
	d := waiting[1].ReadyAt.Sub(epoch)
	assert.True(t, d >= 11*time.Second && d < 21*time.Second, "the refused retry waits %v", d)
}

// TestRetryBudgetWithPriorities: the priority forms of the queue use the
// budget as the plain ones do: an item handed out by GetWithPriority or
// GetContextWithPriority (RunWorkers' way) is a request, and a rate-limited
// AddWithOptions is a retry that the budget may refuse, whatever its
// priority.
func TestRetryBudgetWithPriorities(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, 10*time.Second, backoff.WithClock(fc))
	q := backoff.NewRateLimitingQueue[string](
		backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Minute),
		backoff.WithClock(fc), backoff.WithRetryBudget(b))
	defer q.ShutDown()

	q.AddWithOptions(backoff.AddOptions{Priority: 5}, "a", "b")
	a, prio, shutdown := q.GetWithPriority()
	require.False(t, shutdown)
	assert.Equal(t, 5, prio)
	bItem, _, err := q.GetContextWithPriority(context.Background())
	require.NoError(t, err)
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 2, Balance: 2}, b.Snapshot(), "two items handed out, two requests")

	q.AddWithOptions(backoff.AddOptions{RateLimited: true, Priority: 5}, a, bItem)
	q.AddWithOptions(backoff.AddOptions{RateLimited: true, Priority: 5}, "c")
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 2, Retries: 2, Refused: 1}, b.Snapshot(),
		"two retries fit a ratio of 1 over two requests; the third is refused")
	q.Done(a)
	q.Done(bItem)
}
