package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/retrykit/backoff"
)

func TestJitterBounds(t *testing.T) {
	const d = time.Second
	seen := map[time.Duration]bool{}
	for range 1000 {
		got := backoff.Jitter(d, 0.5)
		assert.GreaterOrEqual(t, got, d)
		assert.Less(t, got, d+d/2)
		seen[got] = true
	}
	assert.Greater(t, len(seen), 900, "jitter should actually vary")
}

func TestJitterNoSpread(t *testing.T) {
	for _, f := range []float64{0, -1, math.NaN()} {
		assert.Equal(t, time.Second, backoff.Jitter(time.Second, f), "maxFactor %v means no jitter", f)
	}
}

func TestJitterClampsAndSaturates(t *testing.T) {
	assert.Equal(t, time.Duration(0), backoff.Jitter(-time.Second, 1), "negative d is treated as 0")
	assert.Equal(t, time.Duration(0), backoff.Jitter(0, 1))
	got := backoff.Jitter(time.Duration(math.MaxInt64/2), math.Inf(1))
	assert.Equal(t, time.Duration(math.MaxInt64), got, "saturates instead of overflowing")
	assert.GreaterOrEqual(t, backoff.Jitter(time.Duration(math.MaxInt64), 10), time.Duration(0))
}

func BenchmarkJitter(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		_ = backoff.Jitter(time.Second, 0.1)
	}
}
