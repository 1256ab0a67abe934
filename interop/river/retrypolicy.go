// Package riverbackoff schedules the retries of River jobs
// (github.com/riverqueue/river) on a backoff.Schedule of
// github.com/retrykit/backoff, so that work retried in process with
// backoff.Retry and work retried across restarts by River wait the same way:
//
//	client, err := river.NewClient(driver, &river.Config{
//		RetryPolicy: &riverbackoff.RetryPolicy{Schedule: schedule},
//		...
//	})
//
// The package is named riverbackoff, not river, so that it can be imported
// next to River's own package without renaming either.
package riverbackoff

import (
	"time"

	"github.com/riverqueue/river/rivertype"
	"k8s.io/utils/clock"

	"github.com/retrykit/backoff"
)

// RetryPolicy is a river.ClientRetryPolicy that runs a failed job again after
// the wait its Schedule gives for that failure, as backoff.Retry would wait
// before the next attempt: Duration after the first failure, Duration·Factor
// after the second, and so on, at most Cap, stretched by up to Jitter times
// the wait. A Factor ≤ 1 (or NaN) means constant waits and a negative Duration
// counts as 0, as for backoff.Retry; the result never overflows.
//
// Schedule.Steps is not used: River's MaxAttempts for the job decides when
// it stops retrying. Failures are counted as River's default policy counts
// them, from the job's recorded errors, so that snoozes do not count.
//
// The zero RetryPolicy retries at once (a zero Schedule has no waits) on the
// real clock. A RetryPolicy is safe for concurrent use; do not change its
// fields while River uses it.
type RetryPolicy struct {
	// Schedule gives the waits, as for backoff.Retry.
	Schedule backoff.Schedule

	// Clock is what "now" is read from; nil means the real clock. Tests pass
	// a FakeClock from k8s.io/utils/clock/testing.
	Clock clock.PassiveClock
}

// NextRetry returns when job, which has just failed, should run again: now
// plus the Schedule's wait for this failure. River calls it once per failure.
func (p *RetryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	failures := 1
	if job != nil {
		failures = len(job.Errors) + 1 // the failure at hand is not recorded yet
	}
	var now time.Time
	if p.Clock != nil {
		now = p.Clock.Now()
	} else {
		now = time.Now()
	}
	return now.Add(p.Schedule.Delay(failures))
}
