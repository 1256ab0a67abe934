package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// These tests cover faults in user code, where the tests of each
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

// relAdd is one Add recorded by the shutdown race: seq before and after the
// call.
type relAdd struct {
	item          int
	before, after int64
}

// TestReliabilityShutdownRacesProducers: unlike TestQueueStress, whose drain
// begins after the producers have stopped, here the shutdown lands in the
// middle of the traffic. 4 producers × 2000 operations (Add, AddAfter,
// AddRateLimited, Forget) and 4 workers (Get or GetContext, then Add,
// AddRateLimited or Forget now and then, then Done) run while a goroutine
// steps the clock and another samples Len; when producer 0 is halfway,
// the queue is shut down: with ShutDownWithDrain, with ShutDownWithDrain cut
// short by a racing ShutDown, or with ShutDown alone. Then:
//   - nothing deadlocks (the test has a deadline), Len is never negative;
//   - no item is ever held by two workers at once;
//   - every Add that returned before the shutdown began is followed by a
//     processing start of its item (Get hands out what is queued after a
//     shutdown, and Done requeues an item added while it was processed);
//   - when ShutDownWithDrain returns uncut, nothing is queued or processed;
//   - at the end the workers have seen the shutdown and Len is 0.
func TestReliabilityShutdownRacesProducers(t *testing.T) {
	t.Parallel()
	const (
		items     = 32
		producers = 4
		opsEach   = 2000
		workers   = 4
		steps     = 2000
	)
	for _, mode := range []string{"ShutDownWithDrain", "ShutDownWithDrain+ShutDown", "ShutDown"} {
		t.Run(mode, func(t *testing.T) {
			fc := newQueueClock()
			limiter := newQLimiter[int](func(n int) time.Duration { return time.Duration(n%3) * time.Millisecond })
			q := backoff.NewRateLimitingQueue[int](limiter, backoff.WithClock(fc))

			var (
				seq        atomic.Int64
				lastStart  [items]atomic.Int64
				holders    [items]atomic.Int32
				overlaps   atomic.Int32
				negative   atomic.Int32
				processed  atomic.Int64
				adds       = make([][]relAdd, producers+workers)
				drainStart atomic.Int64
				halfway    = make(chan struct{})
				stopSample atomic.Bool
			)
			drainStart.Store(1 << 62)
			record := func(slot, item int, add func()) {
				before := seq.Add(1)
				add()
				adds[slot] = append(adds[slot], relAdd{item, before, seq.Add(1)})
			}

			finished := make(chan struct{})
			go func() {
				defer close(finished)
				var wg sync.WaitGroup
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(w), 11))
						for {
							var item int
							if w%2 == 0 {
								it, shutdown := q.Get()
								if shutdown {
									return
								}
								item = it
							} else {
								it, err := q.GetContext(context.Background())
								if err != nil {
									if !errors.Is(err, backoff.ErrQueueShutDown) {
										t.Errorf("GetContext: %v", err)
									}
									return
								}
								item = it
							}
							if holders[item].Add(1) != 1 {
								overlaps.Add(1)
							}
							storeMax(&lastStart[item], seq.Add(1))
							processed.Add(1)
							runtime.Gosched()
							switch rng.IntN(8) {
							case 0:
								record(producers+w, item, func() { q.Add(item) })
							case 1:
								q.AddRateLimited(item)
							case 2:
								q.Forget(item)
							}
							holders[item].Add(-1)
							q.Done(item)
						}
					}()
				}

				var traffic sync.WaitGroup
				for p := 0; p < producers; p++ {
					traffic.Add(1)
					go func() {
						defer traffic.Done()
						rng := rand.New(rand.NewPCG(uint64(p), 12))
						for i := 0; i < opsEach; i++ {
							if p == 0 && i == opsEach/2 {
								close(halfway)
							}
							item := rng.IntN(items)
							switch rng.IntN(4) {
							case 0, 1:
								record(p, item, func() { q.Add(item) })
							case 2:
								q.AddAfter(item, time.Duration(rng.IntN(4000)-1000)*time.Microsecond)
							case 3:
								q.AddRateLimited(item)
							}
							if rng.IntN(10) == 0 {
								q.Forget(item)
							}
							runtime.Gosched() // let the workers interleave
						}
					}()
				}
				traffic.Add(2)
				go func() { // the clock
					defer traffic.Done()
					for i := 0; i < steps; i++ {
						fc.Step(250 * time.Microsecond)
						runtime.Gosched()
					}
				}()
				go func() { // Len is never negative
					defer traffic.Done()
					for !stopSample.Load() {
						if q.Len() < 0 {
							negative.Add(1)
						}
						runtime.Gosched()
					}
				}()

				<-halfway
				drainStart.Store(seq.Add(1))
				switch mode {
				case "ShutDownWithDrain":
					q.ShutDownWithDrain()
					assert.Zero(t, q.Len(), "ShutDownWithDrain returned with items queued")
				case "ShutDownWithDrain+ShutDown":
					cut := wtGo(func() {
						runtime.Gosched()
						q.ShutDown()
					})
					q.ShutDownWithDrain()
					<-cut
				case "ShutDown":
					q.ShutDown()
				}
				assert.True(t, q.ShuttingDown())
				wg.Wait() // the workers saw the shutdown
				stopSample.Store(true)
				traffic.Wait()
			}()
			waitFor(t, "the shutdown to complete: the workers and the traffic to stop", finished, fc)

			assert.Zero(t, overlaps.Load(), "an item was held by two workers at once")
			assert.Zero(t, negative.Load(), "Len was negative")
			assert.Zero(t, q.Len())
			start := drainStart.Load()
			checked := 0
			for _, slot := range adds {
				for _, a := range slot {
					if a.after < start {
						checked++
						require.Greater(t, lastStart[a.item].Load(), a.before,
							"item %d added before the shutdown was not processed after that add", a.item)
					}
				}
			}
			assert.Positive(t, checked)
			t.Logf("%s: %d adds checked, %d items processed", mode, checked, processed.Load())
		})
	}
}

