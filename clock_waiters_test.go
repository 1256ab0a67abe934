package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// armingClock is a FakeClock that reports, on armed, every timer it creates,
// once the timer is registered: a test can then count the waiters without
// polling.
type armingClock struct {
	*testclock.FakeClock
	armed chan time.Duration
}

func (c *armingClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.armed <- d
	return t
}

// TestClockWaitersAreAsDocumented checks WithClock's table of waiters for
// the helpers a test most often runs on a goroutine.
func TestClockWaitersAreAsDocumented(t *testing.T) {
	newClock := func() *armingClock {
		return &armingClock{testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), make(chan time.Duration)}
	}
	t.Run("PollUntilContextTimeout: the timeout and the interval", func(t *testing.T) {
		c := newClock()
		done := wtGo(func() {
			_ = backoff.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, false,
				func(context.Context) (bool, error) { return true, nil }, backoff.WithClock(c))
		})
		assert.Equal(t, time.Second, waitFor(t, "the wait's timer", c.armed, c))
		assert.Equal(t, 2, c.Waiters(), "the timeout's AfterFunc, and the wait's timer")
		c.Step(time.Second)
		waitFor(t, "PollUntilContextTimeout to return", done, c)
		assert.Equal(t, 0, c.Waiters(), "none outlives the call")
	})
	t.Run("Retry: one timer during a wait", func(t *testing.T) {
		c := newClock()
		done := wtGo(func() {
			_ = backoff.Retry(context.Background(), backoff.Schedule{Duration: time.Second, Steps: 2},
				func(context.Context) error { return errFlaky }, backoff.WithClock(c))
		})
		assert.Equal(t, time.Second, waitFor(t, "the wait's timer", c.armed, c))
		assert.Equal(t, 1, c.Waiters())
		c.Step(time.Second)
		waitFor(t, "Retry to return", done, c)
		assert.Equal(t, 0, c.Waiters())
	})
}
