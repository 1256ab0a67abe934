package otel_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	global "go.opentelemetry.io/otel"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/otel"
)

var errFlaky = errors.New("flaky")

// schedule waits 1 s, 2 s, 4 s... without jitter, for at most 4 attempts.
var schedule = backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 4}

// scripted returns an fn whose attempts each take 100 ms of fc's time and
// return the errors of results in turn (nil once they run out), and the
// Retrier options that run the retries on fc: its clock, and a notify hook
// that steps fc by each wait so that the next attempt follows at once.
func scripted(fc *testingclock.FakeClock, results ...error) (func(context.Context) error, []otel.Option, []backoff.Option) {
	n := 0
	fn := func(context.Context) error {
		fc.Step(100 * time.Millisecond)
		n++
		if n <= len(results) {
			return results[n-1]
		}
		return nil
	}
	opts := []otel.Option{otel.WithClock(fc), otel.WithNotify(func(_ int, _ error, next time.Duration) { fc.Step(next) })}
	return fn, opts, []backoff.Option{backoff.WithClock(fc)}
}

func TestRetrierTracesAttemptsAsChildSpans(t *testing.T) {
	tp, sr := newTracer(t)
	m, reader := newMetrics(t)
	fc := testingclock.NewFakeClock(epoch)
	fn, opts, bopts := scripted(fc, errFlaky, backoff.RetryAfter(3*time.Second, errFlaky))
	r := otel.NewRetrier("fetch", append(opts, otel.WithTracerProvider(tp), otel.WithMetrics(m))...)

	if err := r.Retry(context.Background(), schedule, fn, bopts...); err != nil {
		t.Fatal(err)
	}
	assertTree(t, sr, `
fetch internal [0s..4.3s] Unset retrykit.retry.attempts=3
  fetch internal [0s..100ms] Error error.type=*errors.errorString retrykit.retry.attempt=1
    event retry.scheduled @100ms retrykit.retry.attempt=1 retrykit.retry.delay=1 retrykit.retry.reason=schedule
  fetch internal [1.1s..1.2s] Error error.type=*backoff.RetryAfterError retrykit.retry.attempt=2
    event retry.scheduled @1.2s retrykit.retry.attempt=2 retrykit.retry.delay=3 retrykit.retry.reason=retry_after
  fetch internal [4.2s..4.3s] Unset retrykit.retry.attempt=3
`)
	c := collect(t, reader)
	fetch := otel.NameKey.String("fetch")
	if h, ok := c.intHistogram(otel.RetryRetriesName, fetch); !ok || h.Count != 1 || h.Sum != 2 {
		t.Errorf("retries = %+v, want one call with 2 retries", h)
	}
	if h, ok := c.histogram(otel.RetryDelayName, fetch); !ok || h.Count != 1 || h.Sum != 4 {
		t.Errorf("delay = %+v, want one call that waited 4 s", h)
	}
}

func TestRetrierNestsAttemptsUnderTheCallersSpan(t *testing.T) {
	tp, sr := newTracer(t)
	fc := testingclock.NewFakeClock(epoch)
	fn, opts, bopts := scripted(fc, errFlaky, errFlaky, errFlaky, errFlaky)
	r := otel.NewRetrier("fetch", append(opts, otel.WithTracerProvider(tp))...)

	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	err := r.Retry(ctx, backoff.Schedule{Duration: time.Second, Steps: 2}, fn, bopts...)
	caller.End()
	if !errors.Is(err, backoff.ErrAttemptsExhausted) {
		t.Fatalf("err = %v, want attempts exhausted", err)
	}
	assertTree(t, sr, `
caller internal [real..real] Unset
  event exception @1.2s exception.message=backoff: retry stopped after 2 attempts: attempts exhausted; last error: flaky exception.type=*backoff.RetryError retrykit.retry.attempts=2 retrykit.retry.stop_reason=attempts_exhausted
  fetch internal [0s..100ms] Error error.type=*errors.errorString retrykit.retry.attempt=1
    event retry.scheduled @100ms retrykit.retry.attempt=1 retrykit.retry.delay=1 retrykit.retry.reason=schedule
  fetch internal [1.1s..1.2s] Error error.type=*errors.errorString retrykit.retry.attempt=2
`)
}