// These stress tests go where the concurrency tests of each
// area stop: a FakeClock that jumps backwards as well as forwards (SetTime)
// while many goroutines use the Backoff or a limiter, the memory bound of
// WithMaxTrackedItems under concurrent failures, and queue shutdowns that
// race producers and workers instead of following them. Run them with -race.

// relClockJumper moves fc to random instants within ±span of epoch, forwards
// and backwards, jumps times, on its own goroutine; wait for the returned
// channel.
func relClockJumper(fc *testingclock.FakeClock, seed uint64, span time.Duration, jumps int) <-chan struct{} {
	return wtGo(func() {
		rng := rand.New(rand.NewPCG(seed, 1))
		for i := 0; i < jumps; i++ {
			fc.SetTime(epoch.Add(time.Duration(rng.Int64N(int64(2*span))) - span))
			runtime.Gosched()
		}
	})
}

// TestReliabilityBackoffClockJumps: 8 goroutines × 600 calls of every Backoff
// method on 200 ids, while the clock jumps 600 times within ±10s of the
// epoch. Every delay stays in [0, max]; no panic; and once the clock is set
// an hour on, GC reclaims every entry, so memory does not outlive the ids.
func TestReliabilityBackoffClockJumps(t *testing.T) {
	t.Parallel()
	const (
		goroutines, calls = 8, 600
		ids               = 200
		initial, maxDelay = time.Millisecond, time.Second
	)
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewBackOffWithJitter(initial, maxDelay, 0.5, backoff.WithClock(fc))
	jumper := relClockJumper(fc, 1, 10*time.Second, calls)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for i := 0; i < calls; i++ {
				id := fmt.Sprint("id", rng.IntN(ids))
				// An event time that may be before or after the clock.
				at := fc.Now().Add(time.Duration(rng.Int64N(int64(6*time.Second))) - 3*time.Second)
				switch rng.IntN(10) {
				case 0:
					b.Reset(id)
				case 1:
					b.DeleteEntry(id)
				case 2:
					b.GC()
				case 3:
					_ = b.IsInBackOffSince(id, at)
					_ = b.IsInBackOffSinceUpdate(id, at)
				default:
					b.Next(id, at)
				}
				if d := b.Get(id); d < 0 || d > maxDelay {
					bad.Add(1)
					t.Errorf("Get(%s) = %v, outside [0, %v]", id, d, maxDelay)
				}
				if n := b.Attempts(id); n < 0 {
					t.Errorf("Attempts(%s) = %d", id, n)
				}
			}
		}()
	}
	waitForCall(t, "the concurrent callers to finish", wg.Wait)
	waitFor(t, "the clock-jumping goroutine to finish", jumper, fc)
	assert.Zero(t, bad.Load())

	fc.SetTime(epoch.Add(time.Hour))
	b.GC()
	for i := 0; i < ids; i++ {
		id := fmt.Sprint("id", i)
		assert.Zero(t, b.Attempts(id), "%s survived GC an hour after its last update", id)
		assert.Zero(t, b.Get(id), id)
	}
}

// TestReliabilityLimitersClockJumps: for each limiter, 8 goroutines × 500
// calls (When, Forget, NumRequeues) on 1000 items while the clock jumps 500
// times within ±1h of the epoch. Every delay stays within the limiter's
// bounds, and with WithMaxTrackedItems(64) at most 64 items have a failure
// count at the end.
func TestReliabilityLimitersClockJumps(t *testing.T) {
	t.Parallel()
	const (
		goroutines, calls = 8, 500
		items             = 1000
		tracked           = 64
		// The bucket of limit 10/s spaces the calls out: with no token
		// earned at all, the last of them waits (calls-burst)/10 s.
		bucketMax = goroutines * calls / 10 * time.Second
	)
	bound := backoff.WithMaxTrackedItems(tracked)
	jitter := backoff.WithRequeueJitter(0.5)
	tests := []struct {
		name    string
		make    func(fc *testingclock.FakeClock) backoff.RateLimiter[int]
		lo, hi  time.Duration
		bounded bool // made with WithMaxTrackedItems(tracked)
	}{
		{"ItemExponential", func(fc *testingclock.FakeClock) backoff.RateLimiter[int] {
			return backoff.NewItemExponentialFailureRateLimiter[int](time.Millisecond, time.Second, backoff.WithClock(fc), jitter)
		}, time.Millisecond, time.Second, false},
		{"ItemExponential/bounded", func(fc *testingclock.FakeClock) backoff.RateLimiter[int] {
			return backoff.NewItemExponentialFailureRateLimiter[int](time.Millisecond, time.Second, backoff.WithClock(fc), jitter, bound)
		}, time.Millisecond, time.Second, true},
		{"ItemFastSlow/bounded", func(fc *testingclock.FakeClock) backoff.RateLimiter[int] {
			return backoff.NewItemFastSlowRateLimiter[int](time.Millisecond, time.Second, 3, backoff.WithClock(fc), jitter, bound)
		}, time.Millisecond, 1500 * time.Millisecond, true}, // slow delays are jittered above slowDelay
		{"Bucket", func(fc *testingclock.FakeClock) backoff.RateLimiter[int] {
			return backoff.NewBucketRateLimiter[int](10, 100, backoff.WithClock(fc))
		}, 0, bucketMax, false},
		{"DefaultController/bounded", func(fc *testingclock.FakeClock) backoff.RateLimiter[int] {
			return backoff.DefaultControllerRateLimiter[int](backoff.WithClock(fc), jitter, bound)
		}, backoff.DefaultControllerBaseDelay, max(backoff.DefaultControllerMaxDelay, bucketMax), true},
		{"MaxOf", func(fc *testingclock.FakeClock) backoff.RateLimiter[int] {
			return backoff.NewMaxOfRateLimiter[int](
				backoff.NewItemExponentialFailureRateLimiter[int](time.Millisecond, time.Second, backoff.WithClock(fc), jitter),
				backoff.NewBucketRateLimiter[int](10, 100, backoff.WithClock(fc)))
		}, time.Millisecond, bucketMax, false},
		{"WithMaxWait", func(fc *testingclock.FakeClock) backoff.RateLimiter[int] {
			return backoff.NewWithMaxWaitRateLimiter[int](backoff.DefaultControllerRateLimiter[int](backoff.WithClock(fc)), 2*time.Second)
		}, 0, 2 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := testingclock.NewFakeClock(epoch)
			l := tt.make(fc)
			jumper := relClockJumper(fc, 3, time.Hour, calls)
			var wg sync.WaitGroup
			var bad atomic.Int64
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 4))
					for i := 0; i < calls; i++ {
						item := rng.IntN(items)
						switch rng.IntN(10) {
						case 0:
							l.Forget(item)
						case 1:
							if n := l.NumRequeues(item); n < 0 {
								t.Errorf("NumRequeues(%d) = %d", item, n)
							}
						default:
							if d := l.When(item); d < tt.lo || d > tt.hi {
								bad.Add(1)
								t.Errorf("When(%d) = %v, outside [%v, %v]", item, d, tt.lo, tt.hi)
							}
						}
					}
				}()
			}
			waitForCall(t, "the concurrent callers to finish", wg.Wait)
			waitFor(t, "the clock-jumping goroutine to finish", jumper, fc)
			assert.Zero(t, bad.Load())
			if tt.bounded {
				remembered := 0
				for item := 0; item < items; item++ {
					if l.NumRequeues(item) > 0 {
						remembered++
					}
				}
				assert.LessOrEqual(t, remembered, tracked, "items with a failure count")
				assert.Positive(t, remembered)
			}
		})
	}
}

