package backoff_test

import (
	"context"
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// loopHelper starts one of the loop helpers with both a context and a stop
// channel at hand; each helper uses the one its signature takes, and the
// tests end both together.
type loopHelper struct {
	name    string
	sliding bool
	run     func(ctx context.Context, stop <-chan struct{}, f func(), opts ...backoff.Option)
}

// loopHelpers are the helpers with a period of 1s and no jitter, which all
// run f at once and then every second.
var loopHelpers = []loopHelper{
	{"Until", true, func(_ context.Context, stop <-chan struct{}, f func(), opts ...backoff.Option) {
		backoff.Until(f, time.Second, stop, opts...)
	}},
	{"UntilWithContext", true, func(ctx context.Context, _ <-chan struct{}, f func(), opts ...backoff.Option) {
		backoff.UntilWithContext(ctx, func(context.Context) { f() }, time.Second, opts...)
	}},
	{"NonSlidingUntil", false, func(_ context.Context, stop <-chan struct{}, f func(), opts ...backoff.Option) {
		backoff.NonSlidingUntil(f, time.Second, stop, opts...)
	}},
	{"NonSlidingUntilWithContext", false, func(ctx context.Context, _ <-chan struct{}, f func(), opts ...backoff.Option) {
		backoff.NonSlidingUntilWithContext(ctx, func(context.Context) { f() }, time.Second, opts...)
	}},
	{"JitterUntil", true, func(_ context.Context, stop <-chan struct{}, f func(), opts ...backoff.Option) {
		backoff.JitterUntil(f, time.Second, 0, true, stop, opts...)
	}},
	{"JitterUntilWithContext/non-sliding", false, func(ctx context.Context, _ <-chan struct{}, f func(), opts ...backoff.Option) {
		backoff.JitterUntilWithContext(ctx, func(context.Context) { f() }, time.Second, 0, false, opts...)
	}},
	{"BackoffUntil", true, func(_ context.Context, stop <-chan struct{}, f func(), opts ...backoff.Option) {
		backoff.BackoffUntil(f, backoff.NewJitteredBackoffManager(time.Second, 0, opts...), true, stop, opts...)
	}},
	{"BackoffUntilWithContext/non-sliding", false, func(ctx context.Context, _ <-chan struct{}, f func(), opts ...backoff.Option) {
		m := backoff.NewJitteredBackoffManager(time.Second, 0, opts...)
		backoff.BackoffUntilWithContext(ctx, func(context.Context) { f() }, m, false, opts...)
	}},
}

// wtStopper returns a context and a stop channel, and a function that ends
// both.
func wtStopper() (context.Context, <-chan struct{}, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	return ctx, stop, func() {
		cancel()
		close(stop)
	}
}

func TestLoopRunsEveryPeriod(t *testing.T) {
	for _, h := range loopHelpers {
		t.Run(h.name, func(t *testing.T) {
			hc := newHandshakeClock()
			ctx, stop, end := wtStopper()
			ran := make(chan time.Duration)
			done := wtGo(func() {
				h.run(ctx, stop, func() { ran <- hc.elapsed() }, backoff.WithClock(hc))
			})
			for i := 0; i < 4; i++ {
				assert.Equal(t, time.Duration(i)*time.Second, waitFor(t, "the next run of f", ran, hc), "run %d", i)
				assert.Equal(t, time.Second, hc.nextArmed(t, done))
				if i < 3 {
					hc.Step(time.Second)
				}
			}
			end()
			// f sends on an unbuffered channel: had it run again, the loop
			// would be stuck in f and never return.
			waitFor(t, "the loop to return after stop", done, hc)
		})
	}
}

// TestLoopSlidingVersusNonSliding runs an f that takes 300ms of fake time:
// a sliding loop starts the period when f returns (runs 1.3s apart), a
// non-sliding one when f starts (runs 1s apart).
func TestLoopSlidingVersusNonSliding(t *testing.T) {
	const runTime = 300 * time.Millisecond
	for _, h := range loopHelpers {
		t.Run(h.name, func(t *testing.T) {
			hc := newHandshakeClock()
			ctx, stop, end := wtStopper()
			ran := make(chan time.Duration)
			done := wtGo(func() {
				h.run(ctx, stop, func() {
					now := hc.elapsed()
					hc.Step(runTime) // f's run time
					ran <- now
				}, backoff.WithClock(hc))
			})
			gap := time.Second
			if h.sliding {
				gap += runTime
			}
			for i := 0; i < 4; i++ {
				assert.Equal(t, time.Duration(i)*gap, waitFor(t, "the next run of f", ran, hc), "run %d", i)
				hc.nextArmed(t, done)
				if i < 3 {
					// Let the timer fire on its own: this checks when it
					// was set to fire, not what delay it was given.
					hc.stepUntilFired(t, 100*time.Millisecond, 100)
				}
			}
			end()
			waitFor(t, "the loop to return after stop", done, hc)
		})
	}
}

func TestLoopNeverRunsWhenAlreadyStopped(t *testing.T) {
	for _, h := range loopHelpers {
		t.Run(h.name, func(t *testing.T) {
			ctx, stop, end := wtStopper()
			end()
			h.run(ctx, stop, func() { t.Error("f ran although the loop was stopped before it started") },
				backoff.WithClock(newHandshakeClock()))
		})
	}
}

func TestLoopStopsDuringWait(t *testing.T) {
	for _, h := range loopHelpers {
		t.Run(h.name, func(t *testing.T) {
			hc := newHandshakeClock()
			ctx, stop, end := wtStopper()
			ran := make(chan struct{}, 10)
			done := wtGo(func() {
				h.run(ctx, stop, func() { ran <- struct{}{} }, backoff.WithClock(hc))
			})
			hc.nextArmed(t, done)
			end()
			waitFor(t, "the loop to return after stop", done, hc)
			assert.Len(t, ran, 1, "f ran once, before the stop")
		})
	}
}

// TestLoopNeverRunsAfterStopEvenWhenTheTimerFiresToo closes stop and then
// fires the timer, so that both are ready when the loop wakes up: whichever
// the select picks, f must not run again.
func TestLoopNeverRunsAfterStopEvenWhenTheTimerFiresToo(t *testing.T) {
	t.Parallel()
	for _, h := range loopHelpers {
		t.Run(h.name, func(t *testing.T) {
			for i := 0; i < 50; i++ {
				hc := newHandshakeClock()
				ctx, stop, end := wtStopper()
				ran := make(chan struct{}, 10)
				done := wtGo(func() {
					h.run(ctx, stop, func() { ran <- struct{}{} }, backoff.WithClock(hc))
				})
				d := hc.nextArmed(t, done)
				end()
				hc.Step(d)
				waitFor(t, "the loop to return after stop", done, hc)
				require.Len(t, ran, 1, "f ran after stop (iteration %d)", i)
			}
		})
	}
}

// TestBackoffUntilLeavesNoStaleTick reuses a manager whose timer fired while
// the previous loop was stopping: the next loop must still wait a full
// period after its first run, not run f again at once on the old tick.
func TestBackoffUntilLeavesNoStaleTick(t *testing.T) {
	hc := newHandshakeClock()
	m := backoff.NewJitteredBackoffManager(time.Second, 0, backoff.WithClock(hc))
	for i := 0; i < 20; i++ {
		stop := make(chan struct{})
		ran := make(chan time.Duration)
		done := wtGo(func() {
			backoff.BackoffUntil(func() { ran <- hc.elapsed() }, m, true, stop)
		})
		first := waitFor(t, "the next run of f", ran, hc)
		hc.nextArmed(t, done)
		hc.Step(time.Second)
		assert.Equal(t, first+time.Second, waitFor(t, "the next run of f", ran, hc), "loop %d ran early", i)
		hc.nextArmed(t, done)
		close(stop)
		hc.Step(time.Second) // the tick that a stopping loop must not leave behind
		waitFor(t, "the loop to return after stop", done, hc)
	}
}

func TestLoopPanicPropagatesByDefault(t *testing.T) {
	type boom struct{}
	for _, h := range loopHelpers {
		t.Run(h.name, func(t *testing.T) {
			ctx, stop, end := wtStopper()
			defer end()
			assert.PanicsWithValue(t, boom{}, func() {
				h.run(ctx, stop, func() { panic(boom{}) }, backoff.WithClock(newHandshakeClock()))
			})
		})
	}
	t.Run("Forever", func(t *testing.T) {
		hc := newHandshakeClock()
		runs := 0
		got := make(chan any)
		go func() {
			defer func() { got <- recover() }()
			backoff.Forever(func() {
				runs++
				if runs == 3 {
					panic(boom{})
				}
			}, time.Minute, backoff.WithClock(hc))
		}()
		for i := 0; i < 2; i++ {
			d := hc.nextArmed(t, nil)
			assert.Equal(t, time.Minute, d)
			hc.Step(d)
		}
		assert.Equal(t, boom{}, waitFor(t, "the panic handler to receive the panic", got, hc))
		assert.Equal(t, 3, runs)
	})
}

func TestLoopPanicHandlerRecoversAndContinues(t *testing.T) {
	for _, h := range loopHelpers {
		t.Run(h.name, func(t *testing.T) {
			hc := newHandshakeClock()
			ctx, stop, end := wtStopper()
			var recovered []any
			ran := make(chan time.Duration)
			runs := 0
			done := wtGo(func() {
				h.run(ctx, stop, func() {
					runs++
					if runs <= 2 {
						panic(runs)
					}
					ran <- hc.elapsed()
				}, backoff.WithClock(hc), backoff.WithPanicHandler(func(r any) { recovered = append(recovered, r) }))
			})
			for i := 0; i < 2; i++ {
				hc.Step(hc.nextArmed(t, done))
			}
			assert.Equal(t, 2*time.Second, waitFor(t, "the next run of f", ran, hc), "the schedule went on through the panics")
			hc.nextArmed(t, done)
			end()
			waitFor(t, "the loop to return after stop", done, hc)
			assert.Equal(t, []any{1, 2}, recovered)
		})
	}
}

// TestJitterUntilJitter runs every case through both forms: the stop-channel
// form builds its own loop, and dropping its factor must fail here too.
func TestJitterUntilJitter(t *testing.T) {
	tests := []struct {
		name   string
		period time.Duration
		factor float64
		lo, hi time.Duration // every wait in [lo, hi]
	}{
		{"no jitter", time.Second, 0, time.Second, time.Second},
		{"negative factor means no jitter", time.Second, -1, time.Second, time.Second},
		{"NaN factor means no jitter", time.Second, math.NaN(), time.Second, time.Second},
		{"half", time.Second, 0.5, time.Second, 1500*time.Millisecond - 1},
		{"negative period counts as 0", -time.Second, 0.5, 0, 0},
	}
	forms := []struct {
		name string
		run  func(ctx context.Context, stop <-chan struct{}, period time.Duration, factor float64, opts ...backoff.Option)
	}{
		{"JitterUntil", func(_ context.Context, stop <-chan struct{}, period time.Duration, factor float64, opts ...backoff.Option) {
			backoff.JitterUntil(func() {}, period, factor, true, stop, opts...)
		}},
		{"JitterUntilWithContext", func(ctx context.Context, _ <-chan struct{}, period time.Duration, factor float64, opts ...backoff.Option) {
			backoff.JitterUntilWithContext(ctx, func(context.Context) {}, period, factor, true, opts...)
		}},
	}
	for _, form := range forms {
		for _, tt := range tests {
			t.Run(form.name+"/"+tt.name, func(t *testing.T) {
				hc := newHandshakeClock()
				ctx, stop, end := wtStopper()
				done := wtGo(func() { form.run(ctx, stop, tt.period, tt.factor, backoff.WithClock(hc)) })
				seen := map[time.Duration]bool{}
				for i := 0; i < 50; i++ {
					d := hc.nextArmed(t, done)
					assert.GreaterOrEqual(t, d, tt.lo)
					assert.LessOrEqual(t, d, tt.hi)
					seen[d] = true
					hc.Step(d)
				}
				if tt.lo < tt.hi {
					assert.Greater(t, len(seen), 25, "the jitter should vary")
				}
				end()
				waitFor(t, "the loop to return after stop", done, hc)
			})
		}
	}
}

func TestUntilWithContextPassesTheContext(t *testing.T) {
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	var got any
	backoff.UntilWithContext(ctx, func(ctx context.Context) {
		got = ctx.Value(key{})
		cancel()
	}, time.Hour, backoff.WithClock(newHandshakeClock()))
	assert.Equal(t, "v", got)
}

func TestContextForChannel(t *testing.T) {
	stop := make(chan struct{})
	ctx := backoff.ContextForChannel(stop)
	require.NoError(t, ctx.Err())
	_, ok := ctx.Deadline()
	assert.False(t, ok)
	assert.Nil(t, ctx.Value("any"))
	close(stop)
	waitFor(t, "the context to be done once stop was closed", ctx.Done())
	assert.ErrorIs(t, ctx.Err(), context.Canceled)

	never := backoff.ContextForChannel(nil)
	assert.Nil(t, never.Done(), "a nil channel is never done")
	assert.NoError(t, never.Err())
}

func TestWithPanicHandlerRejectsNil(t *testing.T) {
	assert.PanicsWithValue(t, "backoff: WithPanicHandler: h must not be nil, got <nil>", func() {
		backoff.WithPanicHandler(nil)
	})
}

// handshakeClock is a FakeClock that tells the test about the timers the code
// under test sets, so that a test never has to guess whether a goroutine is
// parked on the clock:
//
//   - every NewTimer and Reset sends the requested delay on armed, after the
//     timer is registered with the fake clock; a test that has received it
//     knows that stepping the clock by that delay fires the timer;
//   - every firing increments fired inside FakeClock.Step, on the stepping
//     goroutine, so right after Step returns the test knows whether a timer
//     fired.
//
// The timers are built on FakeClock.AfterFunc, whose callbacks run inside
// Step with the clock's lock held: the callback therefore only sends on a
// buffered channel and counts, and never calls the clock.
type handshakeClock struct {
	*testclock.FakeClock
	start time.Time
	armed chan time.Duration
	fired atomic.Int64
}

var _ clock.WithDelayedExecution = (*handshakeClock)(nil)

func newHandshakeClock() *handshakeClock {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	return &handshakeClock{
		FakeClock: testclock.NewFakeClock(start),
		start:     start,
		// Deep enough that code under test never blocks on it in these
		// tests, which make at most a few hundred waits each.
		armed: make(chan time.Duration, 4096),
	}
}

// elapsed returns the fake time since the clock was made.
func (c *handshakeClock) elapsed() time.Duration { return c.Since(c.start) }

func (c *handshakeClock) NewTimer(d time.Duration) clock.Timer {
	t := &handshakeTimer{clock: c, ch: make(chan time.Time, 1), target: c.Now().Add(d)}
	t.inner = c.FakeClock.AfterFunc(d, t.fire)
	c.armed <- d
	return t
}

type handshakeTimer struct {
	clock  *handshakeClock
	inner  clock.Timer
	ch     chan time.Time
	target time.Time // written before the timer is armed, read when it fires
}

func (t *handshakeTimer) fire() {
	select {
	case t.ch <- t.target: // capacity 1, like a real timer's channel
	default:
	}
	t.clock.fired.Add(1)
}

func (t *handshakeTimer) C() <-chan time.Time { return t.ch }
func (t *handshakeTimer) Stop() bool          { return t.inner.Stop() }

func (t *handshakeTimer) Reset(d time.Duration) bool {
	// A fresh AfterFunc each time: FakeClock gives every AfterFunc a
	// one-slot channel that nobody reads, so one that was Reset after firing
	// would block the second firing, and Step with it.
	active := t.inner.Stop()
	t.target = t.clock.Now().Add(d)
	t.inner = t.clock.FakeClock.AfterFunc(d, t.fire)
	t.clock.armed <- d
	return active
}

// nextArmed waits for the code under test to set a timer and returns its
// delay. It fails the test if done is closed first or nothing is armed
// within waitTimeout (a hang, not a timing assertion).
func (c *handshakeClock) nextArmed(t *testing.T, done <-chan struct{}) time.Duration {
	t.Helper()
	select {
	case d := <-c.armed:
		return d
	case <-done:
		t.Fatal("the code under test returned instead of setting a timer")
	case <-time.After(waitTimeout):
		t.Fatalf("timed out (%v real time) waiting for the code under test to set a timer; %s", waitTimeout, describeClock(c))
	}
	return 0
}

// stepUntilFired steps the clock by step until one of its timers fires, and
// returns how far it stepped. It is deterministic: the firing happens inside
// Step, on this goroutine. It fails after limit steps.
func (c *handshakeClock) stepUntilFired(t *testing.T, step time.Duration, limit int) time.Duration {
	t.Helper()
	before := c.fired.Load()
	for i := 1; i <= limit; i++ {
		c.Step(step)
		if c.fired.Load() != before {
			return time.Duration(i) * step
		}
	}
	t.Fatalf("no timer fired in %d steps of %v", limit, step)
	return 0
}

// driveLimit bounds the waits that drive steps through: no test makes
// more than a few hundred, and code that loops for ever on the fake clock
// (a retry that never stops) must fail the test, not step it for ever.
const driveLimit = 4096

// drive steps c by every delay the code under test arms, until done is
// closed: the fake clock then moves exactly from one wait to the next. It
// fails the test if the code under test neither arms a timer nor returns
// within waitTimeout, or has not returned after driveLimit waits or
// waitTimeout in all.
func (c *handshakeClock) drive(t *testing.T, done <-chan struct{}) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for steps := 0; ; steps++ {
		if steps == driveLimit {
			t.Fatalf("the code under test did not return after %d waits on the fake clock; %s", steps, describeClock(c))
		}
		select {
		case d := <-c.armed:
			c.Step(d)
		case <-done:
			return
		case <-deadline.C:
			t.Fatalf("timed out (%v real time) waiting for the code under test to return, after stepping through %d waits; %s",
				waitTimeout, steps, describeClock(c))
		}
	}
}

