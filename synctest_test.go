//go:build go1.25

// synctest.Test panics with the timer channels of Go before 1.23, and a test
// binary gets those whenever its module's go.mod says go 1.22 or less (as
// ours does): GODEBUG asynctimerchan=1 is then the default. This directive
// turns them off for this package's test binary, that is for all of its tests
// when they are built with Go 1.25 or later; Go 1.22 to 1.24 skip the file
// and run the other tests with their default timers. (A godebug line in
// go.mod would do it too, but Go 1.22 cannot read one.)

//go:debug asynctimerchan=0

package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The tests of this file run the package on its default clock, the real one,
// inside a synctest bubble, where time is virtual: it advances, instantly,
// only when every goroutine of the bubble is durably blocked. Each test
// expects the times that the package's Examples and tests see on a FakeClock:
// code written for the real clock is tested the same way, without WithClock.

// TestSynctestDelayingQueue: items added with a delay come out at their ready
// times, earliest first, as in ExampleNewDelayingQueue.
func TestSynctestDelayingQueue(t *testing.T) {
	bubble(t, func(t *testing.T) {
		q := backoff.NewDelayingQueue[string]()
		defer q.ShutDown()
		start := time.Now()
		q.AddAfter("late", 3*time.Second)
		q.AddAfter("early", time.Second)
		q.AddAfter("early", 2*time.Second) // already waiting: the earlier time wins
		q.Add("now")

		want := []struct {
			item string
			at   time.Duration
		}{{"now", 0}, {"early", time.Second}, {"late", 3 * time.Second}}
		for _, w := range want {
			item, shutdown := q.Get() // blocks until the item is due
			require.False(t, shutdown)
			assert.Equal(t, w.item, item)
			assert.Equal(t, w.at, time.Since(start), "when %s came out", item)
			q.Done(item)
		}
	})
}

// TestSynctestDelayingQueueTimer: the queue's timer moves a due item to the
// queue by itself, with nobody calling Get; synctest.Wait lets the timer's
// callback finish first.
func TestSynctestDelayingQueueTimer(t *testing.T) {
	bubble(t, func(t *testing.T) {
		q := backoff.NewDelayingQueue[string]()
		defer q.ShutDown()
		q.AddAfter("x", time.Minute)
		readyAt, waits := q.NextReadyAt()
		require.True(t, waits)
		assert.Equal(t, time.Now().Add(time.Minute), readyAt)

		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		_, waits = q.NextReadyAt()
		assert.True(t, waits, "a nanosecond early")

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		_, waits = q.NextReadyAt()
		assert.False(t, waits, "due: moved to the queue")
		assert.Equal(t, 1, q.Len())
	})
}

// TestSynctestRescheduleEarlierWakesABlockedGet: a Get already blocked
// while an item waits gets it at the time Reschedule moved it to, not at
// the time it waited for before. No other queue call comes in between: the
// queue's timer alone must follow the move, earlier and then later.
func TestSynctestRescheduleEarlierWakesABlockedGet(t *testing.T) {
	bubble(t, func(t *testing.T) {
		q := backoff.NewDelayingQueue[string]()
		defer q.ShutDown()
		start := time.Now()
		got := make(chan time.Duration)
		go func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				got <- time.Since(start)
				q.Done(item)
			}
		}()

		q.AddAfter("x", time.Minute)
		synctest.Wait() // Get is blocked
		q.Reschedule("x", time.Second)
		assert.Equal(t, time.Second, <-got, "moved earlier")

		q.AddAfter("x", time.Minute) // at 1 s: due at 61 s
		synctest.Wait()
		q.Reschedule("x", 2*time.Minute)
		assert.Equal(t, time.Second+2*time.Minute, <-got, "moved later")
	})
}

// TestSynctestParkWakesABlockedGetAtMaxWait: a Get already blocked on an
// empty queue gets an item parked after it, whose ready function never
// turns true, at the end of its maxWait: the park arms the queue's timer,
// which no other call would.
func TestSynctestParkWakesABlockedGetAtMaxWait(t *testing.T) {
	bubble(t, func(t *testing.T) {
		q := backoff.NewDelayingQueue[string]()
		defer q.ShutDown()
		start := time.Now()
		type got struct {
			item string
			at   time.Duration
			err  error
		}
		ch := make(chan got, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			item, err := q.GetContext(ctx)
			ch <- got{item, time.Since(start), err}
		}()
		synctest.Wait() // GetContext is blocked
		q.Park("x", func() bool { return false }, 5*time.Second)
		assert.Equal(t, got{item: "x", at: 5 * time.Second}, <-ch)
	})
}

