package main

import (
	"fmt"
	"io"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

func init() {
	register("controller-ratelimiter", "client-go's DefaultControllerRateLimiter: one item failing 21 times, then 150 items failing at once",
		demoRateLimit)
}

// demoRateLimit prints the requeue delays of client-go's (and
// controller-runtime's) default limiter: the per-item series, then the shared token bucket
// taking over when more than its burst of items fail at one instant.
func demoRateLimit(w io.Writer) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := backoff.DefaultControllerRateLimiter[string](backoff.WithClock(clk))
	fmt.Fprintln(w, "failure  delay (s)")
	for n := 1; n <= 21; n++ {
		fmt.Fprintf(w, "%7d  %s\n", n, seconds(l.When("default/web")))
	}
	l.Forget("default/web")
	clk.Step(time.Minute) // the bucket refills

	fmt.Fprintln(w, "\nitem     delay (s) (150 items fail at the same instant)")
	for i := 1; i <= 150; i++ {
		d := l.When(fmt.Sprint("default/item-", i))
		if i <= 2 || (i >= 99 && i <= 103) || i == 150 {
			fmt.Fprintf(w, "%4d     %s\n", i, seconds(d))
		} else if i == 3 || i == 104 {
			fmt.Fprintln(w, " ...")
		}
	}
	fmt.Fprintln(w, "Numbers: client-go workqueue's DefaultControllerRateLimiter, controller-runtime's default.")
}
