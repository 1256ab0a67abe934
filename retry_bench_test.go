package backoff_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/retrykit/backoff"
)

// retryBenchClock is a clock whose timers fire as soon as they are set, so
// that a benchmark goes through Retry's timer path (Reset, select) without
// waiting. FakeClock would not do: its Step allocates, which would hide
// whether Retry does.
type retryBenchClock struct{ now time.Time }

var _ clock.WithDelayedExecution = retryBenchClock{}

func (c retryBenchClock) Now() time.Time                         { return c.now }
func (c retryBenchClock) Since(t time.Time) time.Duration        { return c.now.Sub(t) }
func (c retryBenchClock) Sleep(time.Duration)                    {}
func (c retryBenchClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }
func (c retryBenchClock) Tick(d time.Duration) <-chan time.Time  { return c.NewTimer(d).C() }

func (c retryBenchClock) NewTimer(d time.Duration) clock.Timer {
	t := &retryBenchTimer{ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

func (c retryBenchClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	f()
	return c.NewTimer(d)
}

type retryBenchTimer struct{ ch chan time.Time }

func (t *retryBenchTimer) C() <-chan time.Time { return t.ch }
func (t *retryBenchTimer) Stop() bool          { return false }

func (t *retryBenchTimer) Reset(time.Duration) bool {
	select {
	case t.ch <- time.Time{}:
	default:
	}
	return false
}

// BenchmarkRetryAttempt measures what Retry adds to each attempt, in one
// Retry call that lasts b.N attempts, so that the per-call set-up is
// amortised away and allocs/op is the per-attempt allocation: 0.
func BenchmarkRetryAttempt(b *testing.B) {
	hinted := backoff.RetryAfter(time.Millisecond, errFlaky)
	// Unlimited attempts without waits: a schedule with no Steps and no
	// Duration would mean DefaultRetry to Retry, so Steps is set, too high
	// to be reached.
	noWait := backoff.Schedule{Steps: math.MaxInt}
	cases := []struct {
		name     string
		schedule backoff.Schedule
		err      error
		opts     []backoff.Option
	}{
		// No wait: the bookkeeping alone (delay, classification, checks).
		{"zero-wait", noWait, errFlaky, nil},
		// A wait on every attempt, on a clock whose timers fire at once:
		// timer Reset and select included.
		{"timer", backoff.Schedule{Duration: time.Millisecond, Factor: 2, Jitter: 0.1, Cap: time.Second}, errFlaky,
			[]backoff.Option{backoff.WithClock(retryBenchClock{})}},
		{"timer/full-jitter", backoff.Schedule{Duration: time.Millisecond, Factor: 2, Cap: time.Second}, errFlaky,
			[]backoff.Option{backoff.WithClock(retryBenchClock{}), backoff.WithJitterKind(backoff.FullJitter)}},
		{"timer/decorrelated", backoff.Schedule{Duration: time.Millisecond, Factor: 3, Cap: time.Second}, errFlaky,
			[]backoff.Option{backoff.WithClock(retryBenchClock{}), backoff.WithJitterKind(backoff.DecorrelatedJitter)}},
		// A Retry-After hint on every error, wrapped: the error walk, and the
		// hint's wait on a clock whose timers fire at once.
		{"hint", noWait, fmt.Errorf("get: %w", hinted), []backoff.Option{backoff.WithClock(retryBenchClock{})}},
		{"notify+budget", backoff.Schedule{Duration: time.Millisecond}, errFlaky,
			[]backoff.Option{backoff.WithClock(retryBenchClock{}), backoff.WithMaxElapsedTime(time.Hour),
				backoff.WithNotify(func(int, error, time.Duration) {})}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			err := backoff.Retry(context.Background(), c.schedule, func(context.Context) error {
				n++
				if n < b.N {
					return c.err
				}
				return nil
			}, c.opts...)
			if err != nil {
				b.Fatal(err)
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				err := backoff.Retry(context.Background(), c.schedule, func(context.Context) error {
					if pb.Next() {
						return c.err
					}
					return nil
				}, c.opts...)
				if err != nil {
					b.Error(err)
				}
			})
		})
	}
}

// BenchmarkRetryCall measures a whole Retry call that succeeds at once: the
// fixed cost per call.
func BenchmarkRetryCall(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	s := backoff.Schedule{Duration: time.Millisecond, Factor: 2, Steps: 5}
	fn := func(context.Context) error { return nil }
	for i := 0; i < b.N; i++ {
		if err := backoff.Retry(ctx, s, fn); err != nil {
			b.Fatal(err)
		}
	}
}