// TestSynctestRateLimitedRequeues: an item requeued with AddRateLimited comes
// back after DefaultControllerRateLimiter's delays, 5 ms doubling, as in
// ExampleNewRateLimitingQueue; Forget starts the series again.
func TestSynctestRateLimitedRequeues(t *testing.T) {
	bubble(t, func(t *testing.T) {
		q := backoff.NewRateLimitingQueue[string](backoff.DefaultControllerRateLimiter[string]())
		defer q.ShutDown()
		q.Add("default/cluster")
		for _, want := range []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond} {
			item, _ := q.Get()
			failedAt := time.Now()
			q.AddRateLimited(item) // the reconcile failed
			q.Done(item)
			item, _ = q.Get()
			assert.Equal(t, want, time.Since(failedAt), "failure %d", q.NumRequeues(item))
			q.Done(item)
			q.Add(item) // the next round starts at once
		}
		item, _ := q.Get()
		q.Forget(item)
		q.AddRateLimited(item)
		q.Done(item)
		failedAt := time.Now()
		_, _ = q.Get()
		assert.Equal(t, 5*time.Millisecond, time.Since(failedAt), "after Forget")
	})
}

// TestSynctestQueueShutdown: a blocked Get returns when the queue shuts down;
// ShutDownWithDrain waits for the item being processed; a GetContext whose
// context times out returns at the deadline and leaves the queue running;
// TakeWaiting returns the items still waiting, with their ready times.
func TestSynctestQueueShutdown(t *testing.T) {
	bubble(t, func(t *testing.T) {
		q := backoff.NewDelayingQueue[string]()
		start := time.Now()

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := q.GetContext(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))
		assert.False(t, q.ShuttingDown())

		shutdown := make(chan bool, 1)
		go func() {
			_, sd := q.Get()
			shutdown <- sd
		}()
		synctest.Wait() // Get is blocked
		assert.Empty(t, shutdown, "Get returned with nothing queued")

		q.Add("held")
		assert.False(t, <-shutdown, "Get took the added item")
		q.AddAfter("db", 10*time.Minute)
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		time.Sleep(time.Hour)
		synctest.Wait()
		assert.True(t, q.ShuttingDown())
		select {
		case <-drained:
			t.Fatal("ShutDownWithDrain returned while an item was being processed")
		default:
		}
		q.Done("held")
		<-drained

		_, sd := q.Get()
		assert.True(t, sd, "Get after shutdown")
		waiting := q.TakeWaiting()
		require.Len(t, waiting, 1)
		assert.Equal(t, "db", waiting[0].Item)
		assert.Equal(t, 10*time.Minute+time.Second, waiting[0].ReadyAt.Sub(start))
	})
}

// TestSynctestRunWorkers: RunWorkers requeues a failing item with the
// limiter's delays, schedules a RequeueAfter, and returns when its context
// ends, all at the times a FakeClock would show.
func TestSynctestRunWorkers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		q := backoff.NewRateLimitingQueue[string](backoff.DefaultControllerRateLimiter[string](),
			backoff.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		q.Add("flaky")
		q.Add("cron")
		start := time.Now()
		var (
			mu      sync.Mutex
			handled = map[string][]time.Duration{}
		)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
		defer cancel()
		backoff.RunWorkers(ctx, q, 2, func(ctx context.Context, item string) (backoff.Result, error) {
			mu.Lock()
			handled[item] = append(handled[item], time.Since(start))
			n := len(handled[item])
			mu.Unlock()
			switch {
			case item == "flaky" && n <= 2:
				return backoff.Result{}, errors.New("connection refused")
			case item == "cron" && n == 1:
				return backoff.Result{RequeueAfter: time.Hour}, nil
			}
			return backoff.Result{}, nil
		})
		assert.Equal(t, 2*time.Hour, time.Since(start), "RunWorkers returns when ctx ends")
		assert.Equal(t, []time.Duration{0, 5 * time.Millisecond, 15 * time.Millisecond}, handled["flaky"])
		assert.Equal(t, []time.Duration{0, time.Hour}, handled["cron"])
		assert.Zero(t, q.NumRequeues("flaky"), "forgotten after the success")
	})
}

