package backoff_test

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// newFakeBackOff returns a Backoff without jitter on a fake clock at epoch.
func newFakeBackOff(t *testing.T, initial, maxDelay time.Duration, opts ...backoff.Option) (*backoff.Backoff, *testingclock.FakeClock) {
	t.Helper()
	fc := testingclock.NewFakeClock(epoch)
	opts = append([]backoff.Option{backoff.WithClock(fc)}, opts...)
	return backoff.NewBackOff(initial, maxDelay, opts...), fc
}

func TestBackoffNextDoublesUpToMax(t *testing.T) {
	b, fc := newFakeBackOff(t, time.Second, 10*time.Second)
	want := []time.Duration{1, 2, 4, 8, 10, 10, 10}
	for i, w := range want {
		b.Next("id", fc.Now())
		assert.Equal(t, w*time.Second, b.Get("id"), "after Next #%d", i+1)
		assert.Equal(t, i+1, b.Attempts("id"), "after Next #%d", i+1)
		fc.Step(time.Second)
	}
	assert.Zero(t, b.Get("other"), "ids are independent")
	assert.Zero(t, b.Attempts("other"))
}

func TestBackoffNextSetsLastUpdateFromClock(t *testing.T) {
	// Next stamps the entry with the clock's time, not with eventTime, so a
	// stale eventTime does not shorten the window measured from the update.
	b, fc := newFakeBackOff(t, 10*time.Second, time.Minute)
	b.Next("id", epoch.Add(-time.Hour))
	now := fc.Now()
	assert.True(t, b.IsInBackOffSinceUpdate("id", now.Add(10*time.Second-1)))
	assert.False(t, b.IsInBackOffSinceUpdate("id", now.Add(10*time.Second)))
}

func TestBackoffExpiry(t *testing.T) {
	const initial, maxDelay = time.Second, 10 * time.Second
	tests := []struct {
		name    string
		idle    time.Duration // from the last Next to the event
		expired bool
	}{
		{"well within 2×max", maxDelay, false},
		{"exactly 2×max", 2 * maxDelay, false},
		{"just past 2×max", 2*maxDelay + time.Nanosecond, true},
		{"long past", time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, fc := newFakeBackOff(t, initial, maxDelay)
			for range 3 {
				b.Next("id", fc.Now())
			}
			require.Equal(t, 4*time.Second, b.Get("id"))
			last := fc.Now()
			event := last.Add(tt.idle)

			// The gates judge expiry by the event time: with the clock at the
			// event no time has passed, so only expiry can end the backoff.
			fc.SetTime(event)
			assert.Equal(t, !tt.expired, b.IsInBackOffSince("id", event))

			b.Next("id", event)
			if tt.expired {
				assert.Equal(t, initial, b.Get("id"), "Next restarts an expired entry")
				assert.Equal(t, 1, b.Attempts("id"))
			} else {
				assert.Equal(t, 8*time.Second, b.Get("id"), "Next doubles a live entry")
				assert.Equal(t, 4, b.Attempts("id"))
			}
		})
	}
}

func TestBackoffIsInBackOffSince(t *testing.T) {
	const delay = 10 * time.Second
	tests := []struct {
		name    string
		elapsed time.Duration // clock time minus event time
		want    bool
	}{
		{"event in the future", -time.Second, true},
		{"no time passed", 0, true},
		{"just inside", delay - time.Nanosecond, true},
		{"window over", delay, false},
		{"long after", time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, fc := newFakeBackOff(t, delay, time.Minute)
			event := fc.Now()
			b.Next("id", event)
			fc.Step(tt.elapsed)
			assert.Equal(t, tt.want, b.IsInBackOffSince("id", event))
			assert.False(t, b.IsInBackOffSince("unknown", event), "no entry: not in backoff")
		})
	}
}

func TestBackoffIsInBackOffSinceUpdate(t *testing.T) {
	const delay = 10 * time.Second
	tests := []struct {
		name  string
		after time.Duration // event time minus the last update
		want  bool
	}{
		{"before the update", -time.Second, true},
		{"at the update", 0, true},
		{"just inside", delay - time.Nanosecond, true},
		{"window over", delay, false},
		{"expired", 2*time.Minute + time.Nanosecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, fc := newFakeBackOff(t, delay, time.Minute)
			b.Next("id", fc.Now())
			fc.Step(time.Hour) // the clock does not matter to this gate
			assert.Equal(t, tt.want, b.IsInBackOffSinceUpdate("id", epoch.Add(tt.after)))
			assert.False(t, b.IsInBackOffSinceUpdate("unknown", epoch), "no entry: not in backoff")
		})
	}
}

