package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// A budget of 10% of requests (and no floor) refuses the second retry after
// ten requests, until the requests that paid for the first leave the window.
func ExampleNewRetryBudget() {
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	budget := backoff.NewRetryBudget(0.1, 0, 10*time.Second, backoff.WithClock(fc))
	for range 10 {
		budget.RecordRequest()
	}
	fmt.Println(budget.TryRetry(), budget.TryRetry())
	fmt.Printf("%+v\n", budget.Snapshot())
	// Output:
	// true false
	// {Requests:10 Retries:1 Refused:1 Balance:0}
}

// A Retry that shares a budget returns at once when the budget refuses its
// next attempt, with an error that says so and still carries the last error.
func ExampleWithRetryBudget() {
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	budget := backoff.NewRetryBudget(0.1, 0, 10*time.Second, backoff.WithClock(fc))
	errDown := errors.New("dependency down")
	attempts := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Duration: time.Second, Steps: 5},
		func(context.Context) error { attempts++; return errDown },
		backoff.WithClock(fc), backoff.WithRetryBudget(budget),
		// Steps the fake clock through any wait, as a real one would pass.
		backoff.WithNotify(func(_ int, _ error, next time.Duration) { fc.Step(next) }))
	var re *backoff.RetryError
	fmt.Println(attempts, errors.Is(err, backoff.ErrRetryBudgetExhausted), errors.Is(err, errDown), errors.As(err, &re))
	fmt.Println(err)
	// Output:
	// 1 true true true
	// backoff: retry stopped after 1 attempt: retry budget exhausted; last error: dependency down
}