// runTimes returns a function that records when it runs, relative to start,
// and closes stop on its nth run, and the slice it records into.
func runTimes(start time.Time, n int, stop func()) (func(), *[]time.Duration) {
	var at []time.Duration
	return func() {
		at = append(at, time.Since(start))
		if len(at) == n {
			stop()
		}
	}, &at
}

// TestSynctestLoops: the loop helpers run f at the times their Examples show
// on a FakeClock, and return when stopped.
func TestSynctestLoops(t *testing.T) {
	t.Run("Until", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			stop := make(chan struct{})
			f, at := runTimes(time.Now(), 3, func() { close(stop) })
			backoff.Until(f, time.Second, stop)
			assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, *at)
		})
	})
	t.Run("sliding and not", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			for _, tc := range []struct {
				sliding bool
				want    []time.Duration
			}{
				{true, []time.Duration{0, 1300 * time.Millisecond, 2600 * time.Millisecond}},
				{false, []time.Duration{0, time.Second, 2 * time.Second}},
			} {
				stop := make(chan struct{})
				f, at := runTimes(time.Now(), 3, func() { close(stop) })
				slow := func() {
					f()
					time.Sleep(300 * time.Millisecond) // f's run time
				}
				backoff.JitterUntil(slow, time.Second, 0, tc.sliding, stop)
				assert.Equal(t, tc.want, *at, "sliding %v", tc.sliding)
			}
		})
	})
	t.Run("JitterUntil", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			stop := make(chan struct{})
			f, at := runTimes(time.Now(), 10, func() { close(stop) })
			backoff.JitterUntil(f, time.Second, 0.5, true, stop)
			for i := 1; i < len(*at); i++ {
				wait := (*at)[i] - (*at)[i-1]
				assert.True(t, wait >= time.Second && wait < 1500*time.Millisecond, "wait %d: %v", i, wait)
			}
		})
	})
	t.Run("UntilWithContext", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
			defer cancel()
			f, at := runTimes(start, 0, nil)
			backoff.UntilWithContext(ctx, func(context.Context) { f() }, time.Second)
			assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, *at)
			assert.Equal(t, 2500*time.Millisecond, time.Since(start), "returns when ctx ends")
		})
	})
	t.Run("BackoffUntil", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			m := backoff.NewExponentialBackoffManager(time.Second, 4*time.Second, time.Minute, 2, 0)
			stop := make(chan struct{})
			f, at := runTimes(time.Now(), 5, func() { close(stop) })
			backoff.BackoffUntil(f, m, true, stop)
			assert.Equal(t, []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 11 * time.Second}, *at)
		})
	})
	t.Run("Forever", func(t *testing.T) {
		// Forever waits on NeverStop, made at package initialisation outside
		// every bubble: this passes only because ContextForChannel treats it as
		// a nil channel, on which a wait blocks durably.
		bubble(t, func(t *testing.T) {
			done := make(chan struct{})
			f, at := runTimes(time.Now(), 3, runtime.Goexit) // the one way out of Forever
			go func() {
				defer close(done)
				backoff.Forever(f, time.Second)
			}()
			<-done
			assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, *at)
		})
	})
}

