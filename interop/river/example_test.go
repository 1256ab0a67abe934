package riverbackoff_test

import (
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	riverbackoff "github.com/retrykit/backoff/interop/river"
)

// A River client configured to retry failed jobs on the same Schedule as the
// service's in-process retries. The policy is asked directly here; River asks
// it after each failure.
func ExampleRetryPolicy() {
	schedule := backoff.Schedule{Duration: 30 * time.Second, Factor: 2, Cap: time.Hour}
	clock := testclock.NewFakeClock(time.Date(2026, time.January, 1, 12, 0, 0, 0, time.UTC))
	policy := &riverbackoff.RetryPolicy{Schedule: schedule, Clock: clock}
	config := &river.Config{RetryPolicy: policy}

	job := &rivertype.JobRow{Kind: "send_invoice", MaxAttempts: 25}
	for failure := 1; failure <= 9; failure += 2 {
		for len(job.Errors) < failure-1 {
			job.Errors = append(job.Errors, rivertype.AttemptError{Error: "smtp: 421"})
		}
		next := config.RetryPolicy.NextRetry(job)
		fmt.Printf("failure %d: runs again at %s (in %v)\n", failure, next.Format(time.TimeOnly), next.Sub(clock.Now()))
	}
	// Output:
	// failure 1: runs again at 12:00:30 (in 30s)
	// failure 3: runs again at 12:02:00 (in 2m0s)
	// failure 5: runs again at 12:08:00 (in 8m0s)
	// failure 7: runs again at 12:32:00 (in 32m0s)
	// failure 9: runs again at 13:00:00 (in 1h0m0s)
}
