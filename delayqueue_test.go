package backoff_test

import (
	"context"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

func newDelayingQueue[T comparable](t *testing.T) (*backoff.DelayingQueue[T], func(time.Duration)) {
	t.Helper()
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[T](backoff.WithClock(fc))
	t.Cleanup(q.ShutDown)
	return q, fc.Step
}

func TestDelayingQueueAddAfterWaitsExactly(t *testing.T) {
	for _, d := range []time.Duration{time.Nanosecond, 5 * time.Millisecond, time.Hour} {
		t.Run(d.String(), func(t *testing.T) {
			q, step := newDelayingQueue[string](t)
			q.AddAfter("a", d)
			assert.Equal(t, 0, q.Len())
			step(d - 1)
			assert.Equal(t, 0, q.Len(), "1ns early")
			step(1)
			assert.Equal(t, 1, q.Len(), "visible as soon as the clock reaches its ready time")
			assert.Equal(t, []string{"a"}, getReady[string](t, q))
		})
	}
}

func TestDelayingQueueNonPositiveDelayAddsAtOnce(t *testing.T) {
	for _, d := range []time.Duration{0, -1, math.MinInt64} {
		q, _ := newDelayingQueue[string](t)
		q.AddAfter("a", d)
		assert.Equal(t, 1, q.Len(), "d=%v", d)
	}
}

func TestDelayingQueueEarlierReadyTimeWins(t *testing.T) {
	tests := []struct {
		name   string
		delays []time.Duration
		want   time.Duration
	}{
		{"later second add is ignored", []time.Duration{time.Second, time.Hour}, time.Second},
		{"earlier second add moves it", []time.Duration{time.Hour, time.Second}, time.Second},
		{"equal", []time.Duration{time.Second, time.Second}, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, step := newDelayingQueue[string](t)
			for _, d := range tt.delays {
				q.AddAfter("a", d)
			}
			step(tt.want - 1)
			assert.Equal(t, 0, q.Len())
			step(1)
			assert.Equal(t, []string{"a"}, getReady[string](t, q))
			step(2 * time.Hour)
			assert.Equal(t, 0, q.Len(), "no second copy")
		})
	}
}

func TestDelayingQueueReadyTimeOrder(t *testing.T) {
	q, step := newDelayingQueue[string](t)
	q.AddAfter("c", 3*time.Second)
	q.AddAfter("a", 1*time.Second)
	q.AddAfter("tie1", 2*time.Second)
	q.AddAfter("tie2", 2*time.Second)
	q.AddAfter("b", 1500*time.Millisecond)
	q.AddAfter("moved", time.Hour)
	q.AddAfter("moved", 2*time.Second) // its time is set after tie1's and tie2's
	q.Add("now")
	step(10 * time.Second) // everything becomes ready at once
	assert.Equal(t, []string{"now", "a", "b", "tie1", "tie2", "moved", "c"}, getReady[string](t, q))
}

// TestDelayingQueueAddMovesWaitingItemToReady covers kubernetes#126027:
// client-go leaves the waiting copy, which runs the item a second time.
func TestDelayingQueueAddMovesWaitingItemToReady(t *testing.T) {
	adds := map[string]func(q *backoff.DelayingQueue[string]){
		"Add":           func(q *backoff.DelayingQueue[string]) { q.Add("a") },
		"AddAfter 0":    func(q *backoff.DelayingQueue[string]) { q.AddAfter("a", 0) },
		"AddAfter -1ns": func(q *backoff.DelayingQueue[string]) { q.AddAfter("a", -1) },
	}
	for name, add := range adds {
		t.Run(name, func(t *testing.T) {
			q, step := newDelayingQueue[string](t)
			q.AddAfter("a", 5*time.Hour)
			add(q)
			assert.Equal(t, []string{"a"}, getReady[string](t, q))
			_, waits := q.NextReadyAt()
			assert.False(t, waits, "the waiting copy is gone")
			step(6 * time.Hour)
			assert.Equal(t, 0, q.Len(), "a runs once")
		})
	}
}