// TestSynctestPoll: the poll functions check at the times their Examples
// show on a FakeClock, and end at their timeout exactly.
func TestSynctestPoll(t *testing.T) {
	t.Run("PollUntilContextTimeout", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			start := time.Now()
			f, at := runTimes(start, 0, nil)
			err := backoff.PollUntilContextTimeout(context.Background(), time.Second, 3500*time.Millisecond, true,
				func(context.Context) (bool, error) { f(); return false, nil })
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}, *at)
			assert.Equal(t, 3500*time.Millisecond, time.Since(start))
		})
	})
	t.Run("PollUntilContextCancel", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			start := time.Now()
			f, at := runTimes(start, 0, nil)
			err := backoff.PollUntilContextCancel(context.Background(), time.Second, false,
				func(context.Context) (bool, error) { f(); return len(*at) == 3, nil })
			assert.NoError(t, err)
			assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, *at)
		})
	})
	t.Run("ExponentialBackoffWithContext", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			f, at := runTimes(time.Now(), 0, nil)
			s := backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 4}
			err := backoff.ExponentialBackoffWithContext(context.Background(), s,
				func(context.Context) (bool, error) { f(); return false, nil })
			assert.ErrorIs(t, err, backoff.ErrWaitTimeout)
			assert.Equal(t, []time.Duration{0, 10 * time.Millisecond, 30 * time.Millisecond, 70 * time.Millisecond}, *at)
		})
	})
}

// TestSynctestRetry: Retry makes its attempts at the times ExampleRetry shows
// on a FakeClock, and stops when its context ends during a wait or its time
// budget would be exceeded.
func TestSynctestRetry(t *testing.T) {
	s := backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5}
	t.Run("until success", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			f, at := runTimes(time.Now(), 0, nil)
			err := backoff.Retry(context.Background(), s, func(context.Context) error {
				f()
				if len(*at) < 4 {
					return errors.New("connection refused")
				}
				return nil
			})
			assert.NoError(t, err)
			assert.Equal(t, []time.Duration{0, 10 * time.Millisecond, 30 * time.Millisecond, 70 * time.Millisecond}, *at)
		})
	})
	t.Run("context ends during a wait", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(25*time.Millisecond, cancel)
			f, at := runTimes(start, 0, nil)
			err := backoff.Retry(ctx, s, func(context.Context) error { f(); return errors.New("busy") })
			assert.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, []time.Duration{0, 10 * time.Millisecond}, *at)
			assert.Equal(t, 25*time.Millisecond, time.Since(start), "returns when ctx ends")
		})
	})
	t.Run("a deadline the next wait would reach", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 25*time.Millisecond)
			defer cancel()
			f, at := runTimes(start, 0, nil)
			busy := errors.New("busy")
			err := backoff.Retry(ctx, s, func(context.Context) error { f(); return busy })
			assert.ErrorIs(t, err, backoff.ErrDeadlineWouldPass)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.ErrorIs(t, err, busy, "the real last error")
			assert.Equal(t, []time.Duration{0, 10 * time.Millisecond}, *at)
			assert.Equal(t, 10*time.Millisecond, time.Since(start), "returns at once instead of waiting 20 ms into a deadline 15 ms away")
			assert.NoError(t, ctx.Err(), "before the deadline")
		})
	})
	t.Run("WithMaxElapsedTime", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			f, at := runTimes(time.Now(), 0, nil)
			err := backoff.Retry(context.Background(), s, func(context.Context) error { f(); return errors.New("busy") },
				backoff.WithMaxElapsedTime(50*time.Millisecond))
			assert.ErrorIs(t, err, backoff.ErrMaxElapsedTime)
			assert.Equal(t, []time.Duration{0, 10 * time.Millisecond, 30 * time.Millisecond}, *at)
		})
	})
}

// bubbleTimeout is how long, in real time, a synctest bubble may run before
// the test binary panics. Inside a bubble, time is virtual, and it only
// advances when every goroutine of the bubble is durably blocked; a goroutine
// waiting on a sync.Cond or a mutex (a Get for an item that never becomes
// due) is not, so a bug there hangs the bubble with its clock stopped, until
// go test's timeout. A wait helper cannot help there (its timer would be
// virtual too): this watchdog is armed outside the bubble, and on expiry
// panics with the test's name, and the goroutine dump shows where the
// bubble is stuck. A safety net, not a timing assertion: these bubbles take
// milliseconds.
const bubbleTimeout = 4 * waitTimeout

// bubble runs f in a synctest bubble, as synctest.Test does, under the
// watchdog described at bubbleTimeout.
func bubble(t *testing.T, f func(*testing.T)) {
	t.Helper()
	name := t.Name()
	watchdog := time.AfterFunc(bubbleTimeout, func() {
		panic(fmt.Sprintf("%s: the synctest bubble did not end within %v real time: a goroutine of the bubble is blocked on something that does not advance its virtual clock (a Get, a lock, a sync.Cond); see its stack below", name, bubbleTimeout))
	})
	defer watchdog.Stop()
	synctest.Test(t, f)
}

