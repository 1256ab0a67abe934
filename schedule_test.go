package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
	"k8s.io/utils/clock"
)

const wtMaxDuration = time.Duration(math.MaxInt64)

func TestScheduleStep(t *testing.T) {
	s := time.Second
	tests := []struct {
		name      string
		schedule  backoff.Schedule
		want      []time.Duration
		wantSteps []int // Steps after each step
	}{
		{"cap ends the steps", backoff.Schedule{Duration: s, Factor: 2, Steps: 3, Cap: 3 * s},
			[]time.Duration{s, 2 * s, 3 * s, 3 * s}, []int{2, 0, 0, 0}},
		{"reaching the cap exactly does not end the steps (only going above it does)",
			backoff.Schedule{Duration: s, Factor: 2, Steps: 3, Cap: 2 * s},
			[]time.Duration{s, 2 * s, 2 * s, 2 * s}, []int{2, 0, 0, 0}},
		{"steps run out", backoff.Schedule{Duration: s, Factor: 2, Steps: 2},
			[]time.Duration{s, 2 * s, 4 * s, 4 * s}, []int{1, 0, 0, 0}},
		{"zero value", backoff.Schedule{}, []time.Duration{0, 0}, []int{0, 0}},
		{"factor 0 is constant", backoff.Schedule{Duration: s, Steps: 3},
			[]time.Duration{s, s, s, s}, []int{2, 1, 0, 0}},
		{"factor below 1 shrinks, as in Kubernetes", backoff.Schedule{Duration: s, Factor: 0.5, Steps: 5},
			[]time.Duration{s, s / 2, s / 4}, []int{4, 3, 2}},
		{"negative factor counts as 0", backoff.Schedule{Duration: s, Factor: -2, Steps: 5},
			[]time.Duration{s, s, s}, []int{4, 3, 2}},
		{"NaN factor counts as 0", backoff.Schedule{Duration: s, Factor: math.NaN(), Steps: 5},
			[]time.Duration{s, s, s}, []int{4, 3, 2}},
		{"infinite factor jumps to the cap", backoff.Schedule{Duration: s, Factor: math.Inf(1), Steps: 5, Cap: time.Hour},
			[]time.Duration{s, time.Hour, time.Hour}, []int{0, 0, 0}},
		{"negative duration counts as 0", backoff.Schedule{Duration: -s, Factor: 2, Steps: 5},
			[]time.Duration{0, 0}, []int{4, 3}},
		{"negative steps read 0 after a step", backoff.Schedule{Duration: s, Factor: 2, Steps: -3},
			[]time.Duration{s, s}, []int{0, 0}},
		{"negative cap means no cap", backoff.Schedule{Duration: s, Factor: 2, Steps: 3, Cap: -s},
			[]time.Duration{s, 2 * s, 4 * s, 8 * s}, []int{2, 1, 0, 0}},
		{"a duration above the cap returns the cap (Kubernetes returns the duration)",
			backoff.Schedule{Duration: 10 * s, Factor: 2, Steps: 5, Cap: 3 * s},
			[]time.Duration{3 * s, 3 * s}, []int{0, 0}},
		{"saturates instead of overflowing", backoff.Schedule{Duration: wtMaxDuration / 2, Factor: 4, Steps: 3},
			[]time.Duration{wtMaxDuration / 2, wtMaxDuration, wtMaxDuration}, []int{2, 1, 0}},
		{"10ms doubling", backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5},
			[]time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond},
			[]int{4, 3, 2, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sched := tt.schedule
			for i, want := range tt.want {
				assert.Equal(t, want, sched.Step(), "step %d", i)
				assert.Equal(t, tt.wantSteps[i], sched.Steps, "Steps after step %d", i)
			}
		})
	}
}

func TestScheduleStepNil(t *testing.T) {
	var s *backoff.Schedule
	assert.Equal(t, time.Duration(0), s.Step())
}

func TestScheduleStepJitter(t *testing.T) {
	s := backoff.Schedule{Duration: time.Second, Factor: 2, Jitter: 0.5, Steps: 10, Cap: 4 * time.Second}
	bases := []time.Duration{1, 2, 4, 4, 4}
	for i, base := range bases {
		base *= time.Second
		d := s.Step()
		assert.GreaterOrEqual(t, d, base, "step %d", i)
		assert.Less(t, d, base+base/2, "step %d: jitter may pass the cap by up to Jitter·Cap", i)
	}
	assert.Equal(t, 4*time.Second, s.Duration, "jitter does not feed back into Duration")
}