func TestDelayingQueueAddWhileWaitingAndProcessing(t *testing.T) {
	q, step := newDelayingQueue[string](t)
	q.Add("a")
	item, _ := get(t, q.Get)
	q.AddAfter("a", time.Second) // a requeue scheduled by its own worker
	q.Add("a")                   // then an event: supersedes the wait
	q.Done(item)
	assert.Equal(t, []string{"a"}, getReady[string](t, q))
	step(time.Hour)
	assert.Equal(t, 0, q.Len())
}

func TestDelayingQueueItemDueWhileProcessingIsRequeuedOnDone(t *testing.T) {
	q, step := newDelayingQueue[string](t)
	q.Add("a")
	item, _ := get(t, q.Get)
	q.AddAfter("a", time.Second)
	step(time.Second)
	assert.Equal(t, 0, q.Len(), "never handed to a second worker")
	q.Done(item)
	assert.Equal(t, []string{"a"}, getReady[string](t, q))
}

func TestDelayingQueueBlockedGetWakesOnStep(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	defer q.ShutDown()
	q.AddAfter("a", time.Minute)
	got := getAsync[string](q)
	fc.Step(time.Minute)
	assert.Equal(t, getResult[string]{item: "a"}, waitFor(t, "Get to hand out \"a\" once the clock passed its delay", got, fc))
}

func TestDelayingQueueGetContextWaitsForDelayedItem(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	defer q.ShutDown()
	q.AddAfter("a", time.Minute)
	type res struct {
		item string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		item, err := q.GetContext(context.Background())
		ch <- res{item, err}
	}()
	fc.Step(time.Minute)
	assert.Equal(t, res{item: "a"}, waitFor(t, "GetContext to hand out \"a\" once the clock passed its delay", ch, fc))
}

func TestDelayingQueueOneClockWaiterForAllItems(t *testing.T) {
	t.Parallel()
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[int](backoff.WithClock(fc))
	defer q.ShutDown()
	assert.Equal(t, 0, fc.Waiters())
	for i := range 1000 {
		q.AddAfter(i, time.Duration(1000-i)*time.Second) // every add lowers the earliest time
	}
	assert.Equal(t, 1, fc.Waiters(), "one timer however many items wait")

	// Each step fires the timer; the queue re-arms it for the next item.
	for i := range 1000 {
		fc.Step(time.Second)
		assert.Equal(t, 1, q.Len(), "step %d", i)
		getReady[int](t, q)
		if i < 999 {
			assert.Equal(t, 1, fc.Waiters(), "step %d", i)
		}
	}
	assert.Equal(t, 0, fc.Waiters(), "no timer once nothing waits")
}

func TestDelayingQueueTimerStoppedWhenHeapEmpties(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	defer q.ShutDown()
	q.AddAfter("a", time.Second)
	require.Equal(t, 1, fc.Waiters())
	q.Add("a")
	assert.Equal(t, 0, fc.Waiters(), "a queue with nothing waiting holds no timer")
	q.AddAfter("b", time.Second)
	q.ShutDown()
	assert.Equal(t, 0, fc.Waiters(), "ShutDown stops the timer")
}

// TestDelayingQueuesIdleRunNoGoroutine: a queue whose items all wait runs no
// goroutine (client-go#746: 78k idle queues burned 2–3 cores).
func TestDelayingQueuesIdleRunNoGoroutine(t *testing.T) {
	fc := newQueueClock()
	before := runtime.NumGoroutine()
	queues := make([]*backoff.DelayingQueue[int], 1000)
	for i := range queues {
		queues[i] = backoff.NewDelayingQueue[int](backoff.WithClock(fc))
		queues[i].AddAfter(i, time.Hour)
	}
	// ≤: a short-lived goroutine of an earlier test may end meanwhile.
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "1000 queues with a waiting item, no goroutine")
	assert.Equal(t, 1000, fc.Waiters())
	for _, q := range queues {
		q.ShutDown()
	}
	assert.Equal(t, 0, fc.Waiters())
	assert.LessOrEqual(t, runtime.NumGoroutine(), before)
}

