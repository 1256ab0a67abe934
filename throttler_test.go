package backoff_test

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	testingclock "k8s.io/utils/clock/testing"
)

func TestThrottlerAllowsWhileTheDownstreamAccepts(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(epoch)
	th := backoff.NewThrottler(2, 10*time.Second, backoff.WithClock(clk))
	for range 10000 {
		if !th.Allow() {
			t.Fatal("rejected while every request is accepted")
		}
		th.Record(true)
		clk.Step(time.Millisecond)
	}
	// Half accepted, k = 2: requests − 2·accepts ≤ 0, nothing is rejected.
	for i := range 10000 {
		if !th.Allow() {
			t.Fatal("rejected while half the requests are accepted")
		}
		th.Record(i%2 == 0)
		clk.Step(time.Millisecond)
	}
}

// TestThrottlerRejectsWithTheSREProbability checks the rejection rate against
// max(0, (requests − k·accepts)/(requests + 1)) with counts held still: the
// clock does not move, so the window holds every call.
func TestThrottlerRejectsWithTheSREProbability(t *testing.T) {
	for _, tc := range []struct {
		k                 float64
		requests, accepts int
	}{
		{2, 1000, 100}, {2, 1000, 0}, {1.5, 1000, 500}, {3, 900, 100},
	} {
		th := backoff.NewThrottler(tc.k, time.Minute, backoff.WithClock(testingclock.NewFakeClock(epoch)))
		for i := range tc.requests {
			th.Allow()
			th.Record(i < tc.accepts)
		}
		// Measure over few calls, so that the counts barely move.
		rejected := 0
		const n = 2000
		for range n {
			if !th.Allow() {
				rejected++
			}
		}
		want, a := 0.0, float64(tc.accepts)
		for i := range n {
			r := float64(tc.requests + i)
			want += math.Max(0, (r-tc.k*a)/(r+1)) / n
		}
		assert.InDelta(t, want, float64(rejected)/n, 0.04, "k %v, %d requests, %d accepts", tc.k, tc.requests, tc.accepts)
	}
}

func TestThrottlerForgetsWhatLeftTheWindow(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	th := backoff.NewThrottler(2, 10*time.Second, backoff.WithClock(clk))
	for range 1000 {
		th.Allow()
		th.Record(false)
	}
	rejected := 0
	for range 100 {
		if !th.Allow() {
			rejected++
		}
	}
	assert.Greater(t, rejected, 90, "after 1000 refusals almost everything is rejected")
	clk.Step(11 * time.Second)
	for range 100 {
		assert.True(t, th.Allow(), "the refusals have left the window")
		th.Record(true)
	}
}

// TestThrottlerForgetsEachBucketAsTheWindowSlides: a window that moves by
// fewer than its 10 buckets drops exactly the buckets that left it. The
// refusals counted in the first second stay while the window moves 7
// buckets, then leave it when it moves 3 more; every bucket that the move
// reuses (up to the new current one, which takes the first second's slot)
// must start empty.
func TestThrottlerForgetsEachBucketAsTheWindowSlides(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	th := backoff.NewThrottler(2, 10*time.Second, backoff.WithClock(clk)) // buckets of 1 s
	for range 1000 {
		th.Allow()
		th.Record(false)
	}
	clk.Step(7 * time.Second) // 7 buckets on: the refusals are still in the window
	rejected := 0
	for range 10 {
		if !th.Allow() {
			rejected++
		}
	}
	assert.GreaterOrEqual(t, rejected, 8, "7 s on, the refusals of the first second still count")

	clk.Step(3 * time.Second) // 3 buckets on: the first second has left the window
	rejected = 0
	for range 100 {
		if !th.Allow() {
			rejected++
		}
		th.Record(true)
	}
	// What remains is the 10 requests of second 7 and these, half accepted
	// or better after the first few: at most a few rejections.
	assert.LessOrEqual(t, rejected, 5, "the refusals of the first second must have left the sums")
}

