package backoff

import (
	"github.com/retrykit/backoff/internal/fifo"
	"github.com/retrykit/backoff/internal/itemstate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestQueueGivesMemoryBack checks that a queue's memory follows a burst
// down. Each Get comes after a Len that says an item is ready, and the
// drain makes as many Gets as there were Adds, so that a queue that loses an
// Add, or a Get that takes nothing, fails here at once instead of blocking or
// looping.
func TestQueueGivesMemoryBack(t *testing.T) {
	const burst = 20_000 // many times itemstate.KeepSize and fifo.MaxChunk
	q := NewQueue[int]()
	for i := 0; i < burst; i++ {
		q.Add(i)
	}
	assert.Equal(t, burst, q.states.Len())
	assert.GreaterOrEqual(t, q.states.Slots(), burst)
	require.Equal(t, burst, q.Len())
	for range burst {
		item, shutdown := q.Get()
		if shutdown {
			t.Fatal("Get of a running queue with items queued returned shutdown")
		}
		q.Done(item)
	}
	assert.Zero(t, q.Len())
	assert.Zero(t, q.states.Len())
	assert.LessOrEqual(t, q.ready.Cap(), 2*fifo.MaxChunk, "the FIFO is down to one chunk and at most one spare")

	q.Add(1)
	require.Equal(t, 1, q.Len(), "Add(1) queues 1")
	item, _ := q.Get()
	q.Done(item)
	assert.LessOrEqual(t, q.states.Slots(), itemstate.KeepSize, "the table of the burst was dropped")
	assert.Zero(t, testing.AllocsPerRun(10, func() {
		q.Add(2)
		if q.Len() != 1 {
			t.Fatalf("Add(2) left %d items queued, want 1", q.Len())
		}
		item, _ := q.Get()
		q.Done(item)
	}), "a small queue keeps its table: no allocation per cycle")
}

// getReadyItem takes the item that Len says is ready. Get runs on a
// goroutine with a real-time deadline (the external tests' waitFor, which
// this package cannot import), so that a Get that blocks although Len said
// an item is ready fails the test in seconds instead of hanging it.
func getReadyItem[T comparable](t *testing.T, q interface {
	Get() (T, bool)
	ShutDown()
}) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() {
		it, _ := q.Get()
		ch <- it
	}()
	select {
	case it := <-ch:
		return it
	case <-time.After(5 * time.Second):
		q.ShutDown() // releases the Get
		t.Fatal("Get blocked for 5 s (real time) although Len said an item was ready")
		panic("unreachable")
	}
}

func TestQueueTimerInvariant(t *testing.T) {
	t.Parallel()
	fc := testingclock.NewFakeClock(time.Unix(0, 0))
	q := NewDelayingQueue[int](WithClock(fc))
	rng := rand.New(rand.NewPCG(9, 9))
	for op := 0; op < 3000; op++ {
		item := rng.IntN(20)
		switch rng.IntN(6) {
		case 0, 1:
			q.AddAfter(item, time.Duration(rng.IntN(100)-10)*time.Millisecond)
		case 2:
			q.Add(item)
		case 3:
			fc.Step(time.Duration(rng.IntN(30)) * time.Millisecond)
		case 4:
			if q.Len() > 0 {
				it := getReadyItem[int](t, q)
				q.Done(it)
			}
		case 5:
			q.NextReadyAt()
		}
		s := snapshotDelays(q, true)
		require.NoError(t, s.checkErr)
		require.Equal(t, s.waiting > 0, s.armed, "op %d: armed iff items wait", op)
		if s.armed {
			require.Equal(t, s.minAt, s.armedAt, "op %d: armed for the earliest", op)
		}
		require.LessOrEqual(t, fc.Waiters(), 1)
	}
	q.ShutDown()
	assert.Equal(t, 0, fc.Waiters())
}

