package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

// These tests cover issue 6 §4, faults in user code, where the tests of each
// area stop: a panic in a callback after the code under test has armed
// timers (the deferred clean-up must still run), the context a poll
// condition received once its panic has unwound, the timer a non-sliding
// loop arms before f panics, and a worker pool whose handler panics many
// times for every item.

// relBoom is the value the callbacks below panic with.
type relBoom struct{ call int }

// relCatch runs f on a new goroutine and returns a channel closed when f has
// returned or panicked, and a pointer to what it panicked with (nil if it
// returned). Read the pointer only after done is closed.
func relCatch(f func()) (done <-chan struct{}, recovered *any) {
	ch := make(chan struct{})
	var r any
	go func() {
		defer close(ch)
		defer func() { r = recover() }()
		f()
	}()
	return ch, &r
}

// relFaultCase runs one callback-taking function of the package with a
// callback that fails calls-1 times (an error, or a condition not yet met)
// and then calls panicky. condCtx, if the function passes a context to the
// callback, receives the last one.
type relFaultCase struct {
	name string
	run  func(hc *handshakeClock, panicky func(call int), condCtx *context.Context)
}

var errRelTransient = errors.New("transient")

// relFaultCases are the functions whose callback's panic propagates (their
// docs say so; WithPanicHandler does not concern them). Every schedule waits
// 1s between calls and allows 5 calls.
var relFaultCases = []relFaultCase{
	{"Retry", func(hc *handshakeClock, panicky func(int), _ *context.Context) {
		call := 0
		_ = backoff.Retry(context.Background(), backoff.Schedule{Duration: time.Second, Steps: 5}, func(context.Context) error {
			call++
			panicky(call)
			return errRelTransient
		}, backoff.WithClock(hc))
	}},
	{"RetryValue", func(hc *handshakeClock, panicky func(int), _ *context.Context) {
		call := 0
		_, _ = backoff.RetryValue(context.Background(), backoff.Schedule{Duration: time.Second, Steps: 5}, func(context.Context) (int, error) {
			call++
			panicky(call)
			return 0, errRelTransient
		}, backoff.WithClock(hc))
	}},
	{"OnError", func(hc *handshakeClock, panicky func(int), _ *context.Context) {
		call := 0
		_ = backoff.OnError(backoff.Schedule{Duration: time.Second, Steps: 5}, nil, func() error {
			call++
			panicky(call)
			return errRelTransient
		}, backoff.WithClock(hc))
	}},
	{"ExponentialBackoff", func(hc *handshakeClock, panicky func(int), _ *context.Context) {
		call := 0
		_ = backoff.ExponentialBackoff(backoff.Schedule{Duration: time.Second, Steps: 5}, func() (bool, error) {
			call++
			panicky(call)
			return false, nil
		}, backoff.WithClock(hc))
	}},
	{"ExponentialBackoffWithContext", func(hc *handshakeClock, panicky func(int), condCtx *context.Context) {
		call := 0
		_ = backoff.ExponentialBackoffWithContext(context.Background(), backoff.Schedule{Duration: time.Second, Steps: 5},
			func(ctx context.Context) (bool, error) {
				*condCtx = ctx
				call++
				panicky(call)
				return false, nil
			}, backoff.WithClock(hc))
	}},
	{"PollUntilContextCancel", func(hc *handshakeClock, panicky func(int), condCtx *context.Context) {
		call := 0
		_ = backoff.PollUntilContextCancel(context.Background(), time.Second, true, func(ctx context.Context) (bool, error) {
			*condCtx = ctx
			call++
			panicky(call)
			return false, nil
		}, backoff.WithClock(hc))
	}},
	{"PollUntilContextTimeout", func(hc *handshakeClock, panicky func(int), condCtx *context.Context) {
		call := 0
		_ = backoff.PollUntilContextTimeout(context.Background(), time.Second, time.Hour, true, func(ctx context.Context) (bool, error) {
			*condCtx = ctx
			call++
			panicky(call)
			return false, nil
		}, backoff.WithClock(hc))
	}},
}

// TestReliabilityCallbackPanicPropagates: a panic in fn or in a condition
// propagates with its own value (documented for each function), on the
// first call or on a later one after waits on the clock, and leaves nothing
// armed on the clock: the reused wait timer and PollUntilContextTimeout's
// timeout are released by the unwinding panic. The timeout context the
// condition received is then done (Canceled, as after a context.WithTimeout's
// cancel).
func TestReliabilityCallbackPanicPropagates(t *testing.T) {
	for _, tc := range relFaultCases {
		for _, panicAt := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/call%d", tc.name, panicAt), func(t *testing.T) {
				hc := newHandshakeClock()
				var calls int
				var condCtx context.Context
				done, recovered := relCatch(func() {
					tc.run(hc, func(call int) {
						calls = call
						if call == panicAt {
							panic(relBoom{call})
						}
					}, &condCtx)
				})
				hc.drive(t, done)
				assert.Equal(t, relBoom{panicAt}, *recovered, "the panic propagates with its own value")
				assert.Equal(t, panicAt, calls, "no call after the panic")
				assert.Equal(t, time.Duration(panicAt-1)*time.Second, hc.elapsed(), "one 1s wait between calls")
				assert.False(t, hc.HasWaiters(), "a timer was left armed on the clock after the panic")
				if tc.name == "PollUntilContextTimeout" {
					require.NotNil(t, condCtx)
					assert.ErrorIs(t, condCtx.Err(), context.Canceled, "the condition's timeout context is released")
				}
			})
		}
	}
}

