// Program river is the release rehearsal's user of the module
// github.com/retrykit/backoff/interop/river: a RetryPolicy asked, as River
// asks it, when a job that failed twice runs again.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/riverqueue/river/rivertype"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	riverbackoff "github.com/retrykit/backoff/interop/river"
)

func main() {
	clock := testclock.NewFakeClock(time.Date(2026, time.January, 1, 12, 0, 0, 0, time.UTC))
	policy := &riverbackoff.RetryPolicy{
		Schedule: backoff.Schedule{Duration: 30 * time.Second, Factor: 2, Cap: time.Hour},
		Clock:    clock,
	}
	job := &rivertype.JobRow{Kind: "send_invoice", MaxAttempts: 25,
		Errors: []rivertype.AttemptError{{Error: "smtp: 421"}}}
	// The second failure: River has recorded the first one's error.
	if in := policy.NextRetry(job).Sub(clock.Now()); in != time.Minute {
		fail("after the second failure, the job runs again in %v; want 1m0s", in)
	}
	fmt.Println("river.RetryPolicy: after the second failure, the job runs again in 1m0s")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "river: "+format+"\n", args...)
	os.Exit(1)
}
