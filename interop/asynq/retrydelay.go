// Package asynqbackoff schedules the retries of asynq tasks
// (github.com/hibiken/asynq) on a backoff.Schedule of
// github.com/retrykit/backoff, so that work retried in process with
// backoff.Retry and work retried across restarts by asynq wait the same way:
//
//	srv := asynq.NewServer(redisOpt, asynq.Config{
//		RetryDelayFunc: asynqbackoff.RetryDelay(schedule),
//		...
//	})
//
// The package is named asynqbackoff, not asynq, so that it can be imported
// next to asynq's own package without renaming either.
package asynqbackoff

import (
	"time"

	"github.com/hibiken/asynq"

	"github.com/retrykit/backoff"
)

// RetryDelay returns an asynq.RetryDelayFunc that retries a failed task
// after the wait s gives for that failure, as backoff.Retry would wait
// before the next attempt: s.Duration after the first failure (asynq's n =
// 0), s.Duration·s.Factor after the second, and so on, at most s.Cap,
// stretched by up to s.Jitter times the wait. A Factor ≤ 1 (or NaN) means
// constant waits and a negative Duration counts as 0, as for backoff.Retry;
// the result never overflows.
//
// s.Steps is not used: the task's MaxRetry decides when asynq stops
// retrying. The error and the task are not consulted; to treat some tasks
// differently, wrap the function. The function is safe for concurrent use.
func RetryDelay(s backoff.Schedule) asynq.RetryDelayFunc {
	return func(retried int, _ error, _ *asynq.Task) time.Duration {
		return s.Delay(retried + 1)
	}
}
