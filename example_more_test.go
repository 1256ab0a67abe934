package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
)

// The Examples of this file cover the rest of the loop helpers, the
// BackoffManagers, jitter and the options that no main entry point's Example
// shows. Those that wait run on a backofftest.AutoStepClock, on which
// waiting takes no time; jittered delays are random, so they print
// whether each delay lies in its documented range.

// Forever is for work that lasts as long as the process. It never returns
// unless f panics; here f panics on its third run, which is how this Example
// ends.
func ExampleForever() {
	clk := newAutoStepClock()
	start := clk.Now()
	errDone := errors.New("done")
	func() {
		defer func() { fmt.Println("Forever ended by:", recover()) }()
		runs := 0
		backoff.Forever(func() {
			runs++
			fmt.Println("run at", clk.Since(start))
			if runs == 3 {
				panic(errDone)
			}
		}, time.Second, backoff.WithClock(clk))
	}()
	// Output:
	// run at 0s
	// run at 1s
	// run at 2s
	// Forever ended by: done
}

// UntilWithContext stops when its context ends; f receives the context.
func ExampleUntilWithContext() {
	clk := newAutoStepClock()
	start := clk.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := 0
	backoff.UntilWithContext(ctx, func(ctx context.Context) {
		runs++
		fmt.Println("run at", clk.Since(start))
		if runs == 3 {
			cancel() // checked before every run: there is no fourth
		}
	}, time.Second, backoff.WithClock(clk))
	fmt.Println("runs:", runs)
	// Output:
	// run at 0s
	// run at 1s
	// run at 2s
	// runs: 3
}

// The period of a non-sliding loop includes f's run time: an f that takes
// 300ms still starts every second.
func ExampleNonSlidingUntilWithContext() {
	clk := newAutoStepClock()
	start := clk.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := 0
	backoff.NonSlidingUntilWithContext(ctx, func(ctx context.Context) {
		runs++
		fmt.Println("run at", clk.Since(start))
		clk.Step(300 * time.Millisecond) // f's run time
		if runs == 3 {
			cancel()
		}
	}, time.Second, backoff.WithClock(clk))
	// Output:
	// run at 0s
	// run at 1s
	// run at 2s
}

// Each wait of a jittered loop is drawn afresh from [period, period +
// factor·period); with factor 0.2 and a period of 10s, from [10s, 12s).
func ExampleJitterUntilWithContext() {
	clk := newAutoStepClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	last := clk.Now()
	runs := 0
	backoff.JitterUntilWithContext(ctx, func(ctx context.Context) {
		runs++
		if runs > 1 {
			wait := clk.Since(last)
			fmt.Printf("run %d after a wait in [10s, 12s): %v\n", runs, wait >= 10*time.Second && wait < 12*time.Second)
		}
		last = clk.Now()
		if runs == 3 {
			cancel()
		}
	}, 10*time.Second, 0.2, true, backoff.WithClock(clk))
	// Output:
	// run 2 after a wait in [10s, 12s): true
	// run 3 after a wait in [10s, 12s): true
}

// BackoffUntil waits for the manager's timer between runs: with an
// exponential manager, the waits double up to the cap, as client-go's
// reflector paces its re-lists after failures.
func ExampleBackoffUntil() {
	clk := newAutoStepClock()
	start := clk.Now()
	manager := backoff.NewExponentialBackoffManager(time.Second, 4*time.Second, time.Minute, 2, 0, backoff.WithClock(clk))
	stop := make(chan struct{})
	runs := 0
	backoff.BackoffUntil(func() {
		runs++
		fmt.Println("run at", clk.Since(start))
		if runs == 5 {
			close(stop)
		}
	}, manager, true, stop)
	// Output:
	// run at 0s
	// run at 1s
	// run at 3s
	// run at 7s
	// run at 11s
}

// BackoffUntilWithContext is BackoffUntil with a context. Not sliding, the
// manager's wait starts when f starts, so f's 300ms are part of it.
func ExampleBackoffUntilWithContext() {
	clk := newAutoStepClock()
	start := clk.Now()
	manager := backoff.NewJitteredBackoffManager(time.Second, 0, backoff.WithClock(clk))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := 0
	backoff.BackoffUntilWithContext(ctx, func(ctx context.Context) {
		runs++
		fmt.Println("run at", clk.Since(start))
		clk.Step(300 * time.Millisecond) // f's run time
		if runs == 3 {
			cancel()
		}
	}, manager, false)
	// Output:
	// run at 0s
	// run at 1s
	// run at 2s
}

// timerWait returns how long the timer t makes its reader wait on an
// autoStepClock.
func timerWait(clk *backofftest.AutoStepClock, t interface{ C() <-chan time.Time }) time.Duration {
	before := clk.Now()
	<-t.C()
	return clk.Since(before)
}