// wtGo runs f on a new goroutine and returns a channel closed when it
// returns.
func wtGo(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

// wtCanceled returns a context that is already done.
func wtCanceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// FuzzJitter checks Jitter for any d and maxFactor: never negative; d itself
// (0 for a negative d) when there is no jitter to add; otherwise in
// [d, d + maxFactor·d], saturating at the largest duration.
func FuzzJitter(f *testing.F) {
	f.Add(int64(time.Second), 0.5)
	f.Add(int64(time.Second), 0.0)
	f.Add(int64(time.Second), -1.0)
	f.Add(int64(-time.Second), 1.0)
	f.Add(int64(math.MaxInt64), 10.0)
	f.Add(int64(math.MaxInt64/2), math.Inf(1))
	f.Add(int64(1), math.NaN())
	f.Add(int64(3), 1e-300)
	f.Fuzz(func(t *testing.T, d int64, maxFactor float64) {
		dur := time.Duration(d)
		got := backoff.Jitter(dur, maxFactor)
		lo := max(dur, 0)
		hi := lo
		if maxFactor > 0 {
			hi = wtSatAdd(lo, wtSatScale(lo, maxFactor))
		}
		if got < lo || got > hi {
			t.Fatalf("Jitter(%v, %v) = %v, want within [%v, %v]", dur, maxFactor, got, lo, hi)
		}
	})
}

// wtArmedDelays calls m.Backoff n times and returns the delay each call set.
func wtArmedDelays(t *testing.T, hc *handshakeClock, m backoff.BackoffManager, n int) []time.Duration {
	t.Helper()
	var got []time.Duration
	for i := 0; i < n; i++ {
		m.Backoff()
		got = append(got, hc.nextArmed(t, nil))
	}
	return got
}

func TestExponentialBackoffManagerGrowsToMax(t *testing.T) {
	hc := newHandshakeClock()
	m := backoff.NewExponentialBackoffManager(time.Second, 10*time.Second, time.Minute, 2, 0, backoff.WithClock(hc))
	s := time.Second
	assert.Equal(t, []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 10 * s, 10 * s, 10 * s}, wtArmedDelays(t, hc, m, 7))
}