// endedCtx is a context that ends when end is called but has no Done
// channel: GetContext then registers no callback to wake its getter, so the
// getter notices the end only when something else wakes it.
type endedCtx struct {
	context.Context
	err atomic.Pointer[error]
}

var errGetterGone = errors.New("getter gone")

func (c *endedCtx) end()                  { c.err.Store(&errGetterGone) }
func (c *endedCtx) Done() <-chan struct{} { return nil }
func (c *endedCtx) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// TestQueueEndedGetterPassesItsWakeupOn: the one Signal of an Add goes to
// the getter that has waited longest; if that getter's context has ended, it
// returns its error and must pass the wake-up on, or the item stays queued
// while another getter sleeps. Deterministic: the bubble orders the two
// getters' waits, and sync.Cond wakes the longest waiter first.
func TestQueueEndedGetterPassesItsWakeupOn(t *testing.T) {
	bubble(t, func(t *testing.T) {
		q := backoff.NewQueue[int]()
		defer q.ShutDown() // releases the plain getter if the wake-up was lost
		ctx := &endedCtx{Context: context.Background()}
		ended := make(chan error, 1)
		go func() {
			_, err := q.GetContext(ctx)
			ended <- err
		}()
		synctest.Wait() // the getter with the context waits first
		plain := getAsync[int](q)
		synctest.Wait()

		ctx.end()
		q.Add(1) // wakes the first getter, whose context has ended
		synctest.Wait()

		select {
		case err := <-ended:
			assert.ErrorIs(t, err, errGetterGone)
		default:
			t.Fatal("the getter whose context ended did not return")
		}
		select {
		case r := <-plain:
			assert.Equal(t, getResult[int]{item: 1}, r, "the other getter has the item")
		default:
			t.Error("the wake-up of Add(1) was lost: the item is queued and the other getter still waits")
			q.ShutDown()
			<-plain
		}
	})
}

// TestSynctestAdaptivePacers: the adaptive pacers on the real clock, in a
// bubble. An AdaptiveRate holds a Retry after a 429's Retry-After of 2 s;
// an AdaptiveLimiter whose downstream is overloaded lowers its limit and
// lets no more calls through at once than the limit, and every permit
// comes back.
func TestSynctestAdaptivePacers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		rate := backoff.NewAdaptiveRate()
		start := time.Now()
		var at []time.Duration
		err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 3, Duration: time.Millisecond}, func(context.Context) error {
			at = append(at, time.Since(start))
			if len(at) == 1 {
				return backoff.RetryAfter(2*time.Second, errors.New("429"))
			}
			return nil
		}, backoff.WithPacer(rate), backoff.WithMaxRetryAfter(time.Millisecond))
		require.NoError(t, err)
		assert.Equal(t, []time.Duration{0, 2 * time.Second}, at, "the rate held the retry for the Retry-After")

		limiter := backoff.NewAdaptiveLimiter(backoff.WithInitialLimit(8), backoff.WithMinLimit(2))
		var inflight, most atomic.Int64
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = backoff.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(context.Context) error {
					n := inflight.Add(1)
					defer inflight.Add(-1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(100 * time.Millisecond) // the downstream's latency, virtual
					return fmt.Errorf("%w: shed", backoff.ErrOverloaded)
				}, backoff.WithPacer(limiter))
			}()
		}
		wg.Wait()
		assert.LessOrEqual(t, most.Load(), int64(8), "never more calls at once than the initial limit")
		assert.Less(t, limiter.Limit(), 8, "the overload lowered the limit")
		assert.Zero(t, limiter.Inflight())
	})
}

// measuredLimiter returns an AdaptiveLimiter that starts at limit and has
// finished its first measurement of the no-load latency (32 calls of 10 ms,
// one at a time), so that its permits take no lock while nobody waits. Call
// it inside a bubble.
func measuredLimiter(t *testing.T, limit int) *backoff.AdaptiveLimiter {
	l := backoff.NewAdaptiveLimiter(backoff.WithInitialLimit(limit))
	for range 32 {
		p, ok := l.TryAcquire()
		require.True(t, ok)
		time.Sleep(10 * time.Millisecond)
		p.Record()
	}
	return l
}

