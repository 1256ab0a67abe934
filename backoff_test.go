package backoff_test

import (
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	t.Parallel()
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

// The timelines of seeds 000 and 001 (see /work/shared/seeds), reproduced on
// a fake clock. examples/demo/crashloop.go prints the same timelines.

// tickerGaps runs flowcontrol.Backoff's classic ticker loop: NewBackOff(5s, 60s), a 1 s ticker, work
// gated by IsInBackOffSince(id, lastDo), and after each run Next(id, now) and
// lastDo = now + lag. It returns the first n gaps between runs (from the
// previous lastDo, as the seed prints them).
func tickerGaps(t *testing.T, lag time.Duration, n int) []time.Duration {
	t.Helper()
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewBackOff(5*time.Second, 60*time.Second, backoff.WithClock(fc))
	const id = "test"
	lastDo := fc.Now()
	next := epoch // time of the next tick: the ticker keeps its own schedule
	var gaps []time.Duration
	for len(gaps) < n {
		next = next.Add(time.Second)
		fc.SetTime(next)
		if b.IsInBackOffSince(id, lastDo) {
			continue
		}
		now := fc.Now()
		gaps = append(gaps, now.Sub(lastDo))
		b.Next(id, now)
		fc.Step(lag) // the time the loop body takes before it reads lastDo
		lastDo = fc.Now()
	}
	return gaps
}

func TestBackoffTickerGatedWorkRunsAt1And6And11Seconds(t *testing.T) {
	s := time.Second
	// On exact ticks the run waits exactly its window: the tick at the
	// window's end is no longer in backoff (Since == backoff is not < it).
	assert.Equal(t, []time.Duration{1 * s, 5 * s, 10 * s, 20 * s, 40 * s, 60 * s, 60 * s}, tickerGaps(t, 0, 7))

	// The seed's real-clock log shows 1, 6, 11, 21, 41 s (5.999162394s,
	// 10.9999193s, ...): there lastDo is read a moment after the tick, so the
	// tick at the window's end comes a hair early relative to it and is
	// still in backoff; the run slips to the next tick, a hair short of a
	// whole second later. A 1 ms lag reproduces that.
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{1 * s, 6*s - ms, 11*s - ms, 21*s - ms, 41*s - ms, 61*s - ms}, tickerGaps(t, ms, 6))
}

// A restart is one restart of the container by the kubelet model below.
type restart struct {
	at       time.Duration // since the first crash
	waited   time.Duration // since the crash it follows
	backoff  time.Duration // Get after the restart's Next
	attempts int           // Attempts after the restart's Next
}

// crashLoop models kubelet restarting one container. The Backoff
// is kubelet's, NewBackOff(10s, 300s), keyed by pod and container. The sync
// loop runs on every whole second from t = 0; the container starts at t = 0
// and crashes at once. At each sync, a container whose crash time has come
// (crash time ≤ now) is exited with FinishedAt = crash time, and kubelet's
// doBackOff decides: IsInBackOffSince(key, FinishedAt) means wait for a later
// sync; otherwise Next(key, FinishedAt) and restart the container now.
// runs[i] is how long the container runs after restart i (0: it crashes at
// once). crashLoop returns the restarts, one per element of runs.
func crashLoop(t *testing.T, runs []time.Duration) []restart {
	t.Helper()
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewBackOff(10*time.Second, 300*time.Second, backoff.WithClock(fc))
	const key = "default/web_app" // pod and container, as kubelet's stable key
	crashAt := epoch
	var restarts []restart
	for len(restarts) < len(runs) {
		now := fc.Now()
		if !crashAt.After(now) { // exited; FinishedAt = crashAt
			if !b.IsInBackOffSince(key, crashAt) {
				b.Next(key, crashAt)
				restarts = append(restarts, restart{
					at:       now.Sub(epoch),
					waited:   now.Sub(crashAt),
					backoff:  b.Get(key),
					attempts: b.Attempts(key),
				})
				crashAt = now.Add(runs[len(restarts)-1])
			}
		}
		fc.Step(time.Second)
	}
	return restarts
}