func TestExponentialBackoffManagerResets(t *testing.T) {
	const reset = 30 * time.Second
	tests := []struct {
		name  string
		quiet time.Duration // fake time between the third and fourth call
		want  time.Duration // the fourth delay
	}{
		{"no reset within resetDuration", reset, 8 * time.Second},
		{"reset after more than resetDuration", reset + 1, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := newHandshakeClock()
			m := backoff.NewExponentialBackoffManager(time.Second, time.Minute, reset, 2, 0, backoff.WithClock(hc))
			wtArmedDelays(t, hc, m, 3)
			hc.Step(tt.quiet)
			assert.Equal(t, []time.Duration{tt.want}, wtArmedDelays(t, hc, m, 1))
		})
	}
}

func TestExponentialBackoffManagerJitter(t *testing.T) {
	hc := newHandshakeClock()
	m := backoff.NewExponentialBackoffManager(time.Second, 4*time.Second, time.Hour, 2, 0.5, backoff.WithClock(hc))
	for i, d := range wtArmedDelays(t, hc, m, 50) {
		base := min(time.Second<<min(i, 2), 4*time.Second)
		assert.GreaterOrEqual(t, d, base, "delay %d", i)
		assert.Less(t, d, base+base/2, "delay %d: jitter adds less than jitter·delay", i)
	}
}

