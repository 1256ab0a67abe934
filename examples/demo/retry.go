package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
)

func init() {
	register("retry", "Retry's schedule {10 ms, ×2, Steps 5}, and the Cap quirk of Schedule.Step (kubernetes#131122)", retryDemo)
}

// retryDemoStart is the fake clocks' origin.
var retryDemoStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func retryDemo(w io.Writer) {
	// Retry with an fn that always fails: attempts at 0, 10, 30, 70, 150ms.
	// The fake clock is stepped from the notify hook, which Retry calls once
	// the wait is set, so every wait ends at once.
	fc := testclock.NewFakeClock(retryDemoStart)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "attempt\tat (s)\tresult\tnext wait (s)")
	attempt := 0
	s := backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5}
	err := backoff.Retry(context.Background(), s, func(context.Context) error {
		attempt++
		fmt.Fprintf(tw, "%d\t%s\tconnection refused\t", attempt, seconds(fc.Since(retryDemoStart)))
		return errors.New("connection refused")
	}, backoff.WithClock(fc), backoff.WithNotify(func(_ int, _ error, next time.Duration) {
		fmt.Fprintf(tw, "%s\n", seconds(next))
		fc.Step(next)
	}))
	fmt.Fprintln(tw, "-")
	tw.Flush()
	fmt.Fprintf(w, "Retry returned: %v\n\n", err)

	// Schedule.Step: reaching Cap sets Steps to 0.
	capped := backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 10, Cap: 3 * time.Second}
	step := capped
	var steps []string
	for i := 0; i < 4; i++ {
		d := step.Step()
		steps = append(steps, fmt.Sprintf("%s s (Steps %d)", seconds(d), step.Steps))
	}
	fmt.Fprintf(w, "Schedule{1 s, ×2, Steps 10, Cap 3 s}.Step(): %s\n", strings.Join(steps, ", "))

	// ExponentialBackoff stops when Steps reaches 0: 2 checks of 10.
	ac := backofftest.NewAutoStepClock(retryDemoStart)
	var checks []string
	err = backoff.ExponentialBackoff(capped, func() (bool, error) {
		checks = append(checks, seconds(ac.Since(retryDemoStart)))
		return false, nil
	}, backoff.WithClock(ac))
	fmt.Fprintf(w, "ExponentialBackoff: checks at %s s; returns at %s s: %v\n",
		strings.Join(checks, ", "), seconds(ac.Since(retryDemoStart)), err)

	// Retry keeps going at the cap: all 10 attempts.
	ac = backofftest.NewAutoStepClock(retryDemoStart)
	var attempts []string
	err = backoff.Retry(context.Background(), capped, func(context.Context) error {
		attempts = append(attempts, seconds(ac.Since(retryDemoStart)))
		return errors.New("not ready")
	}, backoff.WithClock(ac))
	fmt.Fprintf(w, "Retry:              attempts at %s s\n                    %v\n", strings.Join(attempts, ", "), err)
	fmt.Fprintln(w, "Numbers: Retry's schedule is the caller's; the Cap quirk is apimachinery's wait.Backoff.Step")
	fmt.Fprintln(w, "and wait.ExponentialBackoff, in every Kubernetes release to date (kubernetes#131122).")
}