// TestQueueStress runs producers (Add, AddAfter, AddRateLimited), a clock
// stepper and RunWorkers (whose handler fails, panics and asks for requeues
// now and then) for a fixed number of operations, then ShutDownWithDrain. It
// checks that no item is ever held by two workers at once, and that every
// item is processed at least once after its last add. Run it with -race.
func TestQueueStress(t *testing.T) { queueStress(t, false) }

// TestQueueStressWithPriorities is TestQueueStress with priorities (adds
// with options, handlers that set Result.Priority), fairness across three
// keys and a starvation bound.
func TestQueueStressWithPriorities(t *testing.T) {
	queueStress(t, true, backoff.WithFairness(func(i int) string { return [...]string{"a", "b", "c"}[i%3] }),
		backoff.WithMaxReadyWait(time.Millisecond))
}

func queueStress(t *testing.T, priorities bool, opts ...backoff.Option) {
	t.Parallel() // self-contained: see TestMain
	const (
		items     = 64
		producers = 4
		opsEach   = 5000
		workers   = 4
		maxDelay  = 20 * time.Millisecond
	)
	fc := newQueueClock()
	limiter := newQLimiter[int](func(n int) time.Duration { return time.Duration(n%3) * time.Millisecond })
	q := backoff.NewRateLimitingQueue[int](limiter, append([]backoff.Option{backoff.WithClock(fc),
		backoff.WithLogger(slog.New(slog.NewTextHandler(&syncBuffer{}, nil)))}, opts...)...)
	prio := func(r int) int {
		if !priorities {
			return 0
		}
		return [...]int{-100, 0, 0, 10}[r%4]
	}

	var (
		seq       atomic.Int64        // orders adds and processing starts
		lastAdd   [items]atomic.Int64 // seq taken just before the last add of each item
		lastStart [items]atomic.Int64 // seq taken when a worker last started the item
		holders   [items]atomic.Int32 // workers holding each item right now
		overlaps  atomic.Int32        // times an item was held twice
	)

	var final time.Time // the clock when the drain began
	var addMu sync.RWMutex
	producing := true // guarded by addMu: handlers add items only while true
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		workersDone := make(chan struct{})
		go func() {
			defer close(workersDone)
			backoff.RunWorkers(ctx, q, workers, func(_ context.Context, item int) (backoff.Result, error) {
				if holders[item].Add(1) != 1 {
					overlaps.Add(1)
				}
				defer holders[item].Add(-1)
				lastStart[item].Store(seq.Add(1))
				runtime.Gosched()
				if rand.IntN(8) == 0 { // an event for the item while it is processed
					addMu.RLock()
					if producing {
						storeMax(&lastAdd[item], seq.Add(1))
						q.AddWithOptions(backoff.AddOptions{Priority: prio(rand.IntN(4))}, item)
					}
					addMu.RUnlock()
				}
				switch r := rand.IntN(20); r {
				case 0:
					return backoff.Result{}, errors.New("transient")
				case 1:
					panic("boom")
				case 2:
					return backoff.Result{RequeueAfter: time.Duration(rand.IntN(5)+1) * time.Millisecond}, nil
				case 3:
					return backoff.Result{Requeue: true, Priority: prio(rand.IntN(4))}, nil
				}
				return backoff.Result{}, nil
			})
		}()

		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(p), 7))
				for range opsEach {
					item := rng.IntN(items)
					storeMax(&lastAdd[item], seq.Add(1))
					switch rng.IntN(4) {
					case 3:
						q.AddWithOptions(backoff.AddOptions{Priority: prio(rng.IntN(4)), RateLimited: rng.IntN(2) == 0,
							After: time.Duration(rng.IntN(int(maxDelay)+1)) - time.Millisecond}, item)
					case 0:
						q.Add(item)
					case 1:
						q.AddAfter(item, time.Duration(rng.IntN(int(maxDelay)+1))-time.Millisecond)
					case 2:
						q.AddRateLimited(item)
					}
					if rng.IntN(10) == 0 {
						q.Forget(item)
					}
				}
			}()
		}
		wg.Add(1)
		go func() { // the clock
			defer wg.Done()
			for range producers * opsEach / 10 {
				fc.Step(time.Millisecond / 4)
				runtime.Gosched()
			}
		}()
		wg.Wait()
		addMu.Lock() // no handler is adding now, and none will
		producing = false
		addMu.Unlock()
		// Every delay requested so far has passed; ShutDownWithDrain queues
		// the due items and waits until the workers have processed all.
		fc.Step(maxDelay + time.Millisecond)
		final = fc.Now()
		q.ShutDownWithDrain()
		<-workersDone
	}()
	waitFor(t, "the stress run to finish: ShutDownWithDrain and the workers", finished, fc)

	assert.Zero(t, overlaps.Load(), "an item was held by two workers at once")
	for item := range items {
		if add := lastAdd[item].Load(); add > 0 {
			assert.Greater(t, lastStart[item].Load(), add, "item %d was not processed after its last add", item)
		}
	}
	for _, w := range q.TakeWaiting() {
		// Due items were queued by the shutdown: only requeues asked for by
		// handlers just before it may remain.
		assert.True(t, w.ReadyAt.After(final), "item %d ready at %v, before the drain", w.Item, w.ReadyAt)
	}
}