// TestReliabilityNonSlidingLoopPanicStopsTimer: a non-sliding loop asks its
// manager for the next wait before f runs. When f then panics without a
// [backoff.WithPanicHandler], the panic propagates and the timer already
// armed is stopped, so nothing stays parked on the clock. With a sliding
// loop nothing is armed while f runs; the check holds for it too.
func TestReliabilityNonSlidingLoopPanicStopsTimer(t *testing.T) {
	for _, h := range loopHelpers {
		t.Run(h.name, func(t *testing.T) {
			hc := newHandshakeClock()
			ctx, stop, end := wtStopper()
			defer end()
			runs := 0
			done, recovered := relCatch(func() {
				h.run(ctx, stop, func() {
					runs++
					if runs == 2 {
						panic(relBoom{runs})
					}
				}, backoff.WithClock(hc))
			})
			// Step the one wait between the runs, and not the one a
			// non-sliding loop arms before the second run.
			hc.Step(hc.nextArmed(t, done))
			waitFor(t, "the loop to return after stop", done, hc)
			assert.Equal(t, relBoom{2}, *recovered)
			assert.Equal(t, 2, runs)
			assert.Equal(t, time.Second, hc.elapsed())
			assert.False(t, hc.HasWaiters(), "the loop's next timer was left armed after the panic")
		})
	}
}

// relSignalHandler is a slog.Handler that sends the message of every record
// on ch. The workers log a panic after the item has been requeued, so a
// message received means the requeue is registered with the clock.
type relSignalHandler struct{ ch chan<- string }

func (h relSignalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h relSignalHandler) Handle(_ context.Context, r slog.Record) error {
	h.ch <- r.Message
	return nil
}
func (h relSignalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h relSignalHandler) WithGroup(string) slog.Handler      { return h }

// TestReliabilityWorkersSurviveRepeatedPanics: 4 workers, 40 items whose
// handler panics on its first 3 calls and succeeds on the 4th. Each panic
// requeues the item with the limiter's delay (1s, 2s, 4s); the test steps
// the FakeClock by 4s after every logged panic, which releases every
// requeue registered so far. Then 4 more items meet at a barrier that only
// opens with 4 workers inside it: after 120 panics the pool still has its
// size. Only once the barrier has opened are the counts checked: every
// worker is then past the settling of its last item (its Forget and its
// log), which a success signalled from inside the handler is not. Every
// item is processed exactly 4 times and never by two workers at once, no
// item is lost, 120 panics are logged, and the failure counts are
// forgotten after the success.
func TestReliabilityWorkersSurviveRepeatedPanics(t *testing.T) {
	const (
		workers   = 4
		items     = 40
		panicsPer = 3
		maxDelay  = 4 * time.Second
	)
	fc := newQueueClock()
	logs := make(chan string, items*panicsPer)
	q := backoff.NewRateLimitingQueue[int](
		backoff.NewItemExponentialFailureRateLimiter[int](time.Second, time.Hour),
		backoff.WithClock(fc), backoff.WithLogger(slog.New(relSignalHandler{logs})))
	for i := 0; i < items; i++ {
		q.Add(i)
	}

	var (
		calls    [items + workers]atomic.Int32
		holders  [items + workers]atomic.Int32
		overlaps atomic.Int32
		barrier  sync.WaitGroup
	)
	barrier.Add(workers)
	succeeded := make(chan int, items+workers)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	poolDone := wtGo(func() {
		backoff.RunWorkers(ctx, q, workers, func(_ context.Context, item int) (backoff.Result, error) {
			if holders[item].Add(1) != 1 {
				overlaps.Add(1)
			}
			defer holders[item].Add(-1)
			if item >= items { // a barrier item
				barrier.Done()
				barrier.Wait()
				succeeded <- item
				return backoff.Result{}, nil
			}
			if calls[item].Add(1) <= panicsPer {
				panic(relBoom{item})
			}
			succeeded <- item
			return backoff.Result{}, nil
		})
	})

	panicsSeen, done := 0, 0
	for done < items {
		select {
		case msg := <-logs:
			require.Equal(t, "backoff: handler panicked; item requeued with backoff", msg)
			panicsSeen++
			fc.Step(maxDelay)
		case <-succeeded:
			done++
		case <-time.After(waitTimeout):
			t.Fatalf("timed out (%v real time) waiting for all %d items to succeed: %d panics logged, %d items done; %s",
				waitTimeout, items, panicsSeen, done, describeClock(fc))
		}
	}

	for i := items; i < items+workers; i++ {
		q.Add(i)
	}
	for i := 0; i < workers; i++ {
		waitFor(t, fmt.Sprintf("the barrier to open with %d workers (fewer are left?)", workers), succeeded, fc)
	}
	// Every worker is inside the barrier or past it: the last panic's log
	// has been written and the last success has been settled.
	for len(logs) > 0 {
		require.Equal(t, "backoff: handler panicked; item requeued with backoff", <-logs)
		panicsSeen++
	}
	assert.Equal(t, items*panicsPer, panicsSeen)
	for i := 0; i < items; i++ {
		assert.Equal(t, int32(panicsPer+1), calls[i].Load(), "item %d", i)
		assert.Zero(t, q.NumRequeues(i), "item %d: Forget after the success", i)
	}
	assert.Zero(t, q.Len(), "nothing left queued")
	assert.Zero(t, overlaps.Load(), "an item was held by two workers at once")
	cancel()
	waitFor(t, "RunWorkers to return after cancel", poolDone, fc)
}
