package backoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
	"k8s.io/utils/clock"
)

// pollScript is a condition that records when it is checked, takes runTime
// of fake time, and is met at check number doneAt (never if 0).
type pollScript struct {
	hc      *handshakeClock
	runTime time.Duration
	doneAt  int
	err     error // returned at check doneAt instead of done, if set
	at      []time.Duration
	ctxs    []context.Context
}

func (p *pollScript) check(ctx context.Context) (bool, error) {
	p.at = append(p.at, p.hc.elapsed())
	p.ctxs = append(p.ctxs, ctx)
	if p.runTime > 0 {
		p.hc.Step(p.runTime)
	}
	if len(p.at) == p.doneAt {
		return p.err == nil, p.err
	}
	return false, nil
}

func TestPollUntilContextCancel(t *testing.T) {
	s := time.Second
	errCheck := errors.New("check failed")
	tests := []struct {
		name      string
		interval  time.Duration
		immediate bool
		runTime   time.Duration
		doneAt    int
		err       error
		wantAt    []time.Duration
	}{
		{"every interval", s, false, 0, 3, nil, []time.Duration{1 * s, 2 * s, 3 * s}},
		{"immediate", s, true, 0, 3, nil, []time.Duration{0, 1 * s, 2 * s}},
		{"error returned as is", s, true, 0, 2, errCheck, []time.Duration{0, 1 * s}},
		{"not sliding: run time counts", s, false, 300 * time.Millisecond, 3, nil, []time.Duration{1 * s, 2 * s, 3 * s}},
		// Checks of 1.5s on a 1s grid: each overruns a grid point, so the
		// next check follows at once, as with a ticker's kept tick.
		{"overrunning checks", s, false, 1500 * time.Millisecond, 4, nil,
			[]time.Duration{1 * s, 2500 * time.Millisecond, 4 * s, 5500 * time.Millisecond}},
		// A 2.5s check overruns two grid points: one extra check at once,
		// then back on the grid.
		{"overrunning two grid points", s, true, 2500 * time.Millisecond, 3, nil,
			[]time.Duration{0, 2500 * time.Millisecond, 5 * s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := newHandshakeClock()
			p := &pollScript{hc: hc, runTime: tt.runTime, doneAt: tt.doneAt, err: tt.err}
			var err error
			done := wtGo(func() {
				err = backoff.PollUntilContextCancel(context.Background(), tt.interval, tt.immediate, p.check, backoff.WithClock(hc))
			})
			hc.drive(t, done)
			assert.Equal(t, tt.wantAt, p.at)
			assert.Equal(t, tt.err, err)
		})
	}
}

func TestPollZeroIntervalChecksBackToBack(t *testing.T) {
	hc := newHandshakeClock()
	p := &pollScript{hc: hc, doneAt: 5}
	var err error
	// A poll that waited on a timer for a zero interval would block for
	// ever on the fake clock: the deadline names it in seconds.
	waitForCall(t, "a zero-interval poll to check five times without waiting", func() {
		err = backoff.PollUntilContextCancel(context.Background(), 0, false, p.check, backoff.WithClock(hc))
	}, hc)
	require.NoError(t, err)
	assert.Equal(t, make([]time.Duration, 5), p.at)
	assert.Empty(t, hc.armed, "no timer for a zero interval")
}

