package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// Retry calls fn until it succeeds. Here the fake clock is stepped from the
// notify hook, which Retry calls once the wait is set: each wait then ends at
// once, and the attempts carry the fake times they would have had.
func ExampleRetry() {
	clk := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	s := backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5}
	attempt := 0
	err := backoff.Retry(context.Background(), s, func(context.Context) error {
		attempt++
		fmt.Printf("attempt %d at %v\n", attempt, clk.Since(start))
		if attempt < 4 {
			return errors.New("connection refused")
		}
		return nil
	}, backoff.WithClock(clk), backoff.WithNotify(func(_ int, _ error, next time.Duration) {
		clk.Step(next)
	}))
	fmt.Println("err:", err)
	// Output:
	// attempt 1 at 0s
	// attempt 2 at 10ms
	// attempt 3 at 30ms
	// attempt 4 at 70ms
	// err: <nil>
}

// A Permanent error ends Retry at once: it is returned as fn returned it.
func ExampleRetry_permanent() {
	errNotFound := errors.New("not found")
	attempts := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Duration: time.Second, Steps: 5}, func(context.Context) error {
		attempts++
		return backoff.Permanent(errNotFound)
	})
	fmt.Println(attempts, err, errors.Is(err, errNotFound), backoff.IsPermanent(err))
	// Output:
	// 1 not found true true
}

// When attempts run out, the error says how many were made, and errors.Is
// reaches both the last error and the reason.
func ExampleRetry_exhausted() {
	errBusy := errors.New("busy")
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 3}, func(context.Context) error {
		return errBusy
	})
	var re *backoff.RetryError
	fmt.Println(err)
	fmt.Println(errors.As(err, &re), re.Attempts, errors.Is(err, errBusy), errors.Is(err, backoff.ErrAttemptsExhausted))
	// Output:
	// backoff: retry stopped after 3 attempts: attempts exhausted; last error: busy
	// true 3 true true
}

// A server's Retry-After hint replaces the scheduled wait; a hint above the
// bound (WithMaxRetryAfter, DefaultMaxRetryAfter by default) waits the bound.
func ExampleRetryAfter() {
	clk := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	s := backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 4}
	hints := []time.Duration{2 * time.Second, 24 * time.Hour}
	attempt := 0
	err := backoff.Retry(context.Background(), s, func(context.Context) error {
		attempt++
		if attempt <= len(hints) {
			return backoff.RetryAfter(hints[attempt-1], errors.New("503 Service Unavailable"))
		}
		return errors.New("500 Internal Server Error")
	}, backoff.WithClock(clk), backoff.WithMaxRetryAfter(time.Minute),
		backoff.WithNotify(func(attempt int, err error, next time.Duration) {
			fmt.Printf("attempt %d: %v; next in %v\n", attempt, err, next)
			clk.Step(next)
		}))
	fmt.Println(err)
	// Output:
	// attempt 1: 503 Service Unavailable; next in 2s
	// attempt 2: 503 Service Unavailable; next in 1m0s
	// attempt 3: 500 Internal Server Error; next in 40ms
	// backoff: retry stopped after 4 attempts: attempts exhausted; last error: 500 Internal Server Error
}

func ExampleRetryValue() {
	calls := 0
	v, err := backoff.RetryValue(context.Background(), backoff.Schedule{Steps: 3}, func(context.Context) (int, error) {
		calls++
		if calls < 2 {
			return 0, errors.New("not yet")
		}
		return 42, nil
	})
	fmt.Println(v, err, calls)
	// Output:
	// 42 <nil> 2
}

// OnError is client-go's retry.OnError: it returns fn's last error, not a
// wrapper, when the attempts run out.
func ExampleOnError() {
	errConflict := errors.New("the object has been modified")
	err := backoff.OnError(backoff.Schedule{Steps: 3}, func(err error) bool { return err == errConflict },
		func() error { return errConflict })
	fmt.Println(err)
	// Output:
	// the object has been modified
}