// storeMax stores v in a unless a holds more.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// queueModel is a plain sequential model of a RateLimitingQueue, written from
// the documented semantics: the queue under test must agree with it after
// every operation.
type queueModel struct {
	now     time.Duration
	ready   []int
	dirty   map[int]bool
	proc    map[int]bool
	waiting map[int]modelWait
	seq     int
	shut    bool
	fails   map[int]int
	delay   func(n int) time.Duration
}

type modelWait struct {
	at  time.Duration
	seq int
}

func newQueueModel(delay func(n int) time.Duration) *queueModel {
	return &queueModel{dirty: map[int]bool{}, proc: map[int]bool{}, waiting: map[int]modelWait{},
		fails: map[int]int{}, delay: delay}
}

// waitingInOrder returns the waiting items, earliest first.
func (m *queueModel) waitingInOrder() []int {
	var items []int
	for x := range m.waiting {
		items = append(items, x)
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := m.waiting[items[i]], m.waiting[items[j]]
		return a.at < b.at || (a.at == b.at && a.seq < b.seq)
	})
	return items
}

// promote queues the due items: every operation does it first.
func (m *queueModel) promote() {
	if m.shut {
		return
	}
	for _, x := range m.waitingInOrder() {
		if m.waiting[x].at <= m.now {
			delete(m.waiting, x)
			m.enqueue(x)
		}
	}
}

func (m *queueModel) enqueue(x int) {
	if m.dirty[x] {
		return
	}
	m.dirty[x] = true
	if !m.proc[x] {
		m.ready = append(m.ready, x)
	}
}

func (m *queueModel) add(x int) {
	if m.shut {
		return
	}
	m.promote()
	delete(m.waiting, x)
	m.enqueue(x)
}

func (m *queueModel) addAfter(x int, d time.Duration) {
	if m.shut {
		return
	}
	m.promote()
	if d <= 0 {
		m.add(x)
		return
	}
	if w, ok := m.waiting[x]; !ok || m.now+d < w.at {
		m.waiting[x] = modelWait{m.now + d, m.seq}
		m.seq++
	}
}

func (m *queueModel) addRateLimited(x int) {
	if m.shut {
		return
	}
	m.promote()
	if _, waits := m.waiting[x]; waits || m.dirty[x] {
		return
	}
	d := m.delay(m.fails[x])
	m.fails[x]++
	m.addAfter(x, d)
}

func (m *queueModel) get() (int, bool) {
	m.promote()
	if len(m.ready) == 0 {
		return 0, true
	}
	x := m.ready[0]
	m.ready = m.ready[1:]
	m.dirty[x] = false
	m.proc[x] = true
	return x, false
}

func (m *queueModel) done(x int) {
	m.promote()
	if !m.proc[x] {
		return
	}
	delete(m.proc, x)
	if m.dirty[x] {
		m.ready = append(m.ready, x)
	}
}

func (m *queueModel) length() int {
	m.promote()
	return len(m.ready)
}

func (m *queueModel) takeWaiting() []int {
	m.promote()
	items := m.waitingInOrder()
	m.waiting = map[int]modelWait{}
	return items
}