// TestThrottlerRejectsNothingOnItsFirstRequest: the first request of a
// window finds no earlier requests (the formula counts the earlier calls,
// not the call being decided), so it is never rejected, however often the
// throttler is built.
func TestThrottlerRejectsNothingOnItsFirstRequest(t *testing.T) {
	for i := range 200 {
		clk := testingclock.NewFakeClock(epoch.Add(time.Duration(i) * time.Nanosecond)) // a new seed each time
		th := backoff.NewThrottler(2, 10*time.Second, backoff.WithClock(clk))
		if !th.Allow() {
			t.Fatalf("throttler %d rejected its first request", i)
		}
	}
}

func TestThrottlerIsDeterministicOnAFakeClock(t *testing.T) {
	run := func() []bool {
		th := backoff.NewThrottler(2, time.Minute, backoff.WithClock(testingclock.NewFakeClock(epoch)))
		out := make([]bool, 500)
		for i := range out {
			out[i] = th.Allow()
			th.Record(i%5 == 0)
		}
		return out
	}
	assert.Equal(t, run(), run())
}

func TestThrottlerBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"k < 1", func() { backoff.NewThrottler(0.5, time.Second) }, "backoff: NewThrottler: k must be a finite number ≥ 1, got 0.5"},
		{"NaN k", func() { backoff.NewThrottler(math.NaN(), time.Second) }, "backoff: NewThrottler: k must be a finite number ≥ 1, got NaN"},
		{"infinite k", func() { backoff.NewThrottler(math.Inf(1), time.Second) }, "backoff: NewThrottler: k must be a finite number ≥ 1, got +Inf"},
		{"zero window", func() { backoff.NewThrottler(2, 0) }, "backoff: NewThrottler: window must be positive, got 0s"},
		{"negative window", func() { backoff.NewThrottler(2, -time.Second) }, "backoff: NewThrottler: window must be positive, got -1s"},
		{"tiny window", func() { backoff.NewThrottler(2, 5) }, "backoff: NewThrottler: window must be at least 10ns, got 5ns"},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.PanicsWithValue(t, tc.want, tc.f) })
	}
}

func TestThrottlerConcurrentUse(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(epoch)
	th := backoff.NewThrottler(2, time.Second, backoff.WithClock(clk))
	var wg sync.WaitGroup
	var allowed atomic.Int64
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				if th.Allow() {
					allowed.Add(1)
					th.Record((i+g)%4 == 0)
				}
				if i%100 == 0 {
					clk.Step(10 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	// A quarter accepted with k = 2: some requests are rejected, and every
	// call is counted once, as allowed or as rejected.
	assert.Equal(t, int64(16*1000), allowed.Load()+int64(th.Rejected()))
	assert.Positive(t, th.Rejected(), "a quarter accepted with k = 2 rejects some")
	clk.Step(2 * time.Second)
	assert.True(t, th.Allow(), "an empty window rejects nothing")
}

// FuzzThrottler checks that the throttler never rejects while the accepts
// keep up with requests/k, whatever k and window.
func FuzzThrottler(f *testing.F) {
	f.Add(2.0, int64(time.Second), []byte{1, 2, 3})
	f.Add(1.0, int64(10), []byte{255, 0})
	f.Fuzz(func(t *testing.T, k float64, window int64, steps []byte) {
		if math.IsNaN(k) || k < 1 || k > 1e6 || window < 10 {
			t.Skip()
		}
		clk := testingclock.NewFakeClock(epoch)
		th := backoff.NewThrottler(k, time.Duration(window), backoff.WithClock(clk))
		for _, s := range steps {
			if !th.Allow() {
				t.Fatalf("rejected with every request accepted (k %v, window %v)", k, time.Duration(window))
			}
			th.Record(true)
			clk.Step(time.Duration(s) * time.Millisecond)
		}
	})
}

func BenchmarkThrottlerAllowRecord(b *testing.B) {
	th := backoff.NewThrottler(2, time.Minute)
	b.ReportAllocs()
	for i := range b.N {
		if th.Allow() {
			th.Record(i%4 != 0)
		}
	}
}

// TestThrottlerCountsRejections: Rejected counts the calls of Allow that
// returned false, and only those.
func TestThrottlerCountsRejections(t *testing.T) {
	th := backoff.NewThrottler(1, time.Minute, backoff.WithClock(newQueueClock()))
	refused := uint64(0)
	for range 200 {
		if th.Allow() {
			th.Record(false)
		} else {
			refused++
		}
	}
	assert.Positive(t, refused)
	assert.Equal(t, refused, th.Rejected())
}