func TestDelayingQueueShutDown(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	q.AddAfter("due", time.Second)
	q.AddAfter("late", time.Hour)
	q.AddAfter("later", 2*time.Hour)
	fc.Step(time.Second) // "due" is due; nobody has looked yet
	q.ShutDown()

	q.AddAfter("ignored", time.Second)
	q.Add("ignored")
	_, ok := q.NextReadyAt()
	assert.False(t, ok, "nothing becomes ready after shutdown")
	fc.Step(3 * time.Hour)
	assert.Equal(t, []string{"due"}, getReady[string](t, q), "an item due at shutdown is queued, not stranded")
	_, shutdown := get(t, q.Get, fc)
	assert.True(t, shutdown)

	// The items still waiting are not lost: they can be taken back.
	assert.Equal(t, []backoff.WaitingItem[string]{
		{Item: "late", ReadyAt: epoch.Add(time.Hour)},
		{Item: "later", ReadyAt: epoch.Add(2 * time.Hour)},
	}, q.TakeWaiting())
	assert.Nil(t, q.TakeWaiting())
}

func TestDelayingQueueTakeWaitingWhileRunning(t *testing.T) {
	q, step := newDelayingQueue[string](t)
	q.AddAfter("a", time.Second)
	q.AddAfter("b", time.Minute)
	step(time.Second)
	assert.Equal(t, []backoff.WaitingItem[string]{{Item: "b", ReadyAt: epoch.Add(time.Minute)}},
		q.TakeWaiting(), "a is due, so queued, not taken")
	assert.Equal(t, []string{"a"}, getReady[string](t, q))
	step(time.Hour)
	assert.Equal(t, 0, q.Len())
}

func TestDelayingQueueNextReadyAt(t *testing.T) {
	q, step := newDelayingQueue[string](t)
	_, ok := q.NextReadyAt()
	assert.False(t, ok)
	q.AddAfter("a", time.Minute)
	q.AddAfter("b", time.Second)
	at, ok := q.NextReadyAt()
	assert.True(t, ok)
	assert.Equal(t, epoch.Add(time.Second), at)
	step(time.Second)
	at, _ = q.NextReadyAt()
	assert.Equal(t, epoch.Add(time.Minute), at)
}

func TestDelayingQueueSaturatesHugeDelays(t *testing.T) {
	q, step := newDelayingQueue[string](t)
	step(time.Hour)
	q.AddAfter("max", math.MaxInt64)
	at, ok := q.NextReadyAt()
	require.True(t, ok)
	assert.Equal(t, epoch.Add(math.MaxInt64), at, "saturated at the largest delay from the queue's creation")
	step(100 * 365 * 24 * time.Hour)
	assert.Equal(t, 0, q.Len())
}

func TestDelayingQueueClockSetBackBeforeCreation(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	defer q.ShutDown()
	fc.SetTime(epoch.Add(-time.Hour))
	q.AddAfter("a", time.Second) // counts from the queue's creation
	fc.SetTime(epoch.Add(time.Second - 1))
	assert.Equal(t, 0, q.Len())
	fc.SetTime(epoch.Add(time.Second))
	assert.Equal(t, 1, q.Len())
}