func TestQueueAgreesWithModel(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			delay := func(n int) time.Duration { return time.Duration(1+n%4) * 10 * time.Millisecond }
			fc := newQueueClock()
			q := backoff.NewRateLimitingQueue[int](newQLimiter[int](delay), backoff.WithClock(fc))
			defer q.ShutDown()
			m := newQueueModel(delay)
			var log []string // the operations so far, for the failure message
			for op := 0; op < 400; op++ {
				x := rng.IntN(6)
				d := time.Duration(rng.IntN(8)-2) * 10 * time.Millisecond // -20ms..50ms, many ties
				var name string
				switch r := rng.IntN(100); {
				case r < 15:
					name = fmt.Sprintf("Add(%d)", x)
					q.Add(x)
					m.add(x)
				case r < 35:
					name = fmt.Sprintf("AddAfter(%d, %v)", x, d)
					q.AddAfter(x, d)
					m.addAfter(x, d)
				case r < 45:
					name = fmt.Sprintf("AddRateLimited(%d)", x)
					q.AddRateLimited(x)
					m.addRateLimited(x)
				case r < 65:
					if m.length() == 0 && !m.shut {
						continue // Get would block
					}
					wantItem, wantShut := m.get()
					item, shut := q.Get()
					name = fmt.Sprintf("Get() = %d, %v", item, shut)
					require.Equal(t, [2]any{wantItem, wantShut}, [2]any{item, shut}, "%s after %v", name, log)
				case r < 80:
					for p := range m.proc { // any processing item
						x = p
						break
					}
					name = fmt.Sprintf("Done(%d)", x)
					q.Done(x)
					m.done(x)
				case r < 92:
					step := time.Duration(rng.IntN(4)) * 10 * time.Millisecond
					name = fmt.Sprintf("Step(%v)", step)
					fc.Step(step)
					m.now += step
				case r < 95:
					name = fmt.Sprintf("Forget(%d)", x)
					q.Forget(x)
					delete(m.fails, x)
				case r < 97:
					name = "TakeWaiting()"
					var got []int
					for _, w := range q.TakeWaiting() {
						got = append(got, w.Item)
					}
					require.Equal(t, m.takeWaiting(), got, "%s after %v", name, log)
				case op > 300:
					name = "ShutDown()"
					q.ShutDown()
					m.promote()
					m.shut = true
				default:
					continue
				}
				log = append(log, name)
				require.Equal(t, m.length(), q.Len(), "Len after %v", log)
				require.Equal(t, m.fails[x], q.NumRequeues(x), "NumRequeues(%d) after %v", x, log)
				at, ok := q.NextReadyAt()
				if w := m.waitingInOrder(); len(w) > 0 && !m.shut {
					require.True(t, ok, "NextReadyAt after %v", log)
					require.Equal(t, m.waiting[w[0]].at, at.Sub(epoch), "NextReadyAt after %v", log)
				} else {
					require.False(t, ok, "NextReadyAt after %v", log)
				}
			}
		})
	}
}

// prioModel is a plain sequential model of a RateLimitingQueue with
// priorities, written from the documented semantics of AddWithOptions: the
// queue under test must agree with it after every operation.
type prioModel struct {
	now     time.Duration
	ready   []prioEntry // in the order the entries joined; Get takes the first of the highest priority
	dirty   map[int]bool
	proc    map[int]bool
	pend    map[int]int // the priority of a dirty item's pending run
	waiting map[int]prioWait
	seq     int
	shut    bool
	fails   map[int]int
	delay   func(n int) time.Duration
	maxWait time.Duration
	// fair is WithFairness(fairKey): turns holds, per priority, the keys
	// that have ready entries, in the order in which they are served.
	fair  bool
	turns map[int][]string
	// parked holds the parked items; ver is the version that the parked
	// items' ready functions compare with their target.
	parked map[int]prioPark
	ver    int
}

// prioPark is a parked item: ready once ver reaches target, released at
// the latest at deadline.
type prioPark struct {
	target   int
	deadline time.Duration
	seq      int // the order of the Park calls, which breaks ties
	prio     int // its pending priority, once the queue is shut down
}

// fairKey is the key of the model tests' queues with fairness.
func fairKey(x int) string { return fmt.Sprint(x % 3) }

type prioEntry struct {
	x, prio int
	at      time.Duration // when it joined
}

type prioWait struct {
	at   time.Duration
	seq  int
	prio int
}

func newPrioModel(delay func(n int) time.Duration, maxWait time.Duration, fair bool) *prioModel {
	return &prioModel{dirty: map[int]bool{}, proc: map[int]bool{}, pend: map[int]int{},
		waiting: map[int]prioWait{}, fails: map[int]int{}, delay: delay, maxWait: maxWait,
		fair: fair, turns: map[int][]string{}, parked: map[int]prioPark{}}
}

// hasReady reports whether an entry of priority prio and key k is ready.
func (m *prioModel) hasReady(prio int, k string) bool {
	for _, e := range m.ready {
		if e.prio == prio && fairKey(e.x) == k {
			return true
		}
	}
	return false
}

// appendReady makes e ready; with fairness, a key that had no entry of
// e's priority joins the end of the serving order.
func (m *prioModel) appendReady(e prioEntry) {
	if m.fair && !m.hasReady(e.prio, fairKey(e.x)) {
		m.turns[e.prio] = append(m.turns[e.prio], fairKey(e.x))
	}
	m.ready = append(m.ready, e)
}

// removeReady takes the ready entry at index i out; with fairness, a key
// left without an entry of its priority leaves the serving order.
func (m *prioModel) removeReady(i int) prioEntry {
	e := m.ready[i]
	m.ready = append(m.ready[:i:i], m.ready[i+1:]...)
	if k := fairKey(e.x); m.fair && !m.hasReady(e.prio, k) {
		turns := m.turns[e.prio]
		for j, tk := range turns {
			if tk == k {
				m.turns[e.prio] = append(turns[:j:j], turns[j+1:]...)
				break
			}
		}
	}
	return e
}

func (m *prioModel) waitingInOrder() []int {
	var items []int
	for x := range m.waiting {
		items = append(items, x)
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := m.waiting[items[i]], m.waiting[items[j]]
		return a.at < b.at || (a.at == b.at && a.seq < b.seq)
	})
	return items
}

// promote queues the due items and releases the parked items whose
// maxWait has passed, in time order (a ready time before a deadline on a
// tie).
func (m *prioModel) promote() {
	if m.shut {
		return
	}
	for {
		wx, px := -1, -1
		if w := m.waitingInOrder(); len(w) > 0 && m.waiting[w[0]].at <= m.now {
			wx = w[0]
		}
		if p := m.parkedInOrder(); len(p) > 0 && m.parked[p[0]].deadline <= m.now {
			px = p[0]
		}
		switch {
		case px >= 0 && (wx < 0 || m.parked[px].deadline < m.waiting[wx].at):
			m.unpark(px, m.parked[px].deadline)
		case wx >= 0:
			w := m.waiting[wx]
			delete(m.waiting, wx)
			m.enqueue(wx, w.prio, w.at)
		default:
			return
		}
	}
}

