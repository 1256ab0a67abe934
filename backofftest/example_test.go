package backofftest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
)

// Code under test runs Retry on a goroutine of its own. With a plain
// FakeClock the test would have to step the clock each time Retry waits;
// with an AutoStepClock it only waits for the result, and the attempts carry
// the times they would have had on a real clock.
func ExampleAutoStepClock() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := backofftest.NewAutoStepClock(start)

	result := make(chan error)
	go func() { // the code under test
		result <- backoff.Retry(context.Background(), backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 4},
			func(context.Context) error {
				fmt.Println("attempt at", clk.Since(start))
				return errors.New("unavailable")
			}, backoff.WithClock(clk))
	}()

	fmt.Println(<-result)
	// Output:
	// attempt at 0s
	// attempt at 1s
	// attempt at 3s
	// attempt at 7s
	// backoff: retry stopped after 4 attempts: attempts exhausted; last error: unavailable
}
