package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

// TestEmptyHeapStopsATimerThatArmedForgot sets up, by hand, what two timer
// callbacks racing with Steps can leave behind (seen once in CI, in
// TestDelayingQueueOneClockWaiterForAllItems): the timer pending while armed
// is false. Emptying the heap must still stop it, or the clock keeps a
// waiter for a queue in which nothing waits.
func TestEmptyHeapStopsATimerThatArmedForgot(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	q := NewDelayingQueue[int](WithClock(fc))
	defer q.ShutDown()
	q.AddAfter(1, time.Second)
	require.Equal(t, 1, fc.Waiters())

	q.mu.Lock()
	q.delays.armed = false // as a stale onTimer leaves it
	q.mu.Unlock()
	fc.SetTime(fc.Now().Add(time.Second)) // fires the timer (its onTimer runs on a goroutine)
	q.mu.Lock()
	q.delays.timer.Reset(time.Hour) // the other onTimer's late re-arm: pending again, armed still false
	q.mu.Unlock()
	q.onTimer() // the stale firing's callback, late: whichever order, the timer ends stopped

	assert.Equal(t, 1, q.Len(), "item 1 is ready")
	assert.Equal(t, 0, fc.Waiters(), "no timer once nothing waits")
}