// parkedInOrder returns the parked items, earliest deadline first.
func (m *prioModel) parkedInOrder() []int {
	var items []int
	for x := range m.parked {
		items = append(items, x)
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := m.parked[items[i]], m.parked[items[j]]
		return a.deadline < b.deadline || (a.deadline == b.deadline && a.seq < b.seq)
	})
	return items
}

// nextAt is what NextReadyAt reports: the earliest ready time or deadline.
func (m *prioModel) nextAt() (time.Duration, bool) {
	var at time.Duration
	ok := false
	for _, w := range m.waiting {
		if !ok || w.at < at {
			at, ok = w.at, true
		}
	}
	for _, p := range m.parked {
		if !ok || p.deadline < at {
			at, ok = p.deadline, true
		}
	}
	return at, ok
}

// park is Park(x, ready once ver reaches target, maxWait).
func (m *prioModel) park(x, target int, maxWait time.Duration) {
	if m.shut {
		return
	}
	m.promote()
	if maxWait <= 0 {
		m.unpark(x, m.now)
		m.add(x, 0)
		return
	}
	_, was := m.parked[x]
	m.parked[x] = prioPark{target: target, deadline: m.now + maxWait, seq: m.seq}
	m.seq++
	if !was {
		if m.dirty[x] && !m.proc[x] {
			for i, e := range m.ready {
				if e.x == x {
					m.removeReady(i)
					break
				}
			}
		}
		if !m.dirty[x] {
			m.dirty[x] = true
			m.pend[x] = 0
		}
	}
	if m.ver >= target {
		m.unpark(x, m.now)
	}
}

// unpark releases x, if parked: its held run joins the ready entries at
// time at unless x is being processed.
func (m *prioModel) unpark(x int, at time.Duration) {
	if _, ok := m.parked[x]; !ok {
		return
	}
	delete(m.parked, x)
	if m.dirty[x] && !m.proc[x] {
		m.appendReady(prioEntry{x, m.pend[x], at})
	}
}

// wake releases, in the order they were parked, the parked items whose
// target the version has reached.
func (m *prioModel) wake() {
	if m.shut {
		return
	}
	m.promote()
	var ready []int
	for x, p := range m.parked {
		if m.ver >= p.target {
			ready = append(ready, x)
		}
	}
	sort.Slice(ready, func(i, j int) bool { return m.parked[ready[i]].seq < m.parked[ready[j]].seq })
	for _, x := range ready {
		m.unpark(x, m.now)
	}
}

// detachParked takes the parked items' held runs out, keeping their
// priorities: at shutdown and in TakeWaiting.
func (m *prioModel) detachParked() {
	for x, p := range m.parked {
		if m.dirty[x] {
			p.prio = m.pend[x]
			m.parked[x] = p
			m.dirty[x] = false
			m.pend[x] = 0
		}
	}
}

// reschedule is Reschedule(x, d).
func (m *prioModel) reschedule(x int, d time.Duration) {
	if m.shut {
		return
	}
	m.promote()
	if w, ok := m.waiting[x]; ok && d > 0 {
		w.at, w.seq = m.now+d, m.seq
		m.seq++
		m.waiting[x] = w
		return
	}
	m.addAfter(x, d, 0)
}

// cancelWaiting is CancelWaiting(x).
func (m *prioModel) cancelWaiting(x int) bool {
	m.promote()
	_, ok := m.waiting[x]
	delete(m.waiting, x)
	return ok
}

// waitingFor is WaitingFor(x).
func (m *prioModel) waitingFor(x int) (time.Duration, bool) {
	if m.shut {
		return 0, false
	}
	m.promote()
	w, ok := m.waiting[x]
	if !ok {
		return 0, false
	}
	return w.at - m.now, true
}

func (m *prioModel) enqueue(x, prio int, at time.Duration) {
	if m.dirty[x] {
		if prio <= m.pend[x] {
			return
		}
		m.pend[x] = prio
		if _, parked := m.parked[x]; !m.proc[x] && !parked {
			for i, e := range m.ready {
				if e.x == x {
					m.removeReady(i)
					break
				}
			}
			m.appendReady(prioEntry{x, prio, at})
		}
		return
	}
	m.dirty[x] = true
	m.pend[x] = prio
	if !m.proc[x] {
		m.appendReady(prioEntry{x, prio, at})
	}
}

func (m *prioModel) add(x, prio int) {
	if m.shut {
		return
	}
	m.promote()
	if w, ok := m.waiting[x]; ok {
		prio = max(prio, w.prio)
		delete(m.waiting, x)
	}
	m.enqueue(x, prio, m.now)
}

func (m *prioModel) wait(x int, d time.Duration, prio int) {
	w, ok := m.waiting[x]
	if !ok {
		m.waiting[x] = prioWait{m.now + d, m.seq, prio}
		m.seq++
		return
	}
	w.prio = max(w.prio, prio)
	if m.now+d < w.at {
		w.at, w.seq = m.now+d, m.seq
		m.seq++
	}
	m.waiting[x] = w
}

func (m *prioModel) addAfter(x int, d time.Duration, prio int) {
	if m.shut {
		return
	}
	m.promote()
	if d <= 0 {
		m.add(x, prio)
		return
	}
	m.wait(x, d, prio)
}