func TestPollUntilContextCancelEndsWithTheContext(t *testing.T) {
	t.Run("done on entry, immediate: one check, as in Kubernetes", func(t *testing.T) {
		hc := newHandshakeClock()
		p := &pollScript{hc: hc}
		err := backoff.PollUntilContextCancel(wtCanceled(), time.Second, true, p.check, backoff.WithClock(hc))
		assert.Equal(t, context.Canceled, err)
		assert.Len(t, p.at, 1)
	})
	t.Run("done on entry: no check", func(t *testing.T) {
		hc := newHandshakeClock()
		p := &pollScript{hc: hc}
		err := backoff.PollUntilContextCancel(wtCanceled(), time.Second, false, p.check, backoff.WithClock(hc))
		assert.Equal(t, context.Canceled, err)
		assert.Empty(t, p.at)
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		hc := newHandshakeClock()
		ctx, cancel := context.WithCancel(context.Background())
		p := &pollScript{hc: hc}
		var err error
		done := wtGo(func() {
			err = backoff.PollUntilContextCancel(ctx, time.Second, false, p.check, backoff.WithClock(hc))
		})
		hc.Step(hc.nextArmed(t, done))
		hc.nextArmed(t, done)
		cancel()
		hc.Step(time.Second) // the tick and the cancellation together: no check
		waitFor(t, "PollUntilContextCancel to return after cancel", done, hc)
		assert.Equal(t, context.Canceled, err)
		assert.Len(t, p.at, 1)
	})
}

func TestPollUntilContextTimeout(t *testing.T) {
	hc := newHandshakeClock()
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	p := &pollScript{hc: hc}
	var err error
	done := wtGo(func() {
		err = backoff.PollUntilContextTimeout(parent, time.Second, 3500*time.Millisecond, false, p.check, backoff.WithClock(hc))
	})
	hc.drive(t, done)
	assert.Equal(t, context.DeadlineExceeded, err)
	assert.Equal(t, []time.Duration{1 * time.Second, 2 * time.Second, 3 * time.Second}, p.at)

	ctx := p.ctxs[0]
	assert.Equal(t, "v", ctx.Value(key{}), "the condition's context carries the parent's values")
	deadline, ok := ctx.Deadline()
	assert.True(t, ok)
	assert.Equal(t, hc.start.Add(3500*time.Millisecond), deadline, "the deadline is on the injected clock")
	assert.Equal(t, context.DeadlineExceeded, ctx.Err())
	assert.Equal(t, context.DeadlineExceeded, context.Cause(ctx))
	select {
	case <-ctx.Done():
	default:
		t.Error("the condition's context should be done")
	}
}

// TestPollUntilContextTimeoutUsesTheInjectedClock would block for an hour
// if the timeout were measured on the real clock.
func TestPollUntilContextTimeoutUsesTheInjectedClock(t *testing.T) {
	hc := newHandshakeClock()
	p := &pollScript{hc: hc}
	var err error
	done := wtGo(func() {
		err = backoff.PollUntilContextTimeout(context.Background(), 10*time.Hour, time.Hour, false, p.check, backoff.WithClock(hc))
	})
	assert.Equal(t, 10*time.Hour, hc.nextArmed(t, done))
	hc.Step(time.Hour - 1)
	select {
	case <-done:
		t.Fatal("returned before the timeout")
	default:
	}
	hc.Step(1)
	waitFor(t, "PollUntilContextTimeout to return at the timeout", done, hc)
	assert.Equal(t, context.DeadlineExceeded, err)
	assert.Empty(t, p.at)
}