func TestRetrierRecordsAttemptsAsEventsWithSpanEvents(t *testing.T) {
	tp, sr := newTracer(t)
	fc := testingclock.NewFakeClock(epoch)
	fn, opts, bopts := scripted(fc, errFlaky, errFlaky)
	r := otel.NewRetrier("fetch", append(opts, otel.WithTracerProvider(tp), otel.WithSpanEvents())...)
	budget := backoff.NewRetryBudget(0, 1.0/60, time.Minute, backoff.WithClock(fc)) // one retry a minute

	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	err := r.Retry(ctx, schedule, fn, append(bopts, backoff.WithRetryBudget(budget))...)
	caller.End()
	if !errors.Is(err, backoff.ErrRetryBudgetExhausted) {
		t.Fatalf("err = %v, want the budget's refusal", err)
	}
	assertTree(t, sr, `
caller internal [real..real] Unset
  event retry.scheduled @100ms retrykit.retry.attempt=1 retrykit.retry.delay=1 retrykit.retry.reason=schedule
  event exception @1.2s exception.message=backoff: retry stopped after 2 attempts: retry budget exhausted; last error: flaky exception.type=*backoff.RetryError retrykit.retry.attempts=2 retrykit.retry.stop_reason=budget
`)
}

func TestRetryValueIsTracedAsRetry(t *testing.T) {
	tp, sr := newTracer(t)
	fc := testingclock.NewFakeClock(epoch)
	_, opts, bopts := scripted(fc)
	r := otel.NewRetrier("count", append(opts, otel.WithTracerProvider(tp))...)
	n := 0
	v, err := otel.RetryValue(context.Background(), r, schedule, func(context.Context) (int, error) {
		n++
		if n == 1 {
			return 0, backoff.Permanent(errFlaky)
		}
		return n, nil
	}, bopts...)
	if v != 0 || !errors.Is(err, errFlaky) {
		t.Fatalf("RetryValue = %v, %v; want 0 and the permanent error", v, err)
	}
	assertTree(t, sr, `
count internal [0s..0s] Error retrykit.retry.attempts=1
  event exception @0s exception.message=flaky exception.type=*backoff.PermanentError retrykit.retry.attempts=1 retrykit.retry.stop_reason=not_retryable
  count internal [0s..0s] Error error.type=*backoff.PermanentError retrykit.retry.attempt=1
`)
}