// acquireInLine starts an Acquire on l, returns once it waits in line, and
// returns the channel that its permit comes on. Call it inside a bubble.
func acquireInLine(t *testing.T, l *backoff.AdaptiveLimiter) <-chan backoff.Permit {
	got := make(chan backoff.Permit)
	go func() {
		p, err := l.Acquire(context.Background())
		assert.NoError(t, err)
		got <- p
	}()
	synctest.Wait()
	return got
}

// callers runs n goroutines that each make calls calls through l (Acquire,
// a latency that latency gives for the calls in flight, Record), and waits
// for them. Call it inside a bubble.
func callers(t *testing.T, l *backoff.AdaptiveLimiter, n, calls int, latency func(inflight int64) time.Duration) {
	var inflight atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				p, err := l.Acquire(context.Background())
				if !assert.NoError(t, err) {
					return
				}
				time.Sleep(latency(inflight.Add(1)))
				inflight.Add(-1)
				p.Record()
			}
		}()
	}
	wg.Wait()
}

// TestSynctestAdaptiveLimiterWaiterTakesTheFreedSlot: after the first
// measurement of the no-load latency, when permits are ended without the
// lock while nobody waits, an Acquire that waits in line still takes the
// slot the next permit frees, and TryAcquire does not take it first.
func TestSynctestAdaptiveLimiterWaiterTakesTheFreedSlot(t *testing.T) {
	bubble(t, func(t *testing.T) {
		l := measuredLimiter(t, 2)
		first, ok1 := l.TryAcquire()
		second, ok2 := l.TryAcquire()
		require.True(t, ok1 && ok2)
		got := acquireInLine(t, l)
		first.Record()
		_, ok := l.TryAcquire()
		assert.False(t, ok, "the freed slot went to the waiting Acquire")
		p := <-got
		assert.Equal(t, 2, l.Inflight())
		p.Release()
		second.Release()
		assert.Zero(t, l.Inflight())
	})
}

// TestSynctestAdaptiveLimiterLearnsWhileAcquiresWait: with more callers than
// the limit, Acquires wait in line and every permit ends under the lock;
// the limit still learns from those samples. The downstream serves 4 calls
// at once in 10 ms, and the limit starts at 4 (the no-load latency is
// measured there): callers fill it, so it grows, until the queueing that
// more calls in flight cause holds it (near 6.6, where the gradient's
// 4/limit times the limit plus its square root is the limit).
func TestSynctestAdaptiveLimiterLearnsWhileAcquiresWait(t *testing.T) {
	bubble(t, func(t *testing.T) {
		l := backoff.NewAdaptiveLimiter(backoff.WithInitialLimit(4))
		callers(t, l, 16, 40, func(inflight int64) time.Duration {
			return 10 * time.Millisecond * time.Duration(max(inflight, 4)) / 4
		})
		assert.GreaterOrEqual(t, l.Limit(), 5, "the callers filled the limit at the no-load latency: it grew")
		assert.LessOrEqual(t, l.Limit(), 8, "the queueing beyond 4 calls held it")
		assert.Zero(t, l.Inflight())
	})
}

// TestSynctestAdaptiveLimiterGrowsFromOne: at a limit of 1 with a second
// caller always waiting, every permit is handed over under the lock, and
// the one call in flight fills the limit: it grows.
func TestSynctestAdaptiveLimiterGrowsFromOne(t *testing.T) {
	bubble(t, func(t *testing.T) {
		l := backoff.NewAdaptiveLimiter(backoff.WithInitialLimit(1))
		callers(t, l, 2, 100, func(int64) time.Duration { return 10 * time.Millisecond }) // no queueing
		assert.GreaterOrEqual(t, l.Limit(), 2)
	})
}

