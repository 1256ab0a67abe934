package backoff

import (
	"github.com/stretchr/testify/assert"
	"io"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

func TestAddDuration(t *testing.T) {
	tests := []struct {
		name string
		a, b time.Duration
		want time.Duration
	}{
		{"small", time.Second, 2 * time.Second, 3 * time.Second},
		{"negative is zero", -time.Second, time.Second, time.Second},
		{"saturates", maxDuration - 1, 2, maxDuration},
		{"max plus max", maxDuration, maxDuration, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, addDuration(tt.a, tt.b))
		})
	}
}

func TestShiftDuration(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		n    int
		want time.Duration
	}{
		{"5ms·2^17 exact", 5 * time.Millisecond, 17, 655360 * time.Millisecond},
		{"zero shift", time.Second, 0, time.Second},
		{"negative shift", time.Second, -3, time.Second},
		{"zero base", 0, 10, 0},
		{"zero base, shift past the width", 0, 63, 0},
		{"negative base", -time.Second, 1, 0},
		{"largest that fits", 1, 62, 1 << 62},
		{"one past fits", 1, 63, maxDuration},
		{"huge shift", 1, 1 << 30, maxDuration},
		{"quarter of max, third step", maxDuration / 4, 2, maxDuration - 3},
		{"quarter of max overflows", maxDuration/4 + 1, 2, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, shiftDuration(tt.d, tt.n))
		})
	}
}

func TestScaleDuration(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		f    float64
		want time.Duration
	}{
		{"double", time.Second, 2, 2 * time.Second},
		{"fraction", time.Second, 0.5, 500 * time.Millisecond},
		{"zero factor", time.Second, 0, 0},
		{"negative factor", time.Second, -1, 0},
		{"NaN factor", time.Second, math.NaN(), 0},
		{"Inf factor", time.Second, math.Inf(1), maxDuration},
		{"negative duration", -time.Second, 2, 0},
		{"saturates", maxDuration / 2, 3, maxDuration},
		{"max times one", maxDuration, 1, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, scaleDuration(tt.d, tt.f))
		})
	}
}

func TestClampDuration(t *testing.T) {
	assert.Equal(t, time.Duration(0), clampDuration(-time.Second, time.Minute))
	assert.Equal(t, time.Minute, clampDuration(time.Hour, time.Minute))
	assert.Equal(t, time.Hour, clampDuration(time.Hour, 0), "limit 0 means no limit")
	assert.Equal(t, time.Second, clampDuration(time.Second, time.Minute))
}

func TestRandDuration(t *testing.T) {
	for _, n := range []time.Duration{0, -time.Second, math.MinInt64} {
		assert.Zero(t, randDuration(n), "randDuration(%v)", n)
	}
	assert.Zero(t, randDuration(1), "the only value in [0, 1)")
	for range 100 {
		d := randDuration(time.Second)
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.Less(t, d, time.Second)
	}
}

func TestNewConfig(t *testing.T) {
	assert.Equal(t, clock.RealClock{}, newConfig(nil).clock, "the real clock by default")

	start := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	fc := testingclock.NewFakeClock(start)
	other := testingclock.NewFakeClock(start)
	c := newConfig([]Option{WithClock(other), {}, WithClock(fc)})
	assert.Same(t, fc, c.clock, "zero options are skipped and the last option wins")

	assert.PanicsWithValue(t, "backoff: WithClock: c must not be nil, got <nil>", func() { WithClock(nil) })
	// A typed nil passes c == nil and used to crash on first use.
	var nilFake *testingclock.FakeClock
	assert.PanicsWithValue(t, "backoff: WithClock: c must not be nil, got <nil>", func() { WithClock(nilFake) })
}

func TestNewConfigWithoutOptionsDoesNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() { _ = newConfig(nil) })
	assert.Zero(t, allocs)
}

