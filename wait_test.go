package backoff_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
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