func TestBackoffCrashLoopBackOffMatchesKubelet(t *testing.T) {
	s := time.Second
	stable := 10*time.Minute + time.Second // > 2×300 s: the entry expires
	runs := []time.Duration{0, 0, 0, 0, 0, 0, 0, stable, 0, 0, 0}
	want := []restart{
		{0, 0, 10 * s, 1}, // first crash: no entry, restarted at the next sync
		{10 * s, 10 * s, 20 * s, 2},
		{30 * s, 20 * s, 40 * s, 3},
		{70 * s, 40 * s, 80 * s, 4},
		{150 * s, 80 * s, 160 * s, 5},
		{310 * s, 160 * s, 300 * s, 6},
		{610 * s, 300 * s, 300 * s, 7},
		{910 * s, 300 * s, 300 * s, 8}, // then runs for 10m1s
		{1511 * s, 0, 10 * s, 1},       // the entry had expired: back to 10 s
		{1521 * s, 10 * s, 20 * s, 2},
		{1541 * s, 20 * s, 40 * s, 3},
	}
	assert.Equal(t, want, crashLoop(t, runs))
}

func TestBackoffCrashLoopStableForExactly2xMaxIsNotEnough(t *testing.T) {
	// Expiry needs more than 2×max (strictly): a container that crashes
	// exactly 600 s after its restart still waits the full 300 s.
	runs := []time.Duration{0, 0, 0, 0, 0, 0, 0, 10 * time.Minute, 0}
	got := crashLoop(t, runs)
	last := got[len(got)-1]
	assert.Equal(t, 300*time.Second, last.waited)
	assert.Equal(t, 300*time.Second, last.backoff)
	assert.Equal(t, 9, last.attempts)
}

// FuzzBackoffNext drives a Backoff with arbitrary parameters through a
// sequence of operations on a few ids while the fake clock jumps forward and
// backward. The constructor may panic only for the documented bad input;
// afterwards nothing panics, and every id's delay is 0 (no entry) or within
// [initial, max], its attempt count positive exactly when it has a delay.
func FuzzBackoffNext(f *testing.F) {
	f.Add(int64(time.Second), int64(time.Minute), 0.0, []byte{0, 0, 0, 1, 0, 2, 0, 3, 4, 5})
	f.Add(int64(5*time.Second), int64(60*time.Second), 0.5, []byte{0, 8, 16, 1, 9, 0, 2, 6, 7})
	f.Add(int64(1), int64(math.MaxInt64), 1e300, []byte{0, 0, 0, 0, 1, 1, 2, 0})
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), 1.0, []byte{0, 1, 0, 2, 0, 3})
	f.Add(int64(0), int64(time.Minute), 0.0, []byte{0})
	f.Add(int64(time.Minute), int64(time.Second), 0.1, []byte{0})
	f.Add(int64(time.Second), int64(time.Minute), math.NaN(), []byte{0})
	f.Add(int64(time.Second), int64(time.Minute), math.Inf(1), []byte{0})
	f.Add(int64(time.Second), int64(-1), -1.0, []byte{0})
	f.Fuzz(func(t *testing.T, initialNs, maxNs int64, jitter float64, ops []byte) {
		initial, maxDelay := time.Duration(initialNs), time.Duration(maxNs)
		valid := initial > 0 && maxDelay >= initial && jitter >= 0 && !math.IsInf(jitter, 0) && !math.IsNaN(jitter)
		fc := testingclock.NewFakeClock(epoch)
		b, msg := construct(initial, maxDelay, jitter, backoff.WithClock(fc))
		if !valid {
			if !strings.HasPrefix(msg, "backoff: NewBackOffWithJitter: ") {
				t.Fatalf("NewBackOffWithJitter(%v, %v, %v): want a panic naming the function, got %q", initial, maxDelay, jitter, msg)
			}
			return
		}
		if msg != "" {
			t.Fatalf("NewBackOffWithJitter(%v, %v, %v) panicked: %s", initial, maxDelay, jitter, msg)
		}

		ids := [4]string{"a", "b", "c", "d"}
		// Clock steps scale with max, so that expiry (2×max) comes into play.
		unit := max(maxDelay/8, 1)
		for _, op := range ops {
			id := ids[op>>6]
			arg := time.Duration(op>>3&7) * unit
			now := fc.Now()
			switch op & 7 {
			case 0:
				b.Next(id, now)
			case 1:
				b.Next(id, now.Add(-arg)) // an event in the past
			case 2:
				fc.Step(arg)
			case 3:
				fc.SetTime(now.Add(-arg)) // the clock goes back
			case 4:
				_ = b.IsInBackOffSince(id, now.Add(-arg))
			case 5:
				_ = b.IsInBackOffSinceUpdate(id, now.Add(arg))
			case 6:
				b.GC()
			case 7:
				b.Reset(id)
			}
			for _, id := range ids {
				d, n := b.Get(id), b.Attempts(id)
				if d != 0 && (d < initial || d > maxDelay) {
					t.Fatalf("Get(%s) = %v, outside [%v, %v]", id, d, initial, maxDelay)
				}
				if (d == 0) != (n == 0) || n < 0 {
					t.Fatalf("Get(%s) = %v with Attempts = %d", id, d, n)
				}
			}
		}
	})
}