// FuzzAddAfter adds up to four items with arbitrary delays (negative, zero,
// huge), steps the clock once, and checks that nothing panics, that the
// heap property holds throughout, and that exactly the items whose ready time
// the clock has reached are queued: ready times saturate instead of
// overflowing.
func FuzzAddAfter(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), int64(0), uint8(0), int64(0))
	f.Add(int64(-1), int64(1), int64(math.MaxInt64), int64(math.MinInt64), uint8(0b11100100), int64(math.MaxInt64))
	f.Add(int64(5e6), int64(10e6), int64(1e6), int64(7e6), uint8(0b00010001), int64(7e6))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64-1), int64(1), int64(0), uint8(0b01000100), int64(math.MaxInt64-1))
	f.Fuzz(func(t *testing.T, d0, d1, d2, d3 int64, which uint8, step int64) {
		fc := testingclock.NewFakeClock(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
		q := NewDelayingQueue[int](WithClock(fc))
		defer q.ShutDown()

		nonPositive := map[int]bool{}
		minPositive := map[int]int64{}
		for k, d := range []int64{d0, d1, d2, d3} {
			item := int(which>>(2*k)) & 3
			q.AddAfter(item, time.Duration(d))
			if d <= 0 {
				nonPositive[item] = true
			} else if m, ok := minPositive[item]; !ok || d < m {
				minPositive[item] = d
			}
			s := snapshotDelays(q, false)
			require.NoError(t, s.checkErr)
			if s.waiting > 0 { // the earliest, by the heap property
				require.Positive(t, s.minAt, "ready time of a positive delay")
			}
		}
		step = max(step, 0)
		fc.Step(time.Duration(step))
		want := 0
		for item := 0; item < 4; item++ {
			m, waits := minPositive[item]
			if nonPositive[item] || (waits && m <= step) {
				want++
			}
		}
		require.Equal(t, want, q.Len(), "queued after a step of %d", step)
		s := snapshotDelays(q, false)
		require.NoError(t, s.checkErr)
		if s.waiting > 0 { // the earliest, by the heap property
			require.Greater(t, s.minAt, step, "a due item still waits")
		}
	})
}

// delaysSnapshot is the delaying part of a queue as read under its lock.
type delaysSnapshot struct {
	checkErr       error
	waiting        int
	minAt, armedAt int64
	armed          bool
}

// snapshotDelays reads q's delaying state under q.mu and returns it, so that
// the caller asserts after releasing the lock: a failing require runs the
// test's deferred ShutDown, which would wait for the lock for ever. With
// promote, it first promotes the due items if no timer is armed: only a fired
// timer whose goroutine has not run yet may leave items waiting without an
// armed timer, and Len would promote them the same way.
func snapshotDelays[T comparable](q *DelayingQueue[T], promote bool) delaysSnapshot {
	q.mu.Lock()
	defer q.mu.Unlock()
	d := &q.delays
	if promote && !d.armed {
		q.promoteDueLocked()
	}
	s := delaysSnapshot{checkErr: d.waiting.Check(), waiting: d.waiting.Len(), armed: d.armed, armedAt: d.armedAt}
	if s.waiting > 0 {
		s.minAt = d.waiting.MinAt()
	}
	return s
}

// TestPriorityBookkeepingIsGivenBack checks that the priorities' maps and
// stale entries are gone once a queue has handed out everything: random
// adds with priorities, raises and re-adds while processing, then a drain.
func TestPriorityBookkeepingIsGivenBack(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 50; seed++ {
		fc := testingclock.NewFakeClock(time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC))
		q := NewDelayingQueue[int](WithClock(fc))
		rng := rand.New(rand.NewPCG(seed, 3))
		processing := map[int]bool{}
		for range 300 {
			x := rng.IntN(8)
			switch rng.IntN(5) {
			case 0, 1:
				q.AddWithOptions(AddOptions{Priority: []int{-100, 0, 0, 5}[rng.IntN(4)],
					After: time.Duration(rng.IntN(3)) * time.Millisecond}, x)
			case 2:
				if q.Len() > 0 {
					item, _ := q.Get()
					processing[item] = true
				}
			case 3:
				for item := range processing {
					q.Done(item)
					delete(processing, item)
					break
				}
			case 4:
				fc.Step(time.Millisecond)
			}
		}
		for item := range processing {
			q.Done(item)
		}
		fc.Step(time.Second)
		for q.Len() > 0 {
			item, _ := q.Get()
			q.Done(item)
		}
		q.mu.Lock()
		refs := 0
		for _, id := range q.prios.ids {
			refs += id.refs
		}
		if q.prios.pendingN != 0 || refs != 0 || len(q.prios.overflow) != 0 || len(q.prios.raised) != 0 ||
			q.prios.stale != 0 || len(q.prios.waiting) != 0 || q.ready.Len() != 0 || q.states.Len() != 0 {
			t.Fatalf("seed %d: pending %d, id refs %d, overflow %v, raised %v, stale %d, waiting %v, entries %d, states %d after the drain",
				seed, q.prios.pendingN, refs, q.prios.overflow, q.prios.raised, q.prios.stale, q.prios.waiting, q.ready.Len(), q.states.Len())
		}
		q.mu.Unlock()
		q.ShutDown()
	}
}

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