// absorb applies an add after a delay (AddWithOptions) to x's pending run,
// if it has one, and reports whether it had: a waiting x takes the earlier
// ready time, and a waiting or queued x the higher priority.
func (m *prioModel) absorb(x int, after time.Duration, prio int) bool {
	_, waits := m.waiting[x]
	if !waits && !m.dirty[x] {
		return false
	}
	if waits {
		if after > 0 {
			m.wait(x, after, prio)
		} else {
			w := m.waiting[x]
			w.prio = max(w.prio, prio)
			m.waiting[x] = w
		}
	}
	if m.dirty[x] {
		m.enqueue(x, prio, m.now)
	}
	return true
}

// addWithOptions is AddWithOptions without RateLimited.
func (m *prioModel) addWithOptions(x int, d time.Duration, prio int) {
	if m.shut {
		return
	}
	m.promote()
	if d <= 0 {
		m.add(x, prio)
		return
	}
	if !m.absorb(x, d, prio) {
		m.wait(x, d, prio)
	}
}

func (m *prioModel) addRateLimited(x int, after time.Duration, prio int) {
	if m.shut {
		return
	}
	m.promote()
	if m.absorb(x, after, prio) {
		return
	}
	d := m.delay(m.fails[x])
	m.fails[x]++
	if after > 0 {
		d = min(d, after)
	}
	m.addAfter(x, d, prio)
}

// get hands out the oldest overdue entry with maxWait; else, from the
// highest priority, the first entry, or with fairness the first entry of
// the key whose turn it is, which then moves to the end of the order if it
// has more.
func (m *prioModel) get() (x, prio int, shut bool) {
	m.promote()
	if len(m.ready) == 0 {
		return 0, 0, true
	}
	pick := -1
	if m.maxWait > 0 {
		// The oldest overdue entry of a priority (its first: the entries
		// joined in time order), the higher priority on ties.
		heads := map[int]int{}
		for i, e := range m.ready {
			if _, ok := heads[e.prio]; !ok {
				heads[e.prio] = i
			}
		}
		for _, i := range heads {
			e := m.ready[i]
			if m.now-e.at <= m.maxWait {
				continue
			}
			if pick < 0 || e.at < m.ready[pick].at || (e.at == m.ready[pick].at && e.prio > m.ready[pick].prio) {
				pick = i
			}
		}
		if pick >= 0 {
			return m.take(pick)
		}
	}
	top := m.ready[0].prio
	for _, e := range m.ready {
		top = max(top, e.prio)
	}
	k := ""
	if m.fair {
		k = m.turns[top][0]
	}
	for i, e := range m.ready {
		if e.prio == top && (!m.fair || fairKey(e.x) == k) {
			pick = i
			break
		}
	}
	x, prio, shut = m.take(pick)
	if turns := m.turns[top]; m.fair && len(turns) > 0 && turns[0] == k {
		m.turns[top] = append(turns[1:len(turns):len(turns)], k)
	}
	return x, prio, shut
}

// take hands out the ready entry at index i.
func (m *prioModel) take(i int) (x, prio int, shut bool) {
	e := m.removeReady(i)
	m.dirty[e.x] = false
	m.proc[e.x] = true
	m.pend[e.x] = 0
	return e.x, e.prio, false
}

func (m *prioModel) done(x int) {
	m.promote()
	if !m.proc[x] {
		return
	}
	delete(m.proc, x)
	if _, parked := m.parked[x]; m.dirty[x] && !parked {
		m.appendReady(prioEntry{x, m.pend[x], m.now})
	}
}

func (m *prioModel) length() int {
	m.promote()
	return len(m.ready)
}