func TestPollUntilContextTimeoutEdges(t *testing.T) {
	t.Run("zero timeout, immediate: one check", func(t *testing.T) {
		hc := newHandshakeClock()
		p := &pollScript{hc: hc}
		var err error
		waitForCall(t, "PollUntilContextTimeout to return at once: a zero timeout has passed already", func() {
			err = backoff.PollUntilContextTimeout(context.Background(), time.Second, 0, true, p.check, backoff.WithClock(hc))
		}, hc)
		assert.Equal(t, context.DeadlineExceeded, err)
		assert.Len(t, p.at, 1)
	})
	t.Run("negative timeout: no check", func(t *testing.T) {
		hc := newHandshakeClock()
		p := &pollScript{hc: hc}
		var err error
		waitForCall(t, "PollUntilContextTimeout to return at once: a negative timeout has passed already", func() {
			err = backoff.PollUntilContextTimeout(context.Background(), time.Second, -time.Second, false, p.check, backoff.WithClock(hc))
		}, hc)
		assert.Equal(t, context.DeadlineExceeded, err)
		assert.Empty(t, p.at)
	})
	t.Run("met before the timeout", func(t *testing.T) {
		hc := newHandshakeClock()
		p := &pollScript{hc: hc, doneAt: 2}
		var err error
		done := wtGo(func() {
			err = backoff.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, p.check, backoff.WithClock(hc))
		})
		hc.drive(t, done)
		assert.NoError(t, err)
		assert.Equal(t, context.Canceled, p.ctxs[0].Err(), "released on return, as context.WithTimeout's cancel does")
	})
	t.Run("parent cancelled first", func(t *testing.T) {
		hc := newHandshakeClock()
		ctx, cancel := context.WithCancel(context.Background())
		p := &pollScript{hc: hc}
		var err error
		done := wtGo(func() {
			err = backoff.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, p.check, backoff.WithClock(hc))
		})
		hc.nextArmed(t, done)
		cancel()
		waitFor(t, "PollUntilContextTimeout to return after the parent was cancelled", done, hc)
		assert.Equal(t, context.Canceled, err)
		assert.Equal(t, context.Canceled, p.ctxs[0].Err())
	})
	t.Run("the condition's context, asked for Done only after the call, is done", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		var got context.Context
		err := backoff.PollUntilContextTimeout(parent, time.Second, time.Hour, true, func(ctx context.Context) (bool, error) {
			got = ctx
			return true, nil
		}, backoff.WithClock(newHandshakeClock()))
		require.NoError(t, err)
		select {
		case <-got.Done():
		default:
			t.Fatal("the released context's Done is not closed")
		}
		assert.Equal(t, context.Canceled, got.Err())
	})
	t.Run("the condition's context ends with the parent without a wait", func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.Background())
		cause := errors.New("shutting down")
		var errs []error
		_ = backoff.PollUntilContextTimeout(parent, time.Second, time.Hour, true, func(ctx context.Context) (bool, error) {
			errs = append(errs, ctx.Err())
			cancel(cause)
			errs = append(errs, ctx.Err(), context.Cause(ctx))
			return true, nil
		}, backoff.WithClock(newHandshakeClock()))
		assert.Equal(t, []error{nil, context.Canceled, context.Canceled}, errs)
	})
	t.Run("the parent's earlier deadline is reported", func(t *testing.T) {
		hc := newHandshakeClock()
		early := hc.start.Add(time.Second)
		ctx, cancel := context.WithDeadline(context.Background(), early)
		defer cancel()
		var got time.Time
		_ = backoff.PollUntilContextTimeout(ctx, time.Second, time.Hour, true, func(ctx context.Context) (bool, error) {
			got, _ = ctx.Deadline()
			return true, nil
		}, backoff.WithClock(hc))
		assert.Equal(t, early, got)
	})
}

// TestPollKeepsTheGridAfterAnOverrun: checks of unequal length, where the
// grid and "one interval after the last check started" part ways. The
// first check, at 1s, runs 1.5s and overruns the tick at 2s: the next check
// comes at once (2.5s, the tick a ticker keeps), and the one after it at the
// next grid point, 3s, not at 3.5s.
func TestPollKeepsTheGridAfterAnOverrun(t *testing.T) {
	hc := newHandshakeClock()
	runTimes := []time.Duration{1500 * time.Millisecond, 0, 0, 0}
	var at []time.Duration
	check := func(context.Context) (bool, error) {
		at = append(at, hc.elapsed())
		if d := runTimes[len(at)-1]; d > 0 {
			hc.Step(d)
		}
		return len(at) == len(runTimes), nil
	}
	var err error
	done := wtGo(func() {
		err = backoff.PollUntilContextCancel(context.Background(), time.Second, false, check, backoff.WithClock(hc))
	})
	hc.drive(t, done)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{time.Second, 2500 * time.Millisecond, 3 * time.Second, 4 * time.Second}, at)
}