func TestNewConfigAppliesEveryOption(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	expiry := func(time.Time, time.Time, time.Duration) bool { return true }
	onPanic := func(any) {}
	notify := func(int, error, time.Duration) {}
	retryable := func(error) bool { return false }
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	metrics := NopQueueMetrics{}
	fairKey := func(string) string { return "" }
	budget := NewRetryBudget(0.1, 1, time.Second, WithClock(fc))
	budgetMetrics := &countingBudgetMetrics{}
	name := strings.Repeat("q", 3)
	c := newConfig([]Option{
		WithClock(fc), WithExpiry(expiry), WithRequeueJitter(0.25), WithMaxTrackedItems(7), WithMaxKeys(9),
		WithPanicHandler(onPanic), WithMaxElapsedTime(time.Minute), WithNotify(notify), WithRetryable(retryable),
		WithJitterKind(EqualJitter), WithMaxRetryAfter(0), WithName(name), WithLogger(logger), WithMetrics(metrics),
		WithFairness(fairKey), WithMaxReadyWait(time.Hour), WithRetryBudget(budget), WithRetryBudgetMetrics(budgetMetrics),
	})
	assert.Same(t, fc, c.clock)
	assert.NotNil(t, c.backoff.expiry)
	assert.Equal(t, limiterConfig{jitter: 0.25, maxTracked: 7, maxKeys: 9}, c.limiter)
	assert.NotNil(t, c.loop.onPanic)
	assert.Equal(t, time.Minute, c.retry.maxElapsed)
	assert.NotNil(t, c.retry.notify)
	assert.False(t, c.retry.retryable(nil))
	assert.Equal(t, EqualJitter, c.retry.jitter)
	assert.True(t, c.retry.ignoreHints, "WithMaxRetryAfter(0) ignores hints")
	assert.Equal(t, "qqq", c.queue.name)
	assert.Same(t, logger, c.queue.logger)
	assert.Equal(t, metrics, c.queue.metrics)
	assert.NotNil(t, c.queue.priority.fairKey)
	assert.Equal(t, time.Hour, c.queue.priority.maxReadyWait)
	assert.Same(t, budget, c.budget.budget)
	assert.Same(t, budgetMetrics, c.budget.metrics)

	c = newConfig([]Option{WithMaxRetryAfter(time.Second)})
	assert.Equal(t, time.Second, c.retry.maxRetryAfter)
	assert.False(t, c.retry.ignoreHints)
}

func TestNewConfigWithOptionsDoesNotAllocate(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	notify := func(int, error, time.Duration) {}
	allocs := testing.AllocsPerRun(100, func() {
		_ = newConfig([]Option{WithClock(fc), WithMaxElapsedTime(time.Second), WithNotify(notify), WithName("q")})
	})
	assert.Zero(t, allocs)
}

type countingBudgetMetrics struct{ requests, retries, refused int }

func (m *countingBudgetMetrics) IncRequests() { m.requests++ }
func (m *countingBudgetMetrics) IncRetries()  { m.retries++ }
func (m *countingBudgetMetrics) IncRefused()  { m.refused++ }

func TestJitterBounds(t *testing.T) {
	const d = time.Second
	seen := map[time.Duration]bool{}
	for range 1000 {
		got := Jitter(d, 0.5)
		assert.GreaterOrEqual(t, got, d)
		assert.Less(t, got, d+d/2)
		seen[got] = true
	}
	assert.Greater(t, len(seen), 900, "jitter should actually vary")
}

func TestJitterNoSpread(t *testing.T) {
	for _, f := range []float64{0, -1, math.NaN()} {
		assert.Equal(t, time.Second, Jitter(time.Second, f), "maxFactor %v means no jitter", f)
	}
}

func TestJitterClampsAndSaturates(t *testing.T) {
	assert.Equal(t, time.Duration(0), Jitter(-time.Second, 1), "negative d is treated as 0")
	assert.Equal(t, time.Duration(0), Jitter(0, 1))
	got := Jitter(time.Duration(math.MaxInt64/2), math.Inf(1))
	assert.Equal(t, time.Duration(math.MaxInt64), got, "saturates instead of overflowing")
	assert.GreaterOrEqual(t, Jitter(time.Duration(math.MaxInt64), 10), time.Duration(0))
}

func BenchmarkJitter(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		_ = Jitter(time.Second, 0.1)
	}
}