// runPriorityModel drives a queue and the model with the operations that
// ops encodes, and reports the first disagreement.
// With fair, the queue and the model have WithFairness(fairKey).
func runPriorityModel(t *testing.T, ops []byte, maxWait time.Duration, fair bool) {
	t.Helper()
	delay := func(n int) time.Duration { return time.Duration(1+n%4) * 10 * time.Millisecond }
	fc := newQueueClock()
	l := newQLimiter[int](delay)
	opts := []backoff.Option{backoff.WithClock(fc), backoff.WithMaxReadyWait(maxWait)}
	if fair {
		opts = append(opts, backoff.WithFairness(fairKey))
	}
	q := backoff.NewRateLimitingQueue[int](l, opts...)
	defer q.ShutDown()
	m := newPrioModel(delay, maxWait, fair)
	var version atomic.Int64 // what the ready functions of Park read
	prios := [...]int{-100, -1, 0, 0, 1, 5, 0, -100}
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s after %v", fmt.Sprintf(format, args...), log[max(0, len(log)-40):])
	}
	for i := 0; i+3 <= len(ops); i += 3 {
		op, a, b := ops[i], ops[i+1], ops[i+2]
		x := int(a % 6)
		prio := prios[(a>>3)%8]
		d := time.Duration(int(b%8)-2) * 10 * time.Millisecond
		var name string
		switch r := op % 128; {
		case r < 15:
			name = fmt.Sprintf("Add(%d)", x)
			q.Add(x)
			m.add(x, 0)
		case r < 30:
			o := backoff.AddOptions{After: d, Priority: prio, RateLimited: b&64 != 0}
			name = fmt.Sprintf("AddWithOptions(%+v, %d)", o, x)
			q.AddWithOptions(o, x)
			if o.RateLimited {
				m.addRateLimited(x, d, prio)
			} else {
				m.addWithOptions(x, d, prio)
			}
		case r < 38:
			name = fmt.Sprintf("AddAfter(%d, %v)", x, d)
			q.AddAfter(x, d)
			m.addAfter(x, d, 0)
		case r < 44:
			name = fmt.Sprintf("AddRateLimited(%d)", x)
			q.AddRateLimited(x)
			m.addRateLimited(x, 0, 0)
		case r < 64:
			if m.length() == 0 && !m.shut {
				continue // Get would block
			}
			item, p, shut := q.GetWithPriority()
			wx, wp, ws := m.get()
			name = fmt.Sprintf("GetWithPriority() = %d, %d, %v", item, p, shut)
			if item != wx || p != wp || shut != ws {
				fail("%s, want %d, %d, %v", name, wx, wp, ws)
			}
		case r < 80:
			for p := range m.proc {
				x = p
				break
			}
			name = fmt.Sprintf("Done(%d)", x)
			q.Done(x)
			m.done(x)
		case r < 92:
			step := time.Duration(b%4) * 10 * time.Millisecond
			name = fmt.Sprintf("Step(%v)", step)
			fc.Step(step)
			m.now += step
		case r < 95:
			name = fmt.Sprintf("Forget(%d)", x)
			q.Forget(x)
			delete(m.fails, x)
		case r < 97:
			name = "TakeWaiting()"
			m.promote()
			m.detachParked()
			want := []string{}
			w, p := m.waitingInOrder(), m.parkedInOrder()
			for len(w) > 0 || len(p) > 0 {
				if len(w) == 0 || (len(p) > 0 && m.parked[p[0]].deadline < m.waiting[w[0]].at) {
					want = append(want, fmt.Sprintf("%d@%d parked", p[0], m.parked[p[0]].prio))
					p = p[1:]
					continue
				}
				want = append(want, fmt.Sprintf("%d@%d", w[0], m.waiting[w[0]].prio))
				w = w[1:]
			}
			m.waiting = map[int]prioWait{}
			m.parked = map[int]prioPark{}
			got := []string{}
			for _, w := range q.TakeWaiting() {
				s := fmt.Sprintf("%d@%d", w.Item, w.Priority)
				if w.Parked {
					s += " parked"
				}
				got = append(got, s)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				fail("%s = %v, want %v", name, got, want)
			}
		case r < 98:
			name = "ShutDown()"
			q.ShutDown()
			m.promote()
			m.shut = true
			m.detachParked()
		case r < 104:
			name = fmt.Sprintf("Reschedule(%d, %v)", x, d)
			q.Reschedule(x, d)
			m.reschedule(x, d)
		case r < 108:
			got, want := q.CancelWaiting(x), m.cancelWaiting(x)
			name = fmt.Sprintf("CancelWaiting(%d) = %v", x, got)
			if got != want {
				fail("%s, want %v", name, want)
			}
		case r < 116:
			target := m.ver + int(b>>6) // 0 to 3 versions ahead: ready at once for 0
			name = fmt.Sprintf("Park(%d, version ≥ %d, %v)", x, target, d)
			q.Park(x, func() bool { return version.Load() >= int64(target) }, d)
			m.park(x, target, d)
		case r < 121:
			name = "version++"
			m.ver++
			version.Store(int64(m.ver))
		case r < 127:
			name = "Wake()"
			q.Wake()
			m.wake()
		default:
			continue
		}
		log = append(log, name)
		if got, want := q.Len(), m.length(); got != want {
			fail("Len() = %d, want %d", got, want)
		}
		if got, want := q.NumRequeues(x), m.fails[x]; got != want {
			fail("NumRequeues(%d) = %d, want %d", x, got, want)
		}
		at, ok := q.NextReadyAt()
		if wantAt, wantOK := m.nextAt(); wantOK && !m.shut {
			if !ok || at.Sub(epoch) != wantAt {
				fail("NextReadyAt() = %v, %v, want %v", at.Sub(epoch), ok, wantAt)
			}
		} else if ok {
			fail("NextReadyAt() = %v, true, want false", at.Sub(epoch))
		}
		gotFor, gotOK := q.WaitingFor(x)
		if wantFor, wantOK := m.waitingFor(x); gotFor != wantFor || gotOK != wantOK {
			fail("WaitingFor(%d) = %v, %v, want %v, %v", x, gotFor, gotOK, wantFor, wantOK)
		}
		if _, want := m.parked[x]; q.Parked(x) != want {
			fail("Parked(%d) = %v, want %v", x, !want, want)
		}
	}
}

func TestPriorityQueueAgreesWithModel(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	runPriorityModelSeeds(t, false, 21)
}

// runPriorityModelSeeds runs runPriorityModel over random operation
// sequences (20 seeds of 600 operations, 400 of 3,000 with BACKOFF_LONG),
// without and with a max-ready-wait bound; stream picks the sequences.
func runPriorityModelSeeds(t *testing.T, fair bool, stream uint64) {
	seeds, n := uint64(20), 600
	if longTests() {
		seeds, n = 400, 3000
	}
	for _, maxWait := range []time.Duration{0, 25 * time.Millisecond} {
		for seed := uint64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprintf("maxWait=%v/%d", maxWait, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, stream))
				ops := make([]byte, 3*n)
				for i := range ops {
					ops[i] = byte(rng.Uint32())
				}
				runPriorityModel(t, ops, maxWait, fair)
			})
		}
	}
}

func FuzzPriorityQueue(f *testing.F) {
	f.Add([]byte{20, 8, 70, 50, 0, 0, 70, 1, 1}, false)
	f.Add([]byte{25, 200, 3, 10, 40, 2, 85, 1, 3, 55, 0, 0}, true)
	f.Fuzz(func(t *testing.T, ops []byte, bounded bool) {
		maxWait := time.Duration(0)
		if bounded {
			maxWait = 25 * time.Millisecond
		}
		fair := len(ops) > 0 && ops[0]&1 == 1
		runPriorityModel(t, ops, maxWait, fair)
	})
}

// TestPriorityQueueWithFairnessAgreesWithModel is
// TestPriorityQueueAgreesWithModel with fairness: the exact round-robin
// order, raised items included, and with the bound the oldest overdue item
// first.
func TestPriorityQueueWithFairnessAgreesWithModel(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	runPriorityModelSeeds(t, true, 22)
}
