package riverbackoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	riverbackoff "github.com/retrykit/backoff/interop/river"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// jobWithErrors is a job as River hands it to the policy after its n-th
// failure: the n-1 earlier errors recorded, the current one not yet.
func jobWithErrors(n int) *rivertype.JobRow {
	job := &rivertype.JobRow{Attempt: n, MaxAttempts: 25}
	for i := 1; i < n; i++ {
		job.Errors = append(job.Errors, rivertype.AttemptError{Attempt: i, At: epoch, Error: "failed"})
	}
	return job
}

func TestNextRetryFollowsSchedule(t *testing.T) {
	clock := testclock.NewFakeClock(epoch)
	// The policy is used through River's own interface type.
	var policy river.ClientRetryPolicy = &riverbackoff.RetryPolicy{
		Schedule: backoff.Schedule{Duration: time.Second, Factor: 2, Cap: 10 * time.Second},
		Clock:    clock,
	}
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i, w := range want {
		assert.Equal(t, epoch.Add(w*time.Second), policy.NextRetry(jobWithErrors(i+1)), "failure %d", i+1)
	}
	clock.Step(time.Hour)
	assert.Equal(t, epoch.Add(time.Hour+time.Second), policy.NextRetry(jobWithErrors(1)), "measured from now")
}

// TestSnoozesDoNotCount: River decrements Attempt on a snooze but keeps the
// errors; the policy counts errors, as River's default policy does.
func TestSnoozesDoNotCount(t *testing.T) {
	clock := testclock.NewFakeClock(epoch)
	policy := &riverbackoff.RetryPolicy{Schedule: backoff.Schedule{Duration: time.Second, Factor: 3}, Clock: clock}
	job := jobWithErrors(2)
	job.Attempt = 7
	assert.Equal(t, epoch.Add(3*time.Second), policy.NextRetry(job))
	assert.Equal(t, epoch.Add(time.Second), policy.NextRetry(nil), "a nil job counts as a first failure")
}

// TestDelayMatchesRetry: the waits River is given are the waits backoff.Retry
// takes with the same Schedule.
func TestDelayMatchesRetry(t *testing.T) {
	schedules := []backoff.Schedule{
		{Duration: 100 * time.Millisecond, Factor: 2, Steps: 8, Cap: 3 * time.Second},
		{Duration: time.Second, Factor: 1.5, Steps: 8},
		{Duration: time.Second, Factor: 0.5, Steps: 5}, // Retry: constant
		{Duration: 5 * time.Second, Factor: 2, Steps: 4, Cap: time.Second},
		{Duration: -time.Second, Factor: 2, Steps: 4},
		{Steps: 3},
	}
	for _, s := range schedules {
		clock := testclock.NewFakeClock(epoch)
		var waits []time.Duration
		err := backoff.Retry(context.Background(), s, func(context.Context) error { return errors.New("fail") },
			backoff.WithClock(clock),
			backoff.WithNotify(func(_ int, _ error, next time.Duration) {
				waits = append(waits, next)
				clock.Step(next)
			}))
		require.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
		require.Len(t, waits, s.Steps-1)
		for i, w := range waits {
			assert.Equal(t, w, s.Delay(i+1), "%+v, failure %d", s, i+1)
		}
	}
}