// TestSynctestAdaptiveLimiterUpdatesOnTheSixteenthSampleUnderTheLock: with
// an Acquire waiting, each permit ends under the lock, and the sample that
// fills a window of 16 moves the limit at once. The 16 permits held since
// the measurement ended are recorded 10 ms apart, so the window's mean
// latency is 8.5 times the no-load one: the limit falls from 16 to 15.
func TestSynctestAdaptiveLimiterUpdatesOnTheSixteenthSampleUnderTheLock(t *testing.T) {
	bubble(t, func(t *testing.T) {
		l := measuredLimiter(t, 16)
		var held []backoff.Permit
		for range 16 {
			p, ok := l.TryAcquire()
			require.True(t, ok)
			held = append(held, p)
		}
		for i := range 16 {
			got := acquireInLine(t, l)
			time.Sleep(10 * time.Millisecond)
			require.Equal(t, 16, l.Limit(), "no update before the window is full (sample %d)", i+1)
			held[i].Record()
			if i == 15 {
				assert.Equal(t, 15, l.Limit(), "the 16th sample updated the limit")
				assert.Equal(t, 15, l.Inflight(), "the waiting Acquire stays in line at the lower limit")
				held[i+1].Release() // 14 in flight: its turn
			}
			held = append(held, <-got)
		}
		for i := 17; i < len(held); i++ {
			held[i].Release()
		}
		assert.Zero(t, l.Inflight())
	})
}

// TestDocsDelayingQueueInABubble is the twin of docs/testing.md's first
// synctest example.
func TestDocsDelayingQueueInABubble(t *testing.T) {
	{ // README: func TestRequeue(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			q := backoff.NewDelayingQueue[string]() // the real clock: no WithClock
			defer q.ShutDown()
			start := time.Now()
			q.AddAfter("x", time.Minute)
			q.Get() // returns at once, a virtual minute later
			assert.Equal(t, time.Minute, time.Since(start))
		})
	}
}

// TestDocsRunWorkersInABubble is the twin of docs/testing.md's RunWorkers
// recipe: the requeue delays of the default controller limiter and a
// RequeueAfter pass in virtual time, and the handler's failures go to the
// test's output.
func TestDocsRunWorkersInABubble(t *testing.T) {
	{ // README: func TestReconcileRequeues(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			logger := slog.New(slog.NewTextHandler(t.Output(), nil)) // failures show with the test's output
			q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](), backoff.WithLogger(logger))
			q.Add("pod-a")
			start := time.Now()
			var handled []time.Duration // one worker: no lock needed
			ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
			defer cancel()
			backoff.RunWorkers(ctx, q, 1, func(ctx context.Context, item string) (backoff.Result, error) {
				handled = append(handled, time.Since(start))
				if len(handled) <= 2 {
					return backoff.Result{}, errors.New("not ready") // requeued after 5 ms, then 10 ms
				}
				return backoff.Result{RequeueAfter: 30 * time.Minute}, nil
			}) // returns when ctx ends: a virtual hour, no real time
			assert.Equal(t, []time.Duration{0, 5 * time.Millisecond, 15 * time.Millisecond,
				30*time.Minute + 15*time.Millisecond}, handled)
		})
	}
}

// TestSynctestRetryNeverWaitsIntoTheDeadline runs Retry over a seeded mix of
// schedules, deadlines, Retry-After hints, minimum attempt times and attempt
// durations, on the real clock of a synctest bubble. No wait starts whose
// end is at or past ctx's deadline (nor leaves less than the minimum), the
// error of every give-up holds the last attempt's own error, and Retry never
// returns after the deadline.
func TestSynctestRetryNeverWaitsIntoTheDeadline(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 1))
	for c := range 300 {
		s := backoff.Schedule{
			Duration: time.Duration(1+rng.IntN(500)) * time.Millisecond,
			Factor:   1 + 2*rng.Float64(),
			Jitter:   rng.Float64(),
			Steps:    rng.IntN(12),
		}
		deadline := time.Duration(rng.IntN(3000)) * time.Millisecond
		minAttempt := time.Duration(rng.IntN(3)*rng.IntN(200)) * time.Millisecond
		hintEvery := 1 + rng.IntN(4)
		seed := rng.Uint64()
		bubble(t, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 2))
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			var last error
			attempts := 0
			err := backoff.Retry(ctx, s, func(ctx context.Context) error {
				attempts++
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(r.IntN(300)) * time.Millisecond):
				}
				last = fmt.Errorf("attempt %d failed", attempts)
				if attempts%hintEvery == 0 {
					last = backoff.RetryAfter(time.Duration(r.IntN(2000))*time.Millisecond, last)
				}
				return last
			}, backoff.WithMinAttemptTime(minAttempt), backoff.WithNotify(func(_ int, _ error, next time.Duration) {
				if end := time.Since(start) + next + minAttempt; end >= deadline && deadline > 0 {
					t.Errorf("case %d: a wait of %v started at %v, with %v more for an attempt, reaches the deadline %v", c, next, time.Since(start), minAttempt, deadline)
				}
			}))
			require.Error(t, err, "case %d", c)
			if attempts > 0 {
				assert.ErrorIs(t, err, last, "case %d: the last attempt's error is returned", c)
			}
			assert.LessOrEqual(t, time.Since(start), deadline, "case %d: no overshoot", c)
		})
	}
}