func TestBackoffGetDoesNotCheckExpiry(t *testing.T) {
	// As in client-go, Get reports the stored delay of an entry that has
	// expired but has not been reclaimed yet.
	b, fc := newFakeBackOff(t, time.Second, 10*time.Second)
	b.Next("id", fc.Now())
	b.Next("id", fc.Now())
	fc.Step(time.Hour)
	assert.Equal(t, 2*time.Second, b.Get("id"))
	assert.Equal(t, 2, b.Attempts("id"))
	assert.False(t, b.IsInBackOffSince("id", fc.Now().Add(-time.Second)))
}

func TestBackoffForget(t *testing.T) {
	for name, forget := range map[string]func(*backoff.Backoff, string){
		"Reset":       (*backoff.Backoff).Reset,
		"DeleteEntry": (*backoff.Backoff).DeleteEntry,
	} {
		t.Run(name, func(t *testing.T) {
			b, fc := newFakeBackOff(t, time.Second, time.Minute)
			for range 3 {
				b.Next("a", fc.Now())
				b.Next("b", fc.Now())
			}
			forget(b, "a")
			forget(b, "never seen") // no-op
			assert.Zero(t, b.Get("a"))
			assert.Zero(t, b.Attempts("a"))
			assert.False(t, b.IsInBackOffSince("a", fc.Now()))
			assert.Equal(t, 4*time.Second, b.Get("b"), "other ids keep their state")

			b.Next("a", fc.Now())
			assert.Equal(t, time.Second, b.Get("a"), "a forgotten id starts again at initial")
			assert.Equal(t, 1, b.Attempts("a"))
		})
	}
}

func TestBackoffGC(t *testing.T) {
	b, fc := newFakeBackOff(t, time.Second, 10*time.Second)
	b.Next("old", fc.Now())
	fc.Step(15 * time.Second)
	b.Next("recent", fc.Now())
	fc.Step(5*time.Second + time.Nanosecond) // "old" is now 20 s + 1 ns old: expired

	// No Next ran since "old" expired, so nothing reclaimed it yet.
	require.Equal(t, time.Second, b.Get("old"))
	b.GC()
	assert.Zero(t, b.Get("old"), "GC removes the expired entry")
	assert.Equal(t, time.Second, b.Get("recent"), "GC keeps the live one")

	fc.Step(15 * time.Second)
	b.GC()
	assert.Zero(t, b.Get("recent"))
}

func TestBackoffWithExpiry(t *testing.T) {
	const initial, maxDelay = time.Second, 10 * time.Second
	t.Run("sooner", func(t *testing.T) {
		// Expire half a second after the last update, well inside the
		// window, so that only the rule can make the gates say false.
		var gotMax []time.Duration
		halfSecond := func(eventTime, lastUpdate time.Time, maxDelay time.Duration) bool {
			gotMax = append(gotMax, maxDelay)
			return eventTime.Sub(lastUpdate) > 500*time.Millisecond
		}
		b, fc := newFakeBackOff(t, initial, maxDelay, backoff.WithExpiry(halfSecond))
		b.Next("id", fc.Now())
		b.Next("id", fc.Now())
		require.Equal(t, 2*time.Second, b.Get("id"))

		assert.True(t, b.IsInBackOffSinceUpdate("id", epoch.Add(400*time.Millisecond)))
		assert.False(t, b.IsInBackOffSinceUpdate("id", epoch.Add(600*time.Millisecond)), "expired inside the window")
		fc.Step(600 * time.Millisecond)
		assert.True(t, b.IsInBackOffSince("id", epoch.Add(400*time.Millisecond)))
		assert.False(t, b.IsInBackOffSince("id", fc.Now()), "expired inside the window")

		b.Next("id", fc.Now())
		assert.Equal(t, initial, b.Get("id"), "Next restarts by the custom rule")
		assert.Equal(t, 1, b.Attempts("id"))

		fc.Step(600 * time.Millisecond)
		b.GC()
		assert.Zero(t, b.Get("id"), "GC collects by the custom rule")
		require.NotEmpty(t, gotMax)
		for _, m := range gotMax {
			assert.Equal(t, maxDelay, m, "the rule is passed the maximum delay")
		}
	})
	t.Run("never", func(t *testing.T) {
		never := func(time.Time, time.Time, time.Duration) bool { return false }
		b, fc := newFakeBackOff(t, initial, maxDelay, backoff.WithExpiry(never))
		b.Next("id", fc.Now())
		for range 10 {
			fc.Step(time.Hour)
			b.Next("id", fc.Now())
			b.Next(fmt.Sprint("other", fc.Now().Unix()), fc.Now())
		}
		b.GC()
		assert.Equal(t, maxDelay, b.Get("id"), "never restarted nor collected")
		assert.Equal(t, 11, b.Attempts("id"))
	})
}