func TestExponentialBackoffWithContext(t *testing.T) {
	errCondition := errors.New("condition failed")
	ms := time.Millisecond
	tests := []struct {
		name     string
		schedule backoff.Schedule
		results  []error // the condition's results: nil = not done yet; errScriptDone = done
		wantAt   []time.Duration
		wantErr  error
	}{
		{"runs out of steps", backoff.Schedule{Duration: 10 * ms, Factor: 2, Steps: 4},
			nil, []time.Duration{0, 10 * ms, 30 * ms, 70 * ms}, backoff.ErrWaitTimeout},
		{"done on the third check", backoff.Schedule{Duration: 10 * ms, Factor: 2, Steps: 4},
			[]error{nil, nil, errScriptDone}, []time.Duration{0, 10 * ms, 30 * ms}, nil},
		{"the condition's error is returned as is", backoff.Schedule{Duration: 10 * ms, Factor: 2, Steps: 4},
			[]error{nil, errCondition}, []time.Duration{0, 10 * ms}, errCondition},
		{"no steps, no check", backoff.Schedule{Duration: 10 * ms, Steps: 0},
			nil, nil, backoff.ErrWaitTimeout},
		// kubernetes#131122: Steps 10, but the second Step reaches the cap
		// and sets Steps to 0, so only 2 checks are made.
		{"the cap quirk", backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 10, Cap: 3 * time.Second},
			nil, []time.Duration{0, time.Second}, backoff.ErrWaitTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := newHandshakeClock()
			var at []time.Duration
			var err error
			done := wtGo(func() {
				err = backoff.ExponentialBackoffWithContext(context.Background(), tt.schedule, func(context.Context) (bool, error) {
					at = append(at, hc.elapsed())
					if i := len(at) - 1; i < len(tt.results) && tt.results[i] != nil {
						if tt.results[i] == errScriptDone {
							return true, nil
						}
						return false, tt.results[i]
					}
					return false, nil
				}, backoff.WithClock(hc))
			})
			hc.drive(t, done)
			assert.Equal(t, tt.wantAt, at)
			assert.Equal(t, tt.wantErr, err) // as is: not wrapped
		})
	}
}

// errScriptDone, as a condition's scripted result, means "done".
var errScriptDone = errors.New("done")

func TestExponentialBackoffCapQuirkWaitsBeforeGivingUp(t *testing.T) {
	hc := newHandshakeClock()
	checks := 0
	var err error
	done := wtGo(func() {
		err = backoff.ExponentialBackoff(backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 10, Cap: 3 * time.Second},
			func() (bool, error) { checks++; return false, nil }, backoff.WithClock(hc))
	})
	hc.drive(t, done)
	assert.Equal(t, 2, checks)
	assert.Equal(t, 3*time.Second, hc.elapsed(), "it waits the 2s in progress, then gives up without a check")
	assert.ErrorIs(t, err, backoff.ErrWaitTimeout)
}

func TestExponentialBackoffWithContextEndsWithTheContext(t *testing.T) {
	s := backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 10}
	t.Run("done on entry", func(t *testing.T) {
		err := backoff.ExponentialBackoffWithContext(wtCanceled(), s, func(context.Context) (bool, error) {
			t.Error("the condition was checked although ctx was done")
			return false, nil
		}, backoff.WithClock(newHandshakeClock()))
		assert.Equal(t, context.Canceled, err)
	})
	t.Run("cancelled during a wait", func(t *testing.T) {
		hc := newHandshakeClock()
		ctx, cancel := context.WithCancel(context.Background())
		checks := 0
		var err error
		done := wtGo(func() {
			err = backoff.ExponentialBackoffWithContext(ctx, s, func(context.Context) (bool, error) {
				checks++
				return false, nil
			}, backoff.WithClock(hc))
		})
		hc.Step(hc.nextArmed(t, done))
		hc.nextArmed(t, done)
		cancel()
		waitFor(t, "ExponentialBackoffWithContext to return after cancel", done, hc)
		assert.Equal(t, 2, checks)
		assert.Equal(t, context.Canceled, err)
		assert.True(t, backoff.Interrupted(err))
	})
}

func TestInterrupted(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{backoff.ErrWaitTimeout, true},
		{fmt.Errorf("wrapped: %w", backoff.ErrWaitTimeout), true},
		{context.Canceled, true},
		{context.DeadlineExceeded, true},
		{errors.Join(errors.New("x"), context.DeadlineExceeded), true},
		{errors.New("other"), false},
		{nil, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, backoff.Interrupted(tt.err), "%v", tt.err)
	}
	assert.Equal(t, "backoff: timed out waiting for the condition", backoff.ErrWaitTimeout.Error())
}

func TestConditionFuncWithContext(t *testing.T) {
	called := false
	f := backoff.ConditionFunc(func() (bool, error) { called = true; return true, nil })
	ok, err := f.WithContext()(context.Background())
	require.NoError(t, err)
	assert.True(t, ok)
	assert.True(t, called)
}

func BenchmarkScheduleStep(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		s := backoff.Schedule{Duration: time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt, Cap: time.Minute}
		for i := 0; i < b.N; i++ {
			_ = s.Step()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			s := backoff.Schedule{Duration: time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt, Cap: time.Minute}
			for pb.Next() {
				_ = s.Step()
			}
		})
	})
}