// TestSynctestRetryAttemptTimeoutAgainstTheDeadline: an attempt that hangs,
// with an attempt timeout shorter than, equal to and longer than the 100 ms
// left on ctx. The shorter one ends the attempt, which is retried; the
// others leave it to ctx's deadline, which ends Retry with no retry.
func TestSynctestRetryAttemptTimeoutAgainstTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		timeout  time.Duration
		attempts int
		reason   error
	}{
		// 0–30 ms, a 10 ms wait, 40–70 ms; then a 20 ms wait and the 25 ms
		// minimum would pass the deadline.
		{30 * time.Millisecond, 2, backoff.ErrDeadlineWouldPass},
		{100 * time.Millisecond, 1, context.DeadlineExceeded},
		{300 * time.Millisecond, 1, context.DeadlineExceeded},
	} {
		t.Run(tc.timeout.String(), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				var ends []time.Duration
				err := backoff.Retry(ctx, backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 10}, func(actx context.Context) error {
					d, _ := actx.Deadline()
					want, _ := ctx.Deadline()
					if own := time.Now().Add(tc.timeout); own.Before(want) {
						want = own
					}
					assert.Equal(t, want, d, "on the real clock, the earlier of the attempt's timeout and ctx's deadline")
					<-actx.Done() // hangs until its context ends
					ends = append(ends, time.Since(start))
					return actx.Err()
				}, backoff.WithAttemptTimeout(tc.timeout), backoff.WithMinAttemptTime(25*time.Millisecond))
				assert.ErrorIs(t, err, tc.reason)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Len(t, ends, tc.attempts, "attempts ended at %v", ends)
				assert.LessOrEqual(t, time.Since(start), 100*time.Millisecond)
			})
		})
	}
}

// TestSynctestRunWorkersItemTimeoutKeepsAWorkerWhoseHandlerHangs: Go cannot
// stop a goroutine, so a handler that ignores its context keeps its worker
// past WithItemTimeout: with one worker, the next item waits until the
// stuck handler returns, and is then processed.
func TestSynctestRunWorkersItemTimeoutKeepsAWorkerWhoseHandlerHangs(t *testing.T) {
	bubble(t, func(t *testing.T) {
		q := backoff.NewRateLimitingQueue[string](backoff.NewItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			backoff.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		ctx, cancel := context.WithCancel(context.Background())
		release := make(chan struct{})
		var timedOut atomic.Bool
		var order []string
		var mu sync.Mutex
		done := make(chan struct{})
		go func() {
			backoff.RunWorkers(ctx, q, 1, func(hctx context.Context, item string) (backoff.Result, error) {
				mu.Lock()
				order = append(order, item)
				mu.Unlock()
				if item == "stuck" {
					<-release // ignores hctx
					timedOut.Store(hctx.Err() == context.DeadlineExceeded)
				}
				return backoff.Result{}, nil
			}, backoff.WithItemTimeout(time.Second))
			close(done)
		}()
		q.Add("stuck")
		synctest.Wait()
		time.Sleep(time.Minute) // virtual: the item's timeout passed long ago
		q.Add("next")
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, []string{"stuck"}, order, "the worker is still held by the stuck handler")
		mu.Unlock()
		close(release)
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, []string{"stuck", "next"}, order)
		mu.Unlock()
		assert.True(t, timedOut.Load(), "the stuck handler's context had ended at its timeout")
		cancel()
		<-done
	})
}