func TestBackoffJitter(t *testing.T) {
	const initial, maxDelay, factor = time.Second, time.Hour, 0.5
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewBackOffWithJitter(initial, maxDelay, factor, backoff.WithClock(fc))
	firsts := map[time.Duration]bool{}
	for i := range 200 {
		id := fmt.Sprint("id", i)
		b.Next(id, fc.Now())
		prev := b.Get(id)
		assert.GreaterOrEqual(t, prev, initial)
		assert.Less(t, prev, initial+initial/2)
		firsts[prev] = true
		for range 15 {
			b.Next(id, fc.Now())
			got := b.Get(id)
			assert.LessOrEqual(t, got, maxDelay, "capped at max")
			if got < maxDelay {
				assert.GreaterOrEqual(t, got, 2*prev, "never below the unjittered delay")
				assert.Less(t, got, 2*prev+prev/2)
			}
			prev = got
		}
		assert.Equal(t, maxDelay, prev, "15 doublings of 1 s reach the 1 h cap")
	}
	assert.Greater(t, len(firsts), 150, "jitter varies across calls")
}

func TestBackoffHugeJitterIsCapped(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewBackOffWithJitter(time.Second, time.Minute, math.MaxFloat64, backoff.WithClock(fc))
	for range 5 {
		b.Next("id", fc.Now())
		got := b.Get("id")
		assert.GreaterOrEqual(t, got, time.Second)
		assert.LessOrEqual(t, got, time.Minute)
	}
	assert.Equal(t, time.Minute, b.Get("id"))
}

func TestBackoffNoOverflow(t *testing.T) {
	const longest = time.Duration(math.MaxInt64)
	tests := []struct {
		name     string
		initial  time.Duration
		maxDelay time.Duration
		jitter   float64
	}{
		{"max is the largest duration", time.Nanosecond, longest, 0},
		{"initial is the largest duration", longest, longest, 0},
		{"near the largest, jittered", longest / 3, longest, 1},
		{"huge jitter", time.Nanosecond, longest, math.MaxFloat64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := testingclock.NewFakeClock(epoch)
			b := backoff.NewBackOffWithJitter(tt.initial, tt.maxDelay, tt.jitter, backoff.WithClock(fc))
			for range 70 {
				b.Next("id", fc.Now())
				got := b.Get("id")
				require.GreaterOrEqual(t, got, tt.initial)
				require.LessOrEqual(t, got, tt.maxDelay)
			}
			assert.Equal(t, tt.maxDelay, b.Get("id"))
			// 2×max saturates instead of wrapping, so the entry never expires
			// (client-go's wraps negative and expires everything).
			assert.True(t, b.IsInBackOffSince("id", fc.Now()))
			fc.Step(100 * 365 * 24 * time.Hour)
			b.Next("id", fc.Now())
			assert.Equal(t, 71, b.Attempts("id"))
		})
	}
}

func TestBackoffBadInput(t *testing.T) {
	tests := []struct {
		name string
		call func()
		want string
	}{
		{"negative initial", func() { backoff.NewBackOff(-time.Second, time.Minute) },
			"backoff: NewBackOff: initial must be positive, got -1s"},
		{"zero initial", func() { backoff.NewBackOff(0, time.Minute) },
			"backoff: NewBackOff: initial must be positive, got 0s"},
		{"negative max", func() { backoff.NewBackOff(time.Second, -time.Minute) },
			"backoff: NewBackOff: maxDelay must not be negative, got -1m0s"},
		{"max below initial", func() { backoff.NewBackOff(5*time.Second, time.Second) },
			"backoff: NewBackOff: maxDelay must be at least initial (5s), got 1s"},
		{"jittered, zero initial", func() { backoff.NewBackOffWithJitter(0, time.Minute, 0.1) },
			"backoff: NewBackOffWithJitter: initial must be positive, got 0s"},
		{"jittered, max below initial", func() { backoff.NewBackOffWithJitter(time.Minute, time.Second, 0.1) },
			"backoff: NewBackOffWithJitter: maxDelay must be at least initial (1m0s), got 1s"},
		{"NaN jitter", func() { backoff.NewBackOffWithJitter(time.Second, time.Minute, math.NaN()) },
			"backoff: NewBackOffWithJitter: maxJitterFactor must be a finite number ≥ 0, got NaN"},
		{"negative jitter", func() { backoff.NewBackOffWithJitter(time.Second, time.Minute, -0.5) },
			"backoff: NewBackOffWithJitter: maxJitterFactor must be a finite number ≥ 0, got -0.5"},
		{"+Inf jitter", func() { backoff.NewBackOffWithJitter(time.Second, time.Minute, math.Inf(1)) },
			"backoff: NewBackOffWithJitter: maxJitterFactor must be a finite number ≥ 0, got +Inf"},
		{"-Inf jitter", func() { backoff.NewBackOffWithJitter(time.Second, time.Minute, math.Inf(-1)) },
			"backoff: NewBackOffWithJitter: maxJitterFactor must be a finite number ≥ 0, got -Inf"},
		{"nil expiry rule", func() { backoff.WithExpiry(nil) },
			"backoff: WithExpiry: expired must not be nil, got <nil>"},
		{"zero value Next", func() { new(backoff.Backoff).Next("id", epoch) },
			"backoff: Backoff: used without NewBackOff or NewBackOffWithJitter"},
		{"zero value Get", func() { new(backoff.Backoff).Get("id") },
			"backoff: Backoff: used without NewBackOff or NewBackOffWithJitter"},
		{"zero value GC", func() { new(backoff.Backoff).GC() },
			"backoff: Backoff: used without NewBackOff or NewBackOffWithJitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.call)
		})
	}
}