// The delays of an exponential manager grow by the factor up to the cap and
// start again from the first after a quiet spell longer than resetDuration.
func ExampleNewExponentialBackoffManager() {
	clk := newAutoStepClock()
	m := backoff.NewExponentialBackoffManager(time.Second, 5*time.Second, time.Minute, 2, 0, backoff.WithClock(clk))
	var waits []time.Duration
	for range 5 {
		waits = append(waits, timerWait(clk, m.Backoff()))
	}
	fmt.Println(waits)

	clk.Step(2 * time.Minute) // quiet for longer than resetDuration
	fmt.Println("after a quiet spell:", timerWait(clk, m.Backoff()))
	// Output:
	// [1s 2s 4s 5s 5s]
	// after a quiet spell: 1s
}

// Every delay of a jittered manager is drawn afresh from [duration, duration
// + jitter·duration).
func ExampleNewJitteredBackoffManager() {
	clk := newAutoStepClock()
	m := backoff.NewJitteredBackoffManager(time.Second, 0.5, backoff.WithClock(clk))
	for range 3 {
		d := timerWait(clk, m.Backoff())
		fmt.Println("in [1s, 1.5s):", d >= time.Second && d < 1500*time.Millisecond)
	}
	// Output:
	// in [1s, 1.5s): true
	// in [1s, 1.5s): true
	// in [1s, 1.5s): true
}

// PollUntilContextCancel checks the condition every interval until it is
// met, it fails, or the context ends.
func ExamplePollUntilContextCancel() {
	clk := newAutoStepClock()
	start := clk.Now()
	checks := 0
	err := backoff.PollUntilContextCancel(context.Background(), time.Second, false, func(context.Context) (bool, error) {
		checks++
		fmt.Println("check at", clk.Since(start))
		return checks == 3, nil // ready on the third check
	}, backoff.WithClock(clk))
	fmt.Println("met:", err)

	// A context that ends stops the polling with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	err = backoff.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		cancel() // for example, the process is shutting down
		return false, nil
	}, backoff.WithClock(clk))
	fmt.Println("cancelled:", err)
	// Output:
	// check at 1s
	// check at 2s
	// check at 3s
	// met: <nil>
	// cancelled: context canceled
}

// ContextForChannel passes a stop channel where a context is expected.
func ExampleContextForChannel() {
	stop := make(chan struct{})
	ctx := backoff.ContextForChannel(stop)
	fmt.Println("before close:", ctx.Err())
	close(stop)
	<-ctx.Done()
	fmt.Println("after close:", ctx.Err())
	// Output:
	// before close: <nil>
	// after close: context canceled
}

// Jitter adds up to maxFactor·d to d; a factor ≤ 0 adds nothing (where
// apimachinery's wait.Jitter would use 1.0).
func ExampleJitter() {
	d := backoff.Jitter(time.Second, 0.1)
	fmt.Println("in [1s, 1.1s):", d >= time.Second && d < 1100*time.Millisecond)
	fmt.Println("factor 0:", backoff.Jitter(time.Second, 0))
	// Output:
	// in [1s, 1.1s): true
	// factor 0: 1s
}

// With jitter, each delay is at least twice the one before, at most 2.5
// times with maxJitterFactor 0.5, and never above the maximum.
func ExampleNewBackOffWithJitter() {
	clock := testclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	b := backoff.NewBackOffWithJitter(time.Second, 10*time.Second, 0.5, backoff.WithClock(clock))
	const id = "default/web"

	b.Next(id, clock.Now())
	prev := b.Get(id)
	fmt.Println("attempt 1 in [1s, 1.5s):", prev >= time.Second && prev < 1500*time.Millisecond)
	for attempt := 2; attempt <= 3; attempt++ {
		b.Next(id, clock.Now())
		d := b.Get(id)
		fmt.Printf("attempt %d in [2×, 2.5×) the last: %v\n", attempt, d >= 2*prev && d < 2*prev+prev/2)
		prev = d
	}
	for range 2 {
		b.Next(id, clock.Now())
	}
	fmt.Println("attempt 5:", b.Get(id))
	// Output:
	// attempt 1 in [1s, 1.5s): true
	// attempt 2 in [2×, 2.5×) the last: true
	// attempt 3 in [2×, 2.5×) the last: true
	// attempt 5: 10s
}

// WithExpiry replaces the rule by which a Backoff forgets an id: here after
// one quiet minute instead of twice the maximum delay (two hours).
func ExampleWithExpiry() {
	clock := testclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	oneQuietMinute := func(eventTime, lastUpdate time.Time, _ time.Duration) bool {
		return eventTime.Sub(lastUpdate) > time.Minute
	}
	byDefault := backoff.NewBackOff(time.Second, time.Hour, backoff.WithClock(clock))
	custom := backoff.NewBackOff(time.Second, time.Hour, backoff.WithClock(clock), backoff.WithExpiry(oneQuietMinute))
	for _, b := range []*backoff.Backoff{byDefault, custom} {
		for range 3 {
			b.Next("job", clock.Now())
		}
	}
	clock.Step(2 * time.Minute)
	for _, b := range []*backoff.Backoff{byDefault, custom} {
		b.Next("job", clock.Now())
	}
	fmt.Println("default rule:", byDefault.Get("job"))
	fmt.Println("one quiet minute:", custom.Get("job"))
	// Output:
	// default rule: 8s
	// one quiet minute: 1s
}