// TestDelayingQueueStepRacesAddAfterAndGet is the lock-order regression test:
// FakeClock runs the timer callback inside Step with its own lock held while
// queue operations, holding the queue's lock, call the clock. A callback that
// took the queue's lock would deadlock here.
func TestDelayingQueueStepRacesAddAfterAndGet(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[int](backoff.WithClock(fc))
	const n = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		var producers, consumers sync.WaitGroup
		producers.Add(3)
		go func() { // producer
			defer producers.Done()
			for i := range n {
				q.AddAfter(i%50, time.Duration(i%7)*time.Millisecond)
				q.Len()
			}
		}()
		go func() { // clock
			defer producers.Done()
			for range n {
				fc.Step(time.Millisecond)
			}
		}()
		go func() { // observer
			defer producers.Done()
			for range n {
				q.NextReadyAt()
			}
		}()
		consumers.Add(2)
		for range 2 {
			go func() {
				defer consumers.Done()
				for {
					item, shutdown := q.Get()
					if shutdown {
						return
					}
					q.Done(item)
				}
			}()
		}
		producers.Wait()
		fc.Step(time.Second) // everything due
		q.ShutDownWithDrain()
		consumers.Wait()
	}()
	waitFor(t, "the producers, the drain and the consumers to finish", done, fc)
	assert.Nil(t, q.TakeWaiting())
	assert.Equal(t, 0, q.Len())
}

func TestDelayingQueueAddAfterOfQueuedItemRunsAgainLater(t *testing.T) {
	q, step := newDelayingQueue[string](t)
	q.Add("a")
	q.AddAfter("a", time.Second) // a run after 1s, which the queued one does not give
	assert.Equal(t, []string{"a"}, getReady[string](t, q))
	step(time.Second)
	assert.Equal(t, []string{"a"}, getReady[string](t, q))
}

// TestDelayingQueueReArmsOnlyForAnEarlierItem: the queue's one timer is set
// for the earliest ready time, and asked for again only when that time moves
// earlier: a later item, or one at the same time, leaves the timer as it is.
// A timer left at the old time would still let Len and Get find due items
// themselves, but a worker parked in Get would sleep through the earlier
// item.
func TestDelayingQueueReArmsOnlyForAnEarlierItem(t *testing.T) {
	clk := &armRecordingClock{FakeClock: newQueueClock()}
	q := backoff.NewDelayingQueue[string](backoff.WithClock(clk))
	defer q.ShutDown()
	q.AddAfter("hour", time.Hour)
	q.AddAfter("two hours", 2*time.Hour)  // later: no re-arm
	q.AddAfter("minute", time.Minute)     // earlier: re-armed for it
	q.AddAfter("minute too", time.Minute) // same time: no re-arm
	q.AddAfter("hour", 30*time.Second)    // an item already waiting moves earlier
	assert.Equal(t, []time.Duration{time.Hour, time.Minute, 30 * time.Second}, clk.delays())
	assert.Equal(t, 1, clk.Waiters(), "one timer for the whole queue")

	got := getAsync[string](q)
	clk.Step(30 * time.Second)
	assert.Equal(t, getResult[string]{item: "hour"}, waitFor(t, "Get to hand out the item due at 30s", got, clk))
}

// TestDelayingQueueWaitingItemsAreDeduplicated: however often an item is
// added with a delay, it waits once, at the earliest of its ready times, and
// is handed out once.
func TestDelayingQueueWaitingItemsAreDeduplicated(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[int](backoff.WithClock(fc))
	defer q.ShutDown()
	for round := range 10 {
		for item := range 5 {
			q.AddAfter(item, time.Duration(10-round+item)*time.Second)
		}
	}
	want := make([]backoff.WaitingItem[int], 5)
	for item := range 5 {
		want[item] = backoff.WaitingItem[int]{Item: item, ReadyAt: epoch.Add(time.Duration(1+item) * time.Second)}
	}
	assert.Equal(t, want, q.TakeWaiting(), "one entry per item, at its earliest ready time")

	for range 3 {
		q.AddAfter(7, time.Second)
	}
	fc.Step(time.Second)
	assert.Equal(t, []int{7}, getReady[int](t, q))
	fc.Step(time.Hour)
	assert.Zero(t, q.Len(), "no second copy")
}