// TestPollTickAndTimeoutAtTheSameInstant: a tick and the context's end at
// the same fake instant, with no select to pick between them. Each check
// takes a whole interval, so the check at 2s ends at 3s, which is both the
// next grid point (its wait is zero: nothing to select on) and the timeout
// (its timer fires inside the check's Step). The condition must not be
// checked at 3s: only poll's own check of ctx stops it. (With a wait to
// select on, the two would be ready together only by chance of
// scheduling.)
func TestPollTickAndTimeoutAtTheSameInstant(t *testing.T) {
	hc := newHandshakeClock()
	p := &pollScript{hc: hc, runTime: time.Second, doneAt: 4} // ends a broken poll
	var err error
	done := wtGo(func() {
		err = backoff.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Second, false, p.check, backoff.WithClock(hc))
	})
	hc.drive(t, done)
	assert.Equal(t, context.DeadlineExceeded, err)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second}, p.at, "checked at the timeout")
}

// BenchmarkPollOptions measures whole calls of the polls whose condition is
// met at the immediate check, with 0, 1 and 3 options, on the real clock.
// PollUntilContextCancel allocates nothing. PollUntilContextTimeout
// allocates what its timeout costs (see withClockTimeout in poll.go): the
// derived context, and the clock's timer with its callback.
func BenchmarkPollOptions(b *testing.B) {
	ctx := context.Background()
	var clk clock.WithDelayedExecution = clock.RealClock{}
	met := func(context.Context) (bool, error) { return true, nil }
	b.Run("PollUntilContextCancel", func(b *testing.B) {
		optionCounts(b, func(b *testing.B, n int) {
			for i := 0; i < b.N; i++ {
				var err error
				switch n {
				case 0:
					err = backoff.PollUntilContextCancel(ctx, time.Second, true, met)
				case 1:
					err = backoff.PollUntilContextCancel(ctx, time.Second, true, met, backoff.WithClock(clk))
				default:
					err = backoff.PollUntilContextCancel(ctx, time.Second, true, met, backoff.WithClock(clk),
						backoff.WithMaxElapsedTime(time.Hour), backoff.WithName("ignored"))
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	cancelable, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, parent := range []struct {
		name string
		ctx  context.Context
	}{
		{"background", ctx},
		{"cancelable", cancelable},
	} {
		b.Run("PollUntilContextTimeout/"+parent.name, func(b *testing.B) {
			optionCounts(b, func(b *testing.B, n int) {
				for i := 0; i < b.N; i++ {
					var err error
					switch n {
					case 0:
						err = backoff.PollUntilContextTimeout(parent.ctx, time.Second, time.Minute, true, met)
					case 1:
						err = backoff.PollUntilContextTimeout(parent.ctx, time.Second, time.Minute, true, met, backoff.WithClock(clk))
					default:
						err = backoff.PollUntilContextTimeout(parent.ctx, time.Second, time.Minute, true, met, backoff.WithClock(clk),
							backoff.WithMaxElapsedTime(time.Hour), backoff.WithName("ignored"))
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// TestPollOptionsDoNotAllocate: PollUntilContextCancel with options
// allocates nothing; PollUntilContextTimeout allocates its timeout's context
// and the clock's timer for it (4 allocations on the real clock: see
// withClockTimeout), and nothing for the options.
func TestPollOptionsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	var clk clock.WithDelayedExecution = clock.RealClock{}
	met := func(context.Context) (bool, error) { return true, nil }
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = backoff.PollUntilContextCancel(ctx, time.Second, true, met, backoff.WithClock(clk), backoff.WithName("ignored"))
	}))
	without := testing.AllocsPerRun(100, func() {
		_ = backoff.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, met)
	})
	with := testing.AllocsPerRun(100, func() {
		_ = backoff.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, met, backoff.WithClock(clk), backoff.WithName("ignored"))
	})
	assert.Equal(t, without, with, "options add no allocation")
	assert.LessOrEqual(t, with, 4.0)
}