// With EqualJitter, each wait of Retry lies in [b/2, b) for the schedule's
// wait b: never an immediate retry, and clients that failed together spread
// out.
func ExampleWithJitterKind() {
	clk := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	s := backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Steps: 4}
	b := s.Duration
	_ = backoff.Retry(context.Background(), s, func(context.Context) error {
		return errors.New("busy")
	}, backoff.WithClock(clk), backoff.WithJitterKind(backoff.EqualJitter),
		backoff.WithNotify(func(attempt int, _ error, next time.Duration) {
			fmt.Printf("wait %d in [%v, %v): %v\n", attempt, b/2, b, next >= b/2 && next < b)
			b *= 2
			clk.Step(next)
		}))
	// Output:
	// wait 1 in [50ms, 100ms): true
	// wait 2 in [100ms, 200ms): true
	// wait 3 in [200ms, 400ms): true
}

// WithMaxElapsedTime bounds when attempts may start: here the fourth would
// start 7s after the call, past the 5s budget, so Retry stops after three.
func ExampleWithMaxElapsedTime() {
	clk := newAutoStepClock()
	start := clk.Now()
	s := backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 10}
	err := backoff.Retry(context.Background(), s, func(context.Context) error {
		fmt.Println("attempt at", clk.Since(start))
		return errors.New("unavailable")
	}, backoff.WithClock(clk), backoff.WithMaxElapsedTime(5*time.Second))
	fmt.Println("budget spent:", errors.Is(err, backoff.ErrMaxElapsedTime))
	// Output:
	// attempt at 0s
	// attempt at 1s
	// attempt at 3s
	// budget spent: true
}

// WithRetryable retries only the errors it accepts: any other ends Retry at
// once and is returned as fn returned it.
func ExampleWithRetryable() {
	errTimeout := errors.New("i/o timeout")
	errDenied := errors.New("permission denied")
	calls := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 5}, func(context.Context) error {
		calls++
		if calls < 3 {
			return errTimeout
		}
		return errDenied
	}, backoff.WithRetryable(func(err error) bool { return errors.Is(err, errTimeout) }))
	fmt.Println(calls, "calls:", err)
	// Output:
	// 3 calls: permission denied
}

// WithPanicHandler keeps a loop alive through a panic in f: the handler gets
// the panic's value and the schedule carries on.
func ExampleWithPanicHandler() {
	clk := newAutoStepClock()
	start := clk.Now()
	stop := make(chan struct{})
	runs := 0
	backoff.Until(func() {
		runs++
		if runs == 3 {
			close(stop)
		}
		if runs == 2 {
			panic("nil map")
		}
		fmt.Println("run at", clk.Since(start))
	}, time.Second, stop, backoff.WithClock(clk), backoff.WithPanicHandler(func(r any) {
		fmt.Printf("recovered %q at %v\n", r, clk.Since(start))
	}))
	// Output:
	// run at 0s
	// recovered "nil map" at 1s
	// run at 2s
}

// WithRequeueJitter spreads the requeues of items that failed together: each
// delay is up to maxFactor longer than the limiter's, never past its cap.
func ExampleWithRequeueJitter() {
	l := backoff.NewItemExponentialFailureRateLimiter[string](100*time.Millisecond, time.Second,
		backoff.WithRequeueJitter(0.5))
	base := 100 * time.Millisecond
	for failure := 1; failure <= 3; failure++ {
		d := l.When("default/web")
		fmt.Printf("failure %d in [%v, %v): %v\n", failure, base, base+base/2, d >= base && d < base+base/2)
		base *= 2
	}
	l.When("default/web") // 800ms plus jitter, at most 1s
	fmt.Println("at the cap:", l.When("default/web"), l.When("default/web"))
	// Output:
	// failure 1 in [100ms, 150ms): true
	// failure 2 in [200ms, 300ms): true
	// failure 3 in [400ms, 600ms): true
	// at the cap: 1s 1s
}

// A job queue that stores how often a job failed can wait what Retry would
// before the next run.
func ExampleSchedule_Delay() {
	s := backoff.Schedule{Duration: time.Second, Factor: 2, Cap: 10 * time.Second}
	for n := 1; n <= 6; n++ {
		fmt.Printf("after failure %d: %v\n", n, s.Delay(n))
	}
	// Output:
	// after failure 1: 1s
	// after failure 2: 2s
	// after failure 3: 4s
	// after failure 4: 8s
	// after failure 5: 10s
	// after failure 6: 10s
}
