package backoff_test

import (
	"context"
	"fmt"
	"time"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
)

// newAutoStepClock returns a fake clock on which waiting takes no time (see
// backofftest.AutoStepClock): it lets the Examples run the loop helpers
// synchronously, with fake timestamps, and print deterministic output.
func newAutoStepClock() *backofftest.AutoStepClock {
	return backofftest.NewAutoStepClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
}

func ExampleUntil() {
	clk := newAutoStepClock()
	start := clk.Now()
	stop := make(chan struct{})
	runs := 0
	backoff.Until(func() {
		runs++
		fmt.Printf("run %d at %v\n", runs, clk.Since(start))
		if runs == 3 {
			close(stop) // checked before every run: there is no fourth
		}
	}, time.Second, stop, backoff.WithClock(clk))
	// Output:
	// run 1 at 0s
	// run 2 at 1s
	// run 3 at 2s
}

// A sliding loop starts the period when f returns; a non-sliding one when f
// starts. Here f takes 300ms.
func ExampleNonSlidingUntil() {
	for _, sliding := range []bool{true, false} {
		clk := newAutoStepClock()
		start := clk.Now()
		stop := make(chan struct{})
		var at []time.Duration
		f := func() {
			at = append(at, clk.Since(start))
			clk.Step(300 * time.Millisecond) // f's run time
			if len(at) == 3 {
				close(stop)
			}
		}
		if sliding {
			backoff.Until(f, time.Second, stop, backoff.WithClock(clk))
		} else {
			backoff.NonSlidingUntil(f, time.Second, stop, backoff.WithClock(clk))
		}
		fmt.Printf("sliding %-5v runs at %v\n", sliding, at)
	}
	// Output:
	// sliding true  runs at [0s 1.3s 2.6s]
	// sliding false runs at [0s 1s 2s]
}

func ExampleJitterUntil() {
	clk := newAutoStepClock()
	stop := make(chan struct{})
	last := clk.Now()
	runs := 0
	backoff.JitterUntil(func() {
		runs++
		if runs > 1 {
			wait := clk.Since(last)
			fmt.Printf("run %d after a wait in [1s, 1.5s): %v\n", runs, wait >= time.Second && wait < 1500*time.Millisecond)
		}
		last = clk.Now()
		if runs == 4 {
			close(stop)
		}
	}, time.Second, 0.5, true, stop, backoff.WithClock(clk))
	// Output:
	// run 2 after a wait in [1s, 1.5s): true
	// run 3 after a wait in [1s, 1.5s): true
	// run 4 after a wait in [1s, 1.5s): true
}

func ExampleSchedule_Step() {
	s := backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 3, Cap: 3 * time.Second}
	for i := 0; i < 4; i++ {
		fmt.Printf("%v (Steps left: %d)\n", s.Step(), s.Steps)
	}
	// Output:
	// 1s (Steps left: 2)
	// 2s (Steps left: 0)
	// 3s (Steps left: 0)
	// 3s (Steps left: 0)
}

func ExampleExponentialBackoffWithContext() {
	clk := newAutoStepClock()
	start := clk.Now()
	s := backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 4}
	err := backoff.ExponentialBackoffWithContext(context.Background(), s, func(context.Context) (bool, error) {
		fmt.Println("check at", clk.Since(start))
		return false, nil // never ready
	}, backoff.WithClock(clk))
	fmt.Println(err, backoff.Interrupted(err))
	// Output:
	// check at 0s
	// check at 10ms
	// check at 30ms
	// check at 70ms
	// backoff: timed out waiting for the condition true
}

// ExponentialBackoff gives up early when its wait reaches the cap
// (kubernetes#131122): here after 2 of 10 checks. Retry does not.
func ExampleExponentialBackoff_capQuirk() {
	clk := newAutoStepClock()
	s := backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 10, Cap: 3 * time.Second}
	checks := 0
	err := backoff.ExponentialBackoff(s, func() (bool, error) { checks++; return false, nil }, backoff.WithClock(clk))
	fmt.Println("ExponentialBackoff:", checks, "checks:", err)

	attempts := 0
	err = backoff.Retry(context.Background(), s, func(context.Context) error { attempts++; return fmt.Errorf("not ready") },
		backoff.WithClock(clk))
	fmt.Println("Retry:", attempts, "attempts:", err)
	// Output:
	// ExponentialBackoff: 2 checks: backoff: timed out waiting for the condition
	// Retry: 10 attempts: backoff: retry stopped after 10 attempts: attempts exhausted; last error: not ready
}

func ExamplePollUntilContextTimeout() {
	clk := newAutoStepClock()
	start := clk.Now()
	err := backoff.PollUntilContextTimeout(context.Background(), time.Second, 3500*time.Millisecond, true,
		func(context.Context) (bool, error) {
			fmt.Println("check at", clk.Since(start))
			return false, nil
		}, backoff.WithClock(clk))
	fmt.Println(err)
	// Output:
	// check at 0s
	// check at 1s
	// check at 2s
	// check at 3s
	// context deadline exceeded
}