func TestBackoffManagersReuseOneTimer(t *testing.T) {
	hc := newHandshakeClock()
	for name, m := range map[string]backoff.BackoffManager{
		"exponential": backoff.NewExponentialBackoffManager(time.Second, 0, 0, 2, 0, backoff.WithClock(hc)),
		"jittered":    backoff.NewJitteredBackoffManager(time.Second, 0, backoff.WithClock(hc)),
	} {
		first := m.Backoff()
		hc.nextArmed(t, nil)
		assert.Same(t, first, m.Backoff(), name)
		hc.nextArmed(t, nil)
	}
}

func TestJitteredBackoffManager(t *testing.T) {
	hc := newHandshakeClock()
	exact := backoff.NewJitteredBackoffManager(time.Second, 0, backoff.WithClock(hc))
	assert.Equal(t, []time.Duration{time.Second, time.Second}, wtArmedDelays(t, hc, exact, 2))

	jittered := backoff.NewJitteredBackoffManager(time.Second, 0.25, backoff.WithClock(hc))
	for _, d := range wtArmedDelays(t, hc, jittered, 50) {
		assert.GreaterOrEqual(t, d, time.Second)
		assert.Less(t, d, 1250*time.Millisecond)
	}

	zero := backoff.NewJitteredBackoffManager(0, 0.5, backoff.WithClock(hc))
	assert.Equal(t, []time.Duration{0}, wtArmedDelays(t, hc, zero, 1))
}

