package backoff_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spread returns n latencies of the distribution whose quantile function is
// q, in an order that mixes small and large ones: the (i+0.5)/n quantiles,
// visited with a stride prime to n.
func spread(n int, q func(p float64) time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		j := (i * 7919) % n
		out[i] = q((float64(j) + 0.5) / float64(n))
	}
	return out
}

func uniformMs(hi float64) func(float64) time.Duration {
	return func(p float64) time.Duration { return time.Duration(p * hi * float64(time.Millisecond)) }
}

// lognormal is the quantile function of a lognormal latency with the given
// median and shape.
func lognormal(median time.Duration, sigma float64) func(float64) time.Duration {
	return func(p float64) time.Duration {
		z := math.Sqrt2 * math.Erfinv(2*p-1)
		return time.Duration(float64(median) * math.Exp(sigma*z))
	}
}

// TestHedgeDelayConvergesToTheQuantile: fed deterministic samples of known
// distributions, the learned delay is their quantile, within the
// histogram's precision.
func TestHedgeDelayConvergesToTheQuantile(t *testing.T) {
	for _, c := range []struct {
		name     string
		quantile float64
		q        func(float64) time.Duration
		tol      float64 // relative
	}{
		{"uniform p95", 0.95, uniformMs(1000), 0.02},
		{"uniform p50", 0.5, uniformMs(1000), 0.02},
		{"lognormal p95", 0.95, lognormal(10*time.Millisecond, 0.5), 0.05},
		{"lognormal p99", 0.99, lognormal(10*time.Millisecond, 1), 0.05},
	} {
		t.Run(c.name, func(t *testing.T) {
			hd := backoff.NewHedgeDelay(c.quantile, time.Microsecond, time.Hour)
			samples := spread(1024, c.q)
			for range 3 {
				for _, d := range samples {
					hd.Observe(d)
				}
			}
			got, ok := hd.Delay()
			require.True(t, ok)
			want := c.q(c.quantile)
			assert.InEpsilon(t, float64(want), float64(got), c.tol, "want %v, got %v", want, got)
		})
	}
}

// TestHedgeDelayFollowsAChange: after the downstream gets faster, the
// learned delay follows within a few thousand latencies, the old ones
// having been halved away.
func TestHedgeDelayFollowsAChange(t *testing.T) {
	hd := backoff.NewHedgeDelay(0.95, time.Microsecond, time.Hour)
	for range 5 {
		for _, d := range spread(1024, uniformMs(1000)) {
			hd.Observe(d)
		}
	}
	before, _ := hd.Delay()
	assert.InEpsilon(t, float64(950*time.Millisecond), float64(before), 0.02)
	for range 5 {
		for _, d := range spread(1024, uniformMs(100)) {
			hd.Observe(d)
		}
	}
	after, _ := hd.Delay()
	assert.InEpsilon(t, float64(95*time.Millisecond), float64(after), 0.05, "got %v", after)
}

// TestHedgeDelayNeedsTwentySamplesAndStaysWithinItsBounds: no delay before
// 20 latencies, and the learned one clamped to [floor, ceiling].
func TestHedgeDelayNeedsTwentySamplesAndStaysWithinItsBounds(t *testing.T) {
	hd := backoff.NewHedgeDelay(0.9, 5*time.Millisecond, 50*time.Millisecond)
	for range 19 {
		hd.Observe(time.Millisecond)
	}
	d, ok := hd.Delay()
	assert.False(t, ok)
	assert.Equal(t, 50*time.Millisecond, d, "the ceiling before it has learned")
	hd.Observe(time.Millisecond)
	d, ok = hd.Delay()
	assert.True(t, ok)
	assert.Equal(t, 5*time.Millisecond, d, "the floor")
	for range 2000 {
		hd.Observe(time.Minute)
	}
	d, _ = hd.Delay()
	assert.Equal(t, 50*time.Millisecond, d, "the ceiling")
	for range 10000 {
		hd.Observe(-time.Second) // counts as 0
	}
	d, _ = hd.Delay()
	assert.Equal(t, 5*time.Millisecond, d)
}

// TestHedgeDelayObserveAllocatesNothing: a sample costs no allocation, the
// recomputations and halvings included.
func TestHedgeDelayObserveAllocatesNothing(t *testing.T) {
	hd := backoff.NewHedgeDelay(0.95, time.Microsecond, time.Hour)
	samples := spread(1024, lognormal(time.Millisecond, 1))
	i := 0
	allocs := testing.AllocsPerRun(5000, func() {
		hd.Observe(samples[i%len(samples)])
		i++
	})
	assert.Zero(t, allocs)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = hd.Delay() }))
}

// TestHedgeDelayConcurrentObservers: many goroutines observe at once (run
// with -race), and the result is still the quantile.
func TestHedgeDelayConcurrentObservers(t *testing.T) {
	hd := backoff.NewHedgeDelay(0.95, time.Microsecond, time.Hour)
	samples := spread(1024, uniformMs(1000))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				hd.Observe(samples[(i+g*125)%len(samples)])
				_, _ = hd.Delay()
			}
		}()
	}
	wg.Wait()
	got, ok := hd.Delay()
	require.True(t, ok)
	assert.InEpsilon(t, float64(950*time.Millisecond), float64(got), 0.05)
}
