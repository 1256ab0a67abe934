package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// readCountingClock is a fake clock that counts the readings of its time
// (Now and Since) made through it.
type readCountingClock struct {
	*testingclock.FakeClock
	reads int
}

func (c *readCountingClock) Now() time.Time {
	c.reads++
	return c.FakeClock.Now()
}

func (c *readCountingClock) Since(t time.Time) time.Duration {
	c.reads++
	return c.FakeClock.Since(t)
}

// TestRetryBudgetOnRetrysClockIsNotReadAgain: with WithMaxElapsedTime and a
// budget on Retry's own clock, Retry reads the clock once at the start and
// once per retry decision, and hands those readings to the budget, which
// reads the clock no more (each attempt takes a second of the clock, so a
// budget that read it again would see another time than Retry's).
func TestRetryBudgetOnRetrysClockIsNotReadAgain(t *testing.T) {
	c := &readCountingClock{FakeClock: testingclock.NewFakeClock(epoch)}
	b := backoff.NewRetryBudget(0, 1, time.Minute, backoff.WithClock(c))
	c.reads = 0
	calls := 0
	var err error
	waitForCall(t, "Retry to return", func() {
		err = backoff.Retry(context.Background(), backoff.Schedule{Steps: 5},
			func(context.Context) error {
				c.Step(time.Second)
				if calls++; calls < 3 {
					return errFlaky
				}
				return nil
			}, backoff.WithClock(c), backoff.WithRetryBudget(b), backoff.WithMaxElapsedTime(time.Hour))
	}, c.FakeClock)
	require.NoError(t, err)
	assert.Equal(t, 3, calls)
	assert.Equal(t, 3, c.reads, "clock readings: Retry's start and one per retry, none by the budget")
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: 1, Retries: 2, Balance: 58}, b.Snapshot())
}

// TestRetryBudgetWindowNotAMultipleOfItsBuckets: a window of 21 ns has
// buckets of 2 ns. The budget counts requests over the last 10 buckets and
// retries over 11, so that the retries of any 21 ns stay within what its
// requests pay for: 20 ns later, the retry at 0 still counts (10 buckets
// would have dropped it) and the request at 0 no longer does.
func TestRetryBudgetWindowNotAMultipleOfItsBuckets(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, 21*time.Nanosecond, backoff.WithClock(fc))
	b.RecordRequest()
	require.True(t, b.TryRetry(), "one request pays for one retry")
	fc.Step(20 * time.Nanosecond)
	b.RecordRequest()
	assert.False(t, b.TryRetry(), "the request at 20 ns pays for one retry, and the one at 0 is still counted")
}