func TestBackoffUntilWithExponentialManager(t *testing.T) {
	hc := newHandshakeClock()
	m := backoff.NewExponentialBackoffManager(time.Second, 10*time.Second, time.Minute, 2, 0, backoff.WithClock(hc))
	stop := make(chan struct{})
	ran := make(chan time.Duration)
	done := wtGo(func() { backoff.BackoffUntil(func() { ran <- hc.elapsed() }, m, true, stop) })
	var got []time.Duration
	for i := 0; i < 7; i++ {
		got = append(got, waitFor(t, "the next run of f", ran, hc))
		d := hc.nextArmed(t, done)
		if i < 6 {
			hc.Step(d)
		}
	}
	close(stop)
	waitFor(t, "BackoffUntil to return after stop was closed", done, hc)
	s := time.Second
	assert.Equal(t, []time.Duration{0, 1 * s, 3 * s, 7 * s, 15 * s, 25 * s, 35 * s}, got)
}

func TestBackoffManagersRejectBadArguments(t *testing.T) {
	s := time.Second
	tests := []struct {
		name string
		make func()
		want string
	}{
		{"zero init", func() { backoff.NewExponentialBackoffManager(0, s, s, 2, 0) },
			"backoff: NewExponentialBackoffManager: initBackoff must be positive, got 0s"},
		{"negative max", func() { backoff.NewExponentialBackoffManager(s, -s, s, 2, 0) },
			"backoff: NewExponentialBackoffManager: maxBackoff must not be negative, got -1s"},
		{"max below init", func() { backoff.NewExponentialBackoffManager(2*s, s, s, 2, 0) },
			"backoff: NewExponentialBackoffManager: maxBackoff must be 0 or at least initBackoff (2s), got 1s"},
		{"negative reset", func() { backoff.NewExponentialBackoffManager(s, s, -s, 2, 0) },
			"backoff: NewExponentialBackoffManager: resetDuration must not be negative, got -1s"},
		{"NaN factor", func() { backoff.NewExponentialBackoffManager(s, s, s, math.NaN(), 0) },
			"backoff: NewExponentialBackoffManager: backoffFactor must be a finite number ≥ 0, got NaN"},
		{"negative jitter", func() { backoff.NewExponentialBackoffManager(s, s, s, 2, -1) },
			"backoff: NewExponentialBackoffManager: jitter must be a finite number ≥ 0, got -1"},
		{"negative duration", func() { backoff.NewJitteredBackoffManager(-s, 0) },
			"backoff: NewJitteredBackoffManager: duration must not be negative, got -1s"},
		{"infinite jitter", func() { backoff.NewJitteredBackoffManager(s, math.Inf(1)) },
			"backoff: NewJitteredBackoffManager: jitter must be a finite number ≥ 0, got +Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.make)
		})
	}
}