// armRecordingClock is a FakeClock that records every delay a timer of its
// is set for: by AfterFunc or NewTimer, and by Reset on the timers they
// return.
type armRecordingClock struct {
	*testingclock.FakeClock
	mu    sync.Mutex
	armed []time.Duration
}

func (c *armRecordingClock) record(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = append(c.armed, d)
}

func (c *armRecordingClock) delays() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.armed...)
}

func (c *armRecordingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.record(d)
	return &armRecordingTimer{Timer: c.FakeClock.AfterFunc(d, f), clock: c}
}

func (c *armRecordingClock) NewTimer(d time.Duration) clock.Timer {
	c.record(d)
	return &armRecordingTimer{Timer: c.FakeClock.NewTimer(d), clock: c}
}

type armRecordingTimer struct {
	clock.Timer
	clock *armRecordingClock
}

func (t *armRecordingTimer) Reset(d time.Duration) bool {
	t.clock.record(d)
	return t.Timer.Reset(d)
}

// TestDelayingQueueAddAfterZeroIsAdd: a delay ≤ 0 queues the item there and
// then, as Add does: it is ready without a step, and no timer is set for it.
func TestDelayingQueueAddAfterZeroIsAdd(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		fc := newQueueClock()
		q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
		q.AddAfter("a", d)
		assert.Zero(t, fc.Waiters(), "AddAfter(a, %v) set a timer", d)
		item, shutdown := get(t, q.Get, fc)
		assert.Equal(t, "a", item)
		assert.False(t, shutdown)
		q.ShutDown()
	}
}

// TestDelayingQueueRescheduleLastCallWins is kubernetes#133560: a requeue in
// a minute, then one in ten minutes, leaves only the second.
func TestDelayingQueueRescheduleLastCallWins(t *testing.T) {
	q, step := newDelayingQueue[string](t)
	q.AddAfter("a", time.Minute)
	q.Reschedule("a", 10*time.Minute)
	d, ok := q.WaitingFor("a")
	require.True(t, ok)
	assert.Equal(t, 10*time.Minute, d)
	step(time.Minute)
	assert.Equal(t, 0, q.Len(), "the first requeue is gone")
	d, _ = q.WaitingFor("a")
	assert.Equal(t, 9*time.Minute, d, "WaitingFor counts down on the clock")
	q.Reschedule("a", time.Second) // earlier works too
	step(time.Second)
	assert.Equal(t, []string{"a"}, getReady[string](t, q))
	_, ok = q.WaitingFor("a")
	assert.False(t, ok, "a is queued, not waiting")
}

func TestDelayingQueueRescheduleWithoutPendingIsAddAfter(t *testing.T) {
	q, step := newDelayingQueue[string](t)
	q.Reschedule("a", time.Second)
	d, ok := q.WaitingFor("a")
	assert.True(t, ok)
	assert.Equal(t, time.Second, d)
	q.Reschedule("b", 0)
	assert.Equal(t, 1, q.Len(), "d ≤ 0 queues at once")
	q.Reschedule("a", -time.Second)
	assert.Equal(t, 2, q.Len(), "a waiting item rescheduled to the past is queued now")
	_, ok = q.WaitingFor("a")
	assert.False(t, ok)
	step(time.Hour)
	assert.Equal(t, []string{"b", "a"}, getReady[string](t, q))
}

// TestDelayingQueueRescheduleKeepsAReadyItemReady: only the further run
// moves.
func TestDelayingQueueRescheduleKeepsAReadyItemReady(t *testing.T) {
	q, step := newDelayingQueue[string](t)
	q.Add("a")
	q.AddAfter("a", time.Second)
	q.Reschedule("a", time.Hour)
	assert.Equal(t, 1, q.Len(), "still queued")
	d, ok := q.WaitingFor("a")
	assert.True(t, ok)
	assert.Equal(t, time.Hour, d)
	item, _ := q.Get()
	q.Done(item)
	step(time.Second)
	assert.Equal(t, 0, q.Len(), "the one-second run moved to an hour")
	step(time.Hour)
	assert.Equal(t, 1, q.Len())
}