// construct calls NewBackOffWithJitter and returns its panic message, if any.
func construct(initial, maxDelay time.Duration, jitter float64, opts ...backoff.Option) (b *backoff.Backoff, msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	return backoff.NewBackOffWithJitter(initial, maxDelay, jitter, opts...), ""
}

// Benchmarks of the hot paths over 1 id (every call on one shard: the worst
// case for contention) and over 100,000 ids (calls spread over the shards,
// entries beyond the caches), serial and parallel. They use the real clock:
// a FakeClock takes a lock on every read and would measure itself. The ids
// are generated beforehand, so the steady state allocates nothing.

// benchIDs returns the benchmarks' 100,000 ids, made on first use rather
// than when the test binary starts: 100,000 Sprintf calls take half a second
// under -race, which every run of the tests would pay.
var benchIDs = sync.OnceValue(func() []string {
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("namespace-%d/pod-%d_container", i%100, i)
	}
	return ids
})

func benchBackoff(b *testing.B, keys int) (*backoff.Backoff, []string) {
	b.Helper()
	// max of an hour: nothing expires while the benchmark runs.
	bo := backoff.NewBackOffWithJitter(time.Millisecond, time.Hour, 0.1)
	ids := benchIDs()[:keys]
	now := time.Now()
	for _, id := range ids {
		bo.Next(id, now)
	}
	return bo, ids
}

func benchmarkBackoff(b *testing.B, op func(bo *backoff.Backoff, id string, now time.Time)) {
	for _, keys := range []int{1, 100_000} {
		b.Run(fmt.Sprintf("keys=%d/serial", keys), func(b *testing.B) {
			bo, ids := benchBackoff(b, keys)
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				op(bo, ids[i%len(ids)], now)
			}
		})
		b.Run(fmt.Sprintf("keys=%d/parallel", keys), func(b *testing.B) {
			bo, ids := benchBackoff(b, keys)
			now := time.Now()
			var start atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(start.Add(7919)) // each goroutine from its own place
				for pb.Next() {
					op(bo, ids[i%len(ids)], now)
					i++
				}
			})
		})
	}
}

func BenchmarkBackoffNext(b *testing.B) {
	benchmarkBackoff(b, func(bo *backoff.Backoff, id string, now time.Time) { bo.Next(id, now) })
}

func BenchmarkBackoffIsInBackOffSince(b *testing.B) {
	benchmarkBackoff(b, func(bo *backoff.Backoff, id string, now time.Time) { bo.IsInBackOffSince(id, now) })
}

func BenchmarkBackoffGet(b *testing.B) {
	benchmarkBackoff(b, func(bo *backoff.Backoff, id string, _ time.Time) { bo.Get(id) })
}