// onceContext is a context that ends once f has run: a loop helper given it
// runs f once, waits, and returns, so that a benchmark can call the helper
// b.N times without a new context (and its allocations) per call.
type onceContext struct {
	context.Context
	ran bool
}

var closedChannel = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *onceContext) Done() <-chan struct{} { return closedChannel }

func (c *onceContext) Err() error {
	if c.ran {
		return context.Canceled
	}
	return nil
}

// BenchmarkLoopOptions measures whole calls of the loop helpers with 0, 1
// and 3 options: the context forms run f once and wait once (on a clock whose
// one timer fires at once), the stop-channel forms get a closed channel and
// return before f. 0 allocs/op whatever options are passed; the real clock
// adds the allocation of its timer to each call that waits.
func BenchmarkLoopOptions(b *testing.B) {
	clk := newReusedTimerClock()
	onPanic := func(any) {}
	manager := backoff.NewJitteredBackoffManager(time.Second, 0, backoff.WithClock(clk))
	ctx := &onceContext{Context: context.Background()}
	f := func(context.Context) { ctx.ran = true }
	stop := closedChannel
	plain := func() {}
	helpers := []struct {
		name string
		call func(n int)
	}{
		{"UntilWithContext", func(n int) {
			switch n {
			case 0:
				backoff.UntilWithContext(ctx, f, time.Second)
			case 1:
				backoff.UntilWithContext(ctx, f, time.Second, backoff.WithClock(clk))
			default:
				backoff.UntilWithContext(ctx, f, time.Second, backoff.WithClock(clk),
					backoff.WithPanicHandler(onPanic), backoff.WithName("ignored"))
			}
		}},
		{"JitterUntilWithContext", func(n int) {
			switch n {
			case 0:
				backoff.JitterUntilWithContext(ctx, f, time.Second, 0.1, false)
			case 1:
				backoff.JitterUntilWithContext(ctx, f, time.Second, 0.1, false, backoff.WithClock(clk))
			default:
				backoff.JitterUntilWithContext(ctx, f, time.Second, 0.1, false, backoff.WithClock(clk),
					backoff.WithPanicHandler(onPanic), backoff.WithName("ignored"))
			}
		}},
		{"BackoffUntilWithContext", func(n int) {
			switch n {
			case 0:
				backoff.BackoffUntilWithContext(ctx, f, manager, true)
			case 1:
				backoff.BackoffUntilWithContext(ctx, f, manager, true, backoff.WithClock(clk))
			default:
				backoff.BackoffUntilWithContext(ctx, f, manager, true, backoff.WithClock(clk),
					backoff.WithPanicHandler(onPanic), backoff.WithName("ignored"))
			}
		}},
		{"Until/stopped", func(n int) {
			switch n {
			case 0:
				backoff.Until(plain, time.Second, stop)
			case 1:
				backoff.Until(plain, time.Second, stop, backoff.WithClock(clk))
			default:
				backoff.Until(plain, time.Second, stop, backoff.WithClock(clk),
					backoff.WithPanicHandler(onPanic), backoff.WithName("ignored"))
			}
		}},
		{"BackoffUntil/stopped", func(n int) {
			switch n {
			case 0:
				backoff.BackoffUntil(plain, manager, true, stop)
			case 1:
				backoff.BackoffUntil(plain, manager, true, stop, backoff.WithClock(clk))
			default:
				backoff.BackoffUntil(plain, manager, true, stop, backoff.WithClock(clk),
					backoff.WithPanicHandler(onPanic), backoff.WithName("ignored"))
			}
		}},
	}
	for _, h := range helpers {
		b.Run(h.name, func(b *testing.B) {
			optionCounts(b, func(b *testing.B, n int) {
				for i := 0; i < b.N; i++ {
					ctx.ran = false
					h.call(n)
				}
			})
		})
	}
}