func TestRetrierStopReasons(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	deadline, cancel2 := context.WithDeadline(context.Background(), time.Time{})
	defer cancel2()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&backoff.RetryError{Reason: backoff.ErrAttemptsExhausted}, otel.StopAttemptsExhausted},
		{&backoff.RetryError{Reason: backoff.ErrMaxElapsedTime}, otel.StopMaxElapsedTime},
		{&backoff.RetryError{Reason: backoff.ErrRetryBudgetExhausted}, otel.StopBudget},
		{&backoff.RetryError{Reason: canceled.Err()}, otel.StopCanceled},
		{&backoff.RetryError{Reason: deadline.Err()}, otel.StopDeadlineExceeded},
		{errFlaky, otel.StopNotRetryable},
	} {
		if got := otel.StopReason(tc.err); got != tc.want {
			t.Errorf("StopReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestRetrierMeasuresTheWaitThatCancellationCutShort(t *testing.T) {
	tp, sr := newTracer(t)
	m, reader := newMetrics(t)
	fc := testingclock.NewFakeClock(epoch)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fn, _, bopts := scripted(fc, errFlaky, errFlaky)
	r := otel.NewRetrier("fetch", otel.WithTracerProvider(tp), otel.WithMetrics(m), otel.WithClock(fc),
		otel.WithNotify(func(attempt int, _ error, next time.Duration) {
			if attempt == 2 {
				fc.Step(next / 4) // a quarter of the wait, then the caller gives up
				cancel()
				return
			}
			fc.Step(next)
		}))

	err := r.Retry(ctx, schedule, fn, bopts...)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want cancelled", err)
	}
	assertTree(t, sr, `
fetch internal [0s..1.7s] Error retrykit.retry.attempts=2
  event exception @1.7s exception.message=backoff: retry stopped after 2 attempts: context canceled; last error: flaky exception.type=*backoff.RetryError retrykit.retry.attempts=2 retrykit.retry.stop_reason=canceled
  fetch internal [0s..100ms] Error error.type=*errors.errorString retrykit.retry.attempt=1
    event retry.scheduled @100ms retrykit.retry.attempt=1 retrykit.retry.delay=1 retrykit.retry.reason=schedule
  fetch internal [1.1s..1.2s] Error error.type=*errors.errorString retrykit.retry.attempt=2
    event retry.scheduled @1.2s retrykit.retry.attempt=2 retrykit.retry.delay=2 retrykit.retry.reason=schedule
`)
	if h, ok := collect(t, reader).histogram(otel.RetryDelayName, otel.NameKey.String("fetch")); !ok || h.Sum != 1.5 {
		t.Errorf("delay = %+v, want 1.5 s: the full first wait and half of the second", h)
	}
}

func TestRetrierWithoutTracerStillMeasures(t *testing.T) {
	m, reader := newMetrics(t)
	fc := testingclock.NewFakeClock(epoch)
	fn, opts, bopts := scripted(fc, errFlaky)
	r := otel.NewRetrier("fetch", append(opts, otel.WithTracerProvider(tracenoop.NewTracerProvider()), otel.WithMetrics(m))...)
	if err := r.Retry(context.Background(), schedule, fn, bopts...); err != nil {
		t.Fatal(err)
	}
	if h, ok := collect(t, reader).intHistogram(otel.RetryRetriesName, otel.NameKey.String("fetch")); !ok || h.Sum != 1 {
		t.Errorf("retries = %+v, want one call with 1 retry", h)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewRetrier(\"\") did not panic")
		}
	}()
	otel.NewRetrier("")
}

// globalSet is set once TestRetrierFollowsTheGlobalProvider has set the
// global TracerProvider, which cannot be unset.
var globalSet bool

// TestRetrierFollowsTheGlobalProvider sets the global TracerProvider, once
// for the whole test binary: no other test reads it.
func TestRetrierFollowsTheGlobalProvider(t *testing.T) {
	if globalSet {
		t.Skip("the global TracerProvider was set by an earlier run (-count > 1)")
	}
	globalSet = true
	tp, sr := newTracer(t)
	fc := testingclock.NewFakeClock(epoch)
	fn, opts, bopts := scripted(fc, errFlaky)
	r := otel.NewRetrier("fetch", opts...) // the global provider, none set yet
	if err := r.Retry(context.Background(), schedule, fn, bopts...); err != nil {
		t.Fatal(err)
	}
	global.SetTracerProvider(tp)
	if err := r.Retry(context.Background(), schedule, fn, bopts...); err != nil {
		t.Fatal(err)
	}
	if n := len(sr.Ended()); n != 2 {
		t.Errorf("%d spans, want 2: the second call's span and its attempt", n)
	}
}

// TestRetrierDoesNotHedge: backoff.WithHedge among a Retrier's options is
// turned off, whether the Retrier records or not: a slow attempt gets no
// second one beside it, so the attempts' spans never overlap.
func TestRetrierDoesNotHedge(t *testing.T) {
	tp, _ := newTracer(t)
	for _, tc := range []struct {
		name string
		opts []otel.Option
	}{{"recording nothing", nil}, {"tracing", []otel.Option{otel.WithTracerProvider(tp)}}} {
		t.Run(tc.name, func(t *testing.T) {
			fc := testingclock.NewFakeClock(epoch)
			r := otel.NewRetrier("op", append(tc.opts, otel.WithClock(fc))...)
			var calls atomic.Int32
			err := r.Retry(context.Background(), backoff.Schedule{Steps: 1}, func(context.Context) error {
				calls.Add(1)
				fc.Step(time.Hour) // past the hedge delay: a hedge's timer would fire here
				return nil
			}, backoff.WithClock(fc), backoff.WithHedge(time.Millisecond))
			if err != nil || calls.Load() != 1 {
				t.Errorf("Retry: %v after %d calls, want nil after 1", err, calls.Load())
			}
		})
	}
}