func TestBackoffAcceptsEdgeInput(t *testing.T) {
	// initial == max and a zero jitter factor are in the domain.
	b, fc := newFakeBackOff(t, time.Second, time.Second)
	b.Next("id", fc.Now())
	b.Next("id", fc.Now())
	assert.Equal(t, time.Second, b.Get("id"))
	assert.NotPanics(t, func() { backoff.NewBackOffWithJitter(time.Second, time.Second, 0) })
}

// TestBackoffConcurrent hammers one Backoff from many goroutines while the
// clock moves; run it with -race. Each goroutine also owns some ids, whose
// attempt counts must come out exact.
func TestBackoffConcurrent(t *testing.T) {
	const (
		initial, maxDelay = time.Millisecond, time.Hour
		workers, rounds   = 8, 300
	)
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewBackOffWithJitter(initial, maxDelay, 0.2, backoff.WithClock(fc))
	shared := []string{"s0", "s1", "s2", "s3"}

	var wg sync.WaitGroup
	for w := range workers {
		own := fmt.Sprint("own", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				id := shared[r%len(shared)]
				now := fc.Now()
				b.Next(id, now)
				b.Next(own, now)
				_ = b.IsInBackOffSince(id, now)
				_ = b.IsInBackOffSinceUpdate(own, now)
				if d := b.Get(id); d < initial || d > maxDelay {
					t.Errorf("Get(%s) = %v, outside [%v, %v]", id, d, initial, maxDelay)
				}
				if r%50 == 0 {
					b.GC()
					b.Reset(fmt.Sprint("gone", w))
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range rounds {
			fc.Step(time.Millisecond) // far below 2×max: nothing expires
		}
	}()
	waitForCall(t, "the concurrent callers to finish", wg.Wait)

	for w := range workers {
		assert.Equal(t, rounds, b.Attempts(fmt.Sprint("own", w)))
		assert.Equal(t, maxDelay, b.Get(fmt.Sprint("own", w)))
	}
	total := 0
	for _, id := range shared {
		total += b.Attempts(id)
	}
	assert.Equal(t, workers*rounds, total, "no Next on a shared id was lost")
}

// TestBackoffJitterSpreadsIDsThatFailTogether is the reason for the jitter:
// ids that fail at the same instant get delays drawn independently across
// the whole window [initial, initial + factor·initial), so they do not come
// back together. 100 uniform draws all within 40% of the window would
// happen about once in 10^37 runs.
func TestBackoffJitterSpreadsIDsThatFailTogether(t *testing.T) {
	const initial, factor = time.Second, 1.0
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewBackOffWithJitter(initial, time.Hour, factor, backoff.WithClock(fc))
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for i := range 100 {
		id := fmt.Sprint("pod-", i)
		b.Next(id, fc.Now())
		d := b.Get(id)
		require.GreaterOrEqual(t, d, initial)
		require.Less(t, d, 2*initial)
		lo, hi = min(lo, d), max(hi, d)
	}
	assert.Greater(t, hi-lo, 4*initial/10, "the delays of ids that failed together spread over the window")
}

// TestBackoffJitterIsTheBackOffWindow: the jittered delay is the one the
// back-off checks use, not only what Get reports: an id is in back-off for
// exactly its jittered delay after its failure.
func TestBackoffJitterIsTheBackOffWindow(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewBackOffWithJitter(time.Second, time.Hour, 0.5, backoff.WithClock(fc))
	for i := range 20 {
		id := fmt.Sprint("pod-", i)
		failedAt := fc.Now()
		b.Next(id, failedAt)
		b.Next(id, failedAt) // the second delay: 2d plus up to d/2
		d := b.Get(id)
		assert.True(t, b.IsInBackOffSinceUpdate(id, failedAt.Add(d-1)), "%s: 1ns before its delay %v", id, d)
		assert.False(t, b.IsInBackOffSinceUpdate(id, failedAt.Add(d)), "%s: at its delay %v", id, d)
	}
}
