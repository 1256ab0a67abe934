package backoff_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// These stress tests cover issue 6 §3 where the concurrency tests of each
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