// FuzzScheduleStep checks Step's invariants for any schedule, however
// absurd: no panic, no negative wait, and, when Cap > 0, no wait above Cap
// plus the jitter on top of it (Jitter·Cap, saturating), which is exactly
// what Kubernetes' Step can exceed the cap by. Without jitter that is Cap
// itself.
func FuzzScheduleStep(f *testing.F) {
	f.Add(int64(time.Second), 2.0, 0.0, 3, int64(3*time.Second), uint8(5))
	f.Add(int64(time.Second), 2.0, 0.5, 10, int64(0), uint8(70))
	f.Add(int64(-5), -1.0, -1.0, -3, int64(-1), uint8(3))
	f.Add(int64(math.MaxInt64), math.Inf(1), math.Inf(1), math.MaxInt, int64(math.MaxInt64), uint8(4))
	f.Add(int64(10*time.Second), math.NaN(), math.NaN(), 5, int64(time.Second), uint8(4))
	f.Add(int64(1), 1e308, 1e308, 100, int64(0), uint8(100))
	f.Fuzz(func(t *testing.T, duration int64, factor, jitter float64, steps int, limit int64, n uint8) {
		s := backoff.Schedule{Duration: time.Duration(duration), Factor: factor, Jitter: jitter, Steps: steps, Cap: time.Duration(limit)}
		bound := wtMaxDuration
		if s.Cap > 0 {
			bound = s.Cap
			if jitter > 0 {
				bound = wtSatAdd(s.Cap, wtSatScale(s.Cap, jitter))
			}
		}
		for i := 0; i < int(n); i++ {
			d := s.Step()
			if d < 0 || d > bound {
				t.Fatalf("step %d of %+v: %v, want within [0, %v]", i, s, d, bound)
			}
			if s.Steps < 0 {
				t.Fatalf("Steps went negative: %d", s.Steps)
			}
		}
	})
}

// wtSatAdd and wtSatScale are the saturating arithmetic the bounds are stated in.
func wtSatAdd(a, b time.Duration) time.Duration {
	if a > wtMaxDuration-b {
		return wtMaxDuration
	}
	return a + b
}

func wtSatScale(d time.Duration, f float64) time.Duration {
	p := float64(d) * f
	if math.IsNaN(p) || p <= 0 {
		return 0
	}
	if p >= float64(wtMaxDuration) {
		return wtMaxDuration
	}
	return time.Duration(p)
}

func TestScheduleDelay(t *testing.T) {
	s := backoff.Schedule{Duration: time.Second, Factor: 2, Jitter: 0.5, Cap: time.Minute}
	for n := 1; n <= 12; n++ {
		base := min(time.Second<<(n-1), time.Minute)
		for range 50 {
			d := s.Delay(n)
			assert.GreaterOrEqual(t, d, base, "failure %d", n)
			assert.Less(t, d, base+base/2, "failure %d", n)
		}
	}
	assert.Equal(t, time.Second, backoff.Schedule{Duration: time.Second, Factor: 2}.Delay(0), "n < 1 counts as 1")
	huge := backoff.Schedule{Duration: time.Hour, Factor: 10}.Delay(1000)
	assert.Equal(t, time.Duration(math.MaxInt64), huge, "saturates instead of overflowing")
	assert.Equal(t, time.Duration(math.MaxInt64),
		backoff.Schedule{Duration: time.Hour, Factor: 2, Jitter: 1}.Delay(100), "jitter saturates too")
}

// With a Factor of 1 the wait does not grow, so Delay returns Duration
// exactly, as Retry waits it: not Duration·1.0 in float64, which rounds a
// Duration above 2^53 ns (104 days) to an even neighbour.
func TestScheduleDelayFactorOneKeepsDurationExactly(t *testing.T) {
	odd := time.Duration(1<<53 + 1)
	for n := 1; n <= 3; n++ {
		assert.Equal(t, odd, backoff.Schedule{Duration: odd, Factor: 1}.Delay(n), "failure %d", n)
	}
}

// BenchmarkExponentialBackoffOptions measures whole calls of
// ExponentialBackoff whose condition is met at the first check, with 0, 1 and
// 3 options: 0 allocs/op whatever options are passed.
func BenchmarkExponentialBackoffOptions(b *testing.B) {
	s := backoff.Schedule{Duration: time.Millisecond, Factor: 2, Steps: 5}
	var clk clock.WithDelayedExecution = clock.RealClock{}
	done := func() (bool, error) { return true, nil }
	optionCounts(b, func(b *testing.B, n int) {
		for i := 0; i < b.N; i++ {
			var err error
			switch n {
			case 0:
				err = backoff.ExponentialBackoff(s, done)
			case 1:
				err = backoff.ExponentialBackoff(s, done, backoff.WithClock(clk))
			default:
				err = backoff.ExponentialBackoff(s, done, backoff.WithClock(clk),
					backoff.WithMaxElapsedTime(time.Hour), backoff.WithName("ignored"))
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
