package asynqbackoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	asynqbackoff "github.com/retrykit/backoff/interop/asynq"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

func TestRetryDelayFollowsSchedule(t *testing.T) {
	// Used as asynq's own function type, in asynq's own Config.
	cfg := asynq.Config{RetryDelayFunc: asynqbackoff.RetryDelay(
		backoff.Schedule{Duration: time.Second, Factor: 2, Cap: 10 * time.Second})}
	task := asynq.NewTask("email:deliver", []byte(`{"to":"a@example.com"}`))
	failed := errors.New("smtp: 421")
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for retried, w := range want {
		assert.Equal(t, w*time.Second, cfg.RetryDelayFunc(retried, failed, task), "retried %d times", retried)
	}
	assert.Equal(t, time.Second, cfg.RetryDelayFunc(-1, failed, nil), "a negative count is a first failure")
}

// TestDelayMatchesRetry: the waits asynq is given are the waits backoff.Retry
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
		delay := asynqbackoff.RetryDelay(s)
		for i, w := range waits {
			assert.Equal(t, w, delay(i, nil, nil), "%+v, retried %d times", s, i)
		}
	}
}