func TestDelayingQueueCancelWaiting(t *testing.T) {
	q, step := newDelayingQueue[string](t)
	assert.False(t, q.CancelWaiting("a"), "nothing waits")
	q.AddAfter("a", time.Second)
	q.AddAfter("b", 2*time.Second)
	assert.True(t, q.CancelWaiting("a"))
	assert.False(t, q.CancelWaiting("a"), "only once")
	at, ok := q.NextReadyAt()
	require.True(t, ok)
	assert.Equal(t, 2*time.Second, at.Sub(epoch), "the timer moved on to b")
	step(2 * time.Second)
	assert.False(t, q.CancelWaiting("b"), "b is due: queued, not waiting")
	assert.Equal(t, []string{"b"}, getReady[string](t, q))
}

// TestDelayingQueueCancelWaitingStopsTheTimer: cancelling the last waiting
// item leaves no clock waiter behind.
func TestDelayingQueueCancelWaitingStopsTheTimer(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	defer q.ShutDown()
	q.AddAfter("a", time.Minute)
	require.True(t, fc.HasWaiters())
	q.CancelWaiting("a")
	assert.False(t, fc.HasWaiters())
}

// TestDelayingQueueCancelWaitingAfterShutDown: the item cancelled is not
// handed back by TakeWaiting.
func TestDelayingQueueCancelWaitingAfterShutDown(t *testing.T) {
	q, _ := newDelayingQueue[string](t)
	q.AddAfter("a", time.Second)
	q.AddAfter("b", time.Second)
	q.ShutDown()
	_, ok := q.WaitingFor("a")
	assert.False(t, ok, "nothing becomes ready after ShutDown")
	assert.True(t, q.CancelWaiting("a"))
	taken := q.TakeWaiting()
	require.Len(t, taken, 1)
	assert.Equal(t, "b", taken[0].Item)
}

// TestRateLimitingQueueRescheduleKeepsPriority: a rescheduled item keeps
// the priority it waited with.
func TestRateLimitingQueueRescheduleKeepsPriority(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewRateLimitingQueue[string](backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second, backoff.WithClock(fc)), backoff.WithClock(fc))
	defer q.ShutDown()
	q.AddWithOptions(backoff.AddOptions{After: time.Minute, Priority: 5}, "a")
	q.Reschedule("a", time.Second)
	q.Add("b")
	fc.Step(time.Second)
	item, prio, _ := q.GetWithPriority()
	assert.Equal(t, "a", item)
	assert.Equal(t, 5, prio)
}

// TestRateLimitingQueueCancelWaitingForgetsThePriority: a cancelled
// delayed add takes its priority with it; the item's next delayed add waits
// with its own priority, not the cancelled one's.
func TestRateLimitingQueueCancelWaitingForgetsThePriority(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewRateLimitingQueue[string](backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second, backoff.WithClock(fc)), backoff.WithClock(fc))
	defer q.ShutDown()
	q.AddWithOptions(backoff.AddOptions{After: time.Minute, Priority: 5}, "a")
	require.True(t, q.CancelWaiting("a"))
	q.AddAfter("a", time.Second)
	fc.Step(time.Second)
	item, prio, _ := q.GetWithPriority()
	assert.Equal(t, "a", item)
	assert.Zero(t, prio, "the priority of the cancelled add is gone")
}

func TestDelayingQueueRescheduleAndCancelAllocateNothing(t *testing.T) {
	q, _ := newDelayingQueue[int](t)
	for i := range 1000 {
		q.AddAfter(i, time.Hour)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		q.Reschedule(i%1000, time.Duration(i%7+1)*time.Minute)
		_, _ = q.WaitingFor(i % 1000)
		if q.CancelWaiting((i + 1) % 1000) {
			q.AddAfter((i+1)%1000, time.Hour)
		}
		i++
	})
	assert.Zero(t, allocs)
}