// TestLoopHelpersWithOptionsDoNotAllocate: a loop helper's options and its
// own pacing allocate nothing; what a call allocates is the clock's timer
// (none here: a clock whose one timer is reused).
func TestLoopHelpersWithOptionsDoNotAllocate(t *testing.T) {
	clk := newReusedTimerClock()
	ctx := &onceContext{Context: context.Background()}
	f := func(context.Context) { ctx.ran = true }
	onPanic := func(any) {}
	allocs := testing.AllocsPerRun(100, func() {
		ctx.ran = false
		backoff.JitterUntilWithContext(ctx, f, time.Second, 0.1, true, backoff.WithClock(clk), backoff.WithPanicHandler(onPanic))
		backoff.Until(func() {}, time.Second, closedChannel, backoff.WithClock(clk), backoff.WithPanicHandler(onPanic))
	})
	assert.Zero(t, allocs)
	assert.True(t, ctx.ran, "f ran")
}

// TestLoopHelpersPanicAtTheCallOnNil: the thirteen helpers that run a
// function on a schedule (the loop helpers, the poll functions and
// ExponentialBackoff) panic at the call, on the caller's goroutine, naming
// the function and the parameter, when a function, context or manager is
// nil. The check comes before everything else: the stop channel is closed
// and the context done already, so a helper that checked late would return
// quietly. A panic handler does not turn a nil f into a loop that feeds it
// the nil dereference: the handler here panics itself, so such a loop would
// fail the test rather than hang it.
func TestLoopHelpersPanicAtTheCallOnNil(t *testing.T) {
	var nilCtx context.Context
	done, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := make(chan struct{})
	close(stopped)
	f := func() {}
	fctx := func(context.Context) {}
	manager := backoff.NewJitteredBackoffManager(time.Second, 0)
	var nilManager *typedNilManager
	condCtx := func(context.Context) (bool, error) { return true, nil }
	s := backoff.Schedule{Duration: time.Second, Steps: 1}
	tests := []struct {
		want string // "Function: parameter"
		call func(opts ...backoff.Option)
	}{
		{"Forever: f", func(o ...backoff.Option) { backoff.Forever(nil, time.Second, o...) }},
		{"Until: f", func(o ...backoff.Option) { backoff.Until(nil, time.Second, stopped, o...) }},
		{"UntilWithContext: ctx", func(o ...backoff.Option) { backoff.UntilWithContext(nilCtx, fctx, time.Second, o...) }},
		{"UntilWithContext: f", func(o ...backoff.Option) { backoff.UntilWithContext(done, nil, time.Second, o...) }},
		{"NonSlidingUntil: f", func(o ...backoff.Option) { backoff.NonSlidingUntil(nil, time.Second, stopped, o...) }},
		{"NonSlidingUntilWithContext: ctx", func(o ...backoff.Option) {
			backoff.NonSlidingUntilWithContext(nilCtx, fctx, time.Second, o...)
		}},
		{"NonSlidingUntilWithContext: f", func(o ...backoff.Option) {
			backoff.NonSlidingUntilWithContext(done, nil, time.Second, o...)
		}},
		{"JitterUntil: f", func(o ...backoff.Option) { backoff.JitterUntil(nil, time.Second, 0.1, true, stopped, o...) }},
		{"JitterUntilWithContext: ctx", func(o ...backoff.Option) {
			backoff.JitterUntilWithContext(nilCtx, fctx, time.Second, 0.1, true, o...)
		}},
		{"JitterUntilWithContext: f", func(o ...backoff.Option) {
			backoff.JitterUntilWithContext(done, nil, time.Second, 0.1, true, o...)
		}},
		{"BackoffUntil: f", func(o ...backoff.Option) { backoff.BackoffUntil(nil, manager, true, stopped, o...) }},
		{"BackoffUntil: manager", func(o ...backoff.Option) { backoff.BackoffUntil(f, nil, true, stopped, o...) }},
		{"BackoffUntil: manager (typed nil)", func(o ...backoff.Option) {
			backoff.BackoffUntil(f, nilManager, true, stopped, o...)
		}},
		{"BackoffUntilWithContext: ctx", func(o ...backoff.Option) {
			backoff.BackoffUntilWithContext(nilCtx, fctx, manager, true, o...)
		}},
		{"BackoffUntilWithContext: f", func(o ...backoff.Option) {
			backoff.BackoffUntilWithContext(done, nil, manager, true, o...)
		}},
		{"BackoffUntilWithContext: manager", func(o ...backoff.Option) {
			backoff.BackoffUntilWithContext(done, fctx, nil, true, o...)
		}},
		{"PollUntilContextCancel: ctx", func(o ...backoff.Option) {
			_ = backoff.PollUntilContextCancel(nilCtx, time.Second, false, condCtx, o...)
		}},
		{"PollUntilContextCancel: condition", func(o ...backoff.Option) {
			_ = backoff.PollUntilContextCancel(done, time.Second, false, nil, o...)
		}},
		{"PollUntilContextTimeout: ctx", func(o ...backoff.Option) {
			_ = backoff.PollUntilContextTimeout(nilCtx, time.Second, time.Minute, false, condCtx, o...)
		}},
		{"PollUntilContextTimeout: condition", func(o ...backoff.Option) {
			_ = backoff.PollUntilContextTimeout(done, time.Second, time.Minute, false, nil, o...)
		}},
		{"ExponentialBackoff: condition", func(o ...backoff.Option) { _ = backoff.ExponentialBackoff(s, nil, o...) }},
		{"ExponentialBackoffWithContext: ctx", func(o ...backoff.Option) {
			_ = backoff.ExponentialBackoffWithContext(nilCtx, s, condCtx, o...)
		}},
		{"ExponentialBackoffWithContext: condition", func(o ...backoff.Option) {
			_ = backoff.ExponentialBackoffWithContext(done, s, nil, o...)
		}},
	}
	helpers := map[string]bool{}
	for _, tt := range tests {
		fn, param, _ := strings.Cut(tt.want, ": ")
		param, _, _ = strings.Cut(param, " (")
		helpers[fn] = true
		want := "backoff: " + fn + ": " + param + " must not be nil, got <nil>"
		t.Run(tt.want, func(t *testing.T) {
			assert.PanicsWithValue(t, want, func() { tt.call() })
		})
		t.Run(tt.want+", with a panic handler", func(t *testing.T) {
			handled := 0
			handler := backoff.WithPanicHandler(func(r any) {
				handled++
				panic(fmt.Sprintf("the handler was called with %v", r))
			})
			assert.PanicsWithValue(t, want, func() { tt.call(handler) })
			assert.Zero(t, handled)
		})
	}
	assert.Len(t, helpers, 13, "every helper that runs a function on a schedule")
}

// typedNilManager is a BackoffManager type whose nil pointer, passed as a
// BackoffManager, is a non-nil interface holding nil.
type typedNilManager struct{}

func (*typedNilManager) Backoff() clock.Timer { return nil }
