package backofftest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	start     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	errFailed = errors.New("failed")
)

// TestRetryOnAGoroutineFinishesWithoutStepping: the test only waits for the
// goroutine; the waits step the clock themselves, and the attempts carry the
// times a real clock would have given them.
func TestRetryOnAGoroutineFinishesWithoutStepping(t *testing.T) {
	clk := backofftest.NewAutoStepClock(start)
	var at []time.Duration
	done := make(chan error)
	go func() {
		done <- backoff.Retry(context.Background(), backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5},
			func(context.Context) error {
				at = append(at, clk.Since(start))
				return errFailed
			}, backoff.WithClock(clk))
	}()
	err := <-done
	require.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{0, 10 * ms, 30 * ms, 70 * ms, 150 * ms}, at)
	assert.False(t, clk.HasWaiters(), "Retry left no timer behind")
}

// TestPollUntilContextTimeoutTimesOutOnTheFakeClock: the timeout is a second
// waiter (an AfterFunc) that no timer read steps to directly; the interval
// timer's steps carry the clock past it.
func TestPollUntilContextTimeoutTimesOutOnTheFakeClock(t *testing.T) {
	clk := backofftest.NewAutoStepClock(start)
	checks := 0
	err := backoff.PollUntilContextTimeout(context.Background(), time.Second, 10*time.Second, false,
		func(context.Context) (bool, error) { checks++; return false, nil }, backoff.WithClock(clk))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 10*time.Second, clk.Since(start))
	assert.Equal(t, 9, checks, "checks at 1 s … 9 s; the timeout ends the wait at 10 s")
}

func TestTimerStepsOnlyWhileRunning(t *testing.T) {
	clk := backofftest.NewAutoStepClock(start)
	tm := clk.NewTimer(time.Minute)
	assert.True(t, tm.Stop())
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	assert.Equal(t, time.Duration(0), clk.Since(start), "reading a stopped timer steps nothing")

	tm.Reset(time.Second)
	<-tm.C()
	assert.Equal(t, time.Second, clk.Since(start))
	<-clk.After(time.Hour)
	assert.Equal(t, time.Hour+time.Second, clk.Since(start))
}
