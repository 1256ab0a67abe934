package backoff_test

import (
	"context"
	"errors"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestQueueOrderAndDeduplication(t *testing.T) {
	tests := []struct {
		name string
		adds []string
		want []string
	}{
		{"fifo", []string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{"duplicates collapse, first add keeps its place", []string{"a", "b", "a", "c", "b"}, []string{"a", "b", "c"}},
		{"empty", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := backoff.NewQueue[string]()
			for _, a := range tt.adds {
				q.Add(a)
			}
			assert.Equal(t, len(tt.want), q.Len())
			assert.Equal(t, tt.want, getReady[string](t, q))
		})
	}
}

func TestQueueAddWhileProcessingRequeuesOnDone(t *testing.T) {
	q := backoff.NewQueue[string]()
	q.Add("a")
	item, _ := get(t, q.Get)
	require.Equal(t, "a", item)

	q.Add("a") // dirty while processing: not handed out to a second worker
	q.Add("a")
	assert.Equal(t, 0, q.Len(), "a must not be handed out while it is processed")

	q.Done("a")
	assert.Equal(t, 1, q.Len(), "Done queues a again, once")
	assert.Equal(t, []string{"a"}, getReady[string](t, q))
	assert.Equal(t, 0, q.Len())
}

func TestQueueDoneOfItemNotProcessingIsIgnored(t *testing.T) {
	q := backoff.NewQueue[string]()
	q.Done("never-added")
	q.Add("a")
	q.Done("a") // queued, not processing: client-go would push a second copy
	assert.Equal(t, 1, q.Len())
	item, _ := get(t, q.Get)
	q.Done(item)
	q.Done(item) // second Done
	assert.Equal(t, 0, q.Len())
}

// TestQueueStrayDoneEndsTheItemsCurrentRun pins what Done's doc promises:
// the queue tells items apart, not runs, so a second Done for an earlier run,
// made after Get handed the item out again, ends the later run, and the next
// Get hands the item out while that run's worker still holds it.
func TestQueueStrayDoneEndsTheItemsCurrentRun(t *testing.T) {
	q := backoff.NewQueue[string]()
	q.Add("a")
	first, _ := get(t, q.Get)
	q.Done(first) // the first run ends
	q.Add("a")
	second, _ := get(t, q.Get) // a second worker holds a
	require.Equal(t, "a", second)

	q.Add("a") // dirty while processing: waits for the second run's Done
	assert.Equal(t, 0, q.Len(), "a is not handed out while its run is processed")
	q.Done(first) // a stray second Done of the first run
	assert.Equal(t, 1, q.Len(), "the stray Done ended the second run: a is queued again")
	third, _ := get(t, q.Get) // handed out while the second worker still holds it
	assert.Equal(t, "a", third)
	q.Add("a")
	q.Done(second) // the second worker's own Done ends the third run
	assert.Equal(t, 1, q.Len(), "the second worker's Done ended the third run and queued a again")
	assert.Equal(t, []string{"a"}, getReady[string](t, q))
	q.Done(third) // a is no longer processing: nothing happens
	assert.Equal(t, 0, q.Len())
}

func TestQueueShutDownHandsOutQueuedItemsThenReports(t *testing.T) {
	q := backoff.NewQueue[int]()
	q.Add(1)
	q.Add(2)
	assert.False(t, q.ShuttingDown())
	q.ShutDown()
	assert.True(t, q.ShuttingDown())
	q.Add(3) // ignored

	for _, want := range []int{1, 2} {
		item, shutdown := get(t, q.Get)
		assert.False(t, shutdown)
		assert.Equal(t, want, item)
		q.Done(item)
	}
	item, shutdown := get(t, q.Get)
	assert.True(t, shutdown)
	assert.Zero(t, item)
	q.ShutDown() // again: nothing happens
}

func TestQueueShutDownWakesBlockedGetters(t *testing.T) {
	q := backoff.NewQueue[int]()
	got := []<-chan getResult[int]{getAsync[int](q), getAsync[int](q), getAsync[int](q)}
	q.ShutDown()
	for _, ch := range got {
		assert.True(t, waitFor(t, "a blocked Get to return shutdown after ShutDown", ch).shutdown)
	}
}

func TestQueueGetBlocksUntilAdd(t *testing.T) {
	q := backoff.NewQueue[int]()
	ch := getAsync[int](q)
	q.Add(7)
	r := waitFor(t, "a blocked Get to return the item added", ch)
	assert.Equal(t, getResult[int]{item: 7}, r)
}

func TestQueueItemDoneWhileProcessingAfterShutdownIsStillRequeued(t *testing.T) {
	q := backoff.NewQueue[string]()
	q.Add("a")
	item, _ := get(t, q.Get)
	q.Add("a") // dirty
	q.ShutDown()
	q.Done(item)
	item, shutdown := get(t, q.Get)
	assert.Equal(t, "a", item)
	assert.False(t, shutdown, "an item added before the shutdown is not lost")
	q.Done(item)
	_, shutdown = get(t, q.Get)
	assert.True(t, shutdown)
}

// TestQueueShutDownWithDrainWaitsForQueuedAndProcessing covers
// kubernetes#141079: client-go returns once nothing is processing, even with
// items still queued.
func TestQueueShutDownWithDrainWaitsForQueuedAndProcessing(t *testing.T) {
	q := backoff.NewQueue[string]()
	q.Add("a")
	q.Add("b")
	a, _ := get(t, q.Get) // processing; b queued

	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()

	q.Add("a") // ignored: shutting down (or not yet: then a is requeued; both are drained below)
	q.Done(a)
	// b is still queued (and perhaps a again): the drain must go on.
	for {
		item, shutdown := get(t, q.Get)
		if shutdown {
			break
		}
		select {
		case <-drained:
			t.Fatalf("ShutDownWithDrain returned while %q was processing", item)
		default:
		}
		q.Done(item)
	}
	waitFor(t, "ShutDownWithDrain to return once every item is Done", drained)
	assert.True(t, q.ShuttingDown())
}

// TestQueueShutDownWithDrainWaitsForQueuedItems is kubernetes#141079's case:
// the drain starts with items queued and none handed out, so nothing is being
// processed, and it must still wait for them to be handed out and Done.
// client-go's drain waits only while items are being processed, and returns
// at once here.
//
// To know that the drain has started before any item is handed out, a getter
// parks in Get first, on a queue whose two items wait for a delay on a clock
// whose timers never fire. The clock then passes their ready time, which
// moves nothing (no timer fires, nobody reads the clock), so the items are
// due but not queued. The drain queues them as it shuts the queue down, and
// the getter can take the first only once the drain has released the
// queue's lock: by parking (ours) or by returning (the broken drain).
func TestQueueShutDownWithDrainWaitsForQueuedItems(t *testing.T) {
	clk := &frozenTimersClock{FakePassiveClock: testingclock.NewFakePassiveClock(epoch)}
	q := backoff.NewDelayingQueue[int](backoff.WithClock(clk))
	q.AddAfter(1, time.Second)
	q.AddAfter(2, time.Second)
	clk.reads = make(chan struct{}, 64)
	getter := getAsync[int](q)
	// Get reads the clock, under the queue's lock, to find the items not due
	// yet, and parks without reading it again until a broadcast: once it
	// has read it, moving the clock can no longer reach it.
	waitFor(t, "the getter to look for due items", clk.reads)
	clk.SetTime(epoch.Add(time.Second))

	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	first := waitFor(t, "the parked getter to take the first item the drain queued", getter)
	require.Equal(t, getResult[int]{item: 1}, first)
	second, shutdown := get(t, q.Get)
	require.False(t, shutdown, "queued items are handed out after shutdown")
	require.Equal(t, 2, second)
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while items were still queued")
	default:
	}
	q.Done(1)
	q.Done(2)
	waitFor(t, "ShutDownWithDrain to return once both items were Done", drained)
	_, shutdown = get(t, q.Get)
	assert.True(t, shutdown)
}

// frozenTimersClock reads the time of a FakePassiveClock and never fires a
// timer: setting its time makes items due without anything noticing. If
// reads is set, every reading of the time is signalled on it.
type frozenTimersClock struct {
	*testingclock.FakePassiveClock
	reads chan struct{}
}

func (c *frozenTimersClock) read() {
	if c.reads != nil {
		select {
		case c.reads <- struct{}{}:
		default:
		}
	}
}

// Now and Since signal after reading: a test that has received the signal
// knows that the reading is done.
func (c *frozenTimersClock) Now() time.Time {
	now := c.FakePassiveClock.Now()
	c.read()
	return now
}

func (c *frozenTimersClock) Since(ts time.Time) time.Duration {
	d := c.FakePassiveClock.Since(ts)
	c.read()
	return d
}

func (*frozenTimersClock) After(time.Duration) <-chan time.Time        { return nil }
func (*frozenTimersClock) NewTimer(time.Duration) clock.Timer          { return frozenTimer{} }
func (*frozenTimersClock) AfterFunc(time.Duration, func()) clock.Timer { return frozenTimer{} }
func (*frozenTimersClock) Tick(time.Duration) <-chan time.Time         { return nil }
func (*frozenTimersClock) Sleep(time.Duration)                         { panic("frozenTimersClock: Sleep") }

type frozenTimer struct{}

func (frozenTimer) C() <-chan time.Time      { return nil }
func (frozenTimer) Stop() bool               { return true }
func (frozenTimer) Reset(time.Duration) bool { return true }

func TestQueueShutDownWithDrainOnEmptyQueueReturns(t *testing.T) {
	q := backoff.NewQueue[int]()
	q.ShutDownWithDrain()
	assert.True(t, q.ShuttingDown())
}

func TestQueueShutDownEndsDrainWait(t *testing.T) {
	q := backoff.NewQueue[int]()
	q.Add(1)
	held, _ := get(t, q.Get) // processing, never Done during the wait
	getter := getAsync[int](q)

	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	// The getter wakes only once the drainer has shut the queue down and
	// released the lock by parking: the drainer is now waiting.
	require.True(t, waitFor(t, "a blocked Get to see the drain's shutdown", getter).shutdown)
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while an item was processing")
	default:
	}
	q.ShutDown()
	waitFor(t, "ShutDownWithDrain to return after ShutDown", drained)
	q.Done(held)
}

func TestQueueGetContext(t *testing.T) {
	t.Run("returns items", func(t *testing.T) {
		q := backoff.NewQueue[int]()
		q.Add(1)
		item, err := q.GetContext(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 1, item)
	})
	t.Run("done context returns at once even with items queued", func(t *testing.T) {
		q := backoff.NewQueue[int]()
		q.Add(1)
		ctx, cancel := context.WithCancelCause(context.Background())
		cause := errors.New("stop")
		cancel(cause)
		item, err := q.GetContext(ctx)
		assert.ErrorIs(t, err, cause, "the context's cause")
		assert.Zero(t, item)
		assert.Equal(t, 1, q.Len(), "no item taken")
		assert.False(t, q.ShuttingDown())
	})
	t.Run("cancel releases a blocked call without shutting the queue down", func(t *testing.T) {
		// kubernetes#131185
		q := backoff.NewQueue[int]()
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 1)
		go func() {
			_, err := q.GetContext(ctx)
			errs <- err
		}()
		cancel()
		assert.ErrorIs(t, waitFor(t, "GetContext to return after its context was cancelled", errs), context.Canceled)
		assert.False(t, q.ShuttingDown())
		q.Add(2)
		item, shutdown := q.Get()
		assert.Equal(t, 2, item)
		assert.False(t, shutdown)
	})
	t.Run("shutdown", func(t *testing.T) {
		q := backoff.NewQueue[int]()
		q.Add(1)
		q.ShutDown()
		item, err := q.GetContext(context.Background())
		require.NoError(t, err, "queued items are still handed out")
		assert.Equal(t, 1, item)
		_, err = q.GetContext(context.Background())
		assert.ErrorIs(t, err, backoff.ErrQueueShutDown)
	})
	t.Run("blocked call sees shutdown", func(t *testing.T) {
		q := backoff.NewQueue[int]()
		errs := make(chan error, 1)
		go func() {
			_, err := q.GetContext(context.Background())
			errs <- err
		}()
		q.ShutDown()
		assert.ErrorIs(t, waitFor(t, "a blocked GetContext to return ErrQueueShutDown after ShutDown", errs), backoff.ErrQueueShutDown)
	})
}

// TestQueueCancelledGetterPassesWakeupOn: a getter whose context ends while
// an item arrives must not swallow the wake-up meant for another getter.
func TestQueueCancelledGetterPassesWakeupOn(t *testing.T) {
	for range 50 {
		q := backoff.NewQueue[int]()
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 1)
		go func() {
			_, err := q.GetContext(ctx)
			errs <- err
		}()
		plain := getAsync[int](q)
		go cancel()
		q.Add(1)
		// Whichever way the race goes, the item reaches a getter: the plain
		// one, or the cancellable one if it took it before its cancel.
		select {
		case r := <-plain:
			assert.Equal(t, 1, r.item)
			waitFor(t, "the cancelled GetContext to return", errs)
		case err := <-errs:
			if err == nil {
				q.ShutDown() // the cancellable getter took the item
			}
			r := waitFor(t, "the plain Get to return", plain)
			if err != nil {
				assert.Equal(t, 1, r.item, "the wake-up was passed on")
			}
		}
		q.ShutDown()
	}
}

func TestQueueConstructorsAndOptionsPanicOnBadInput(t *testing.T) {
	assert.PanicsWithValue(t, "backoff: NewRateLimitingQueue: limiter must not be nil, got <nil>", func() {
		backoff.NewRateLimitingQueue[int](nil)
	})
	assert.PanicsWithValue(t, "backoff: WithLogger: l must not be nil, got <nil>", func() { backoff.WithLogger(nil) })
	assert.PanicsWithValue(t, "backoff: WithMetrics: m must not be nil, got <nil>", func() { backoff.WithMetrics(nil) })
}

// Done queues the items that became due before it ahead of the item it
// queues again: a due item has been ready longer than an item re-added while
// it was processing. On a real clock the timer's callback can run late, after
// Done; frozenTimersClock never runs it, so the only promotion before the
// next Get is Done's own. A Done that skipped it would queue the re-added
// item first, and Get would promote the due one behind it.
func TestQueueDoneQueuesDueItemsFirst(t *testing.T) {
	clk := &frozenTimersClock{FakePassiveClock: testingclock.NewFakePassiveClock(epoch)}
	q := backoff.NewDelayingQueue[string](backoff.WithClock(clk))
	defer q.ShutDown()

	q.Add("re-added")
	item, _ := get(t, q.Get)
	require.Equal(t, "re-added", item)
	q.Add("re-added") // while it is processing: Done queues it
	q.AddAfter("due", time.Second)
	clk.SetTime(epoch.Add(time.Second)) // due; no timer fires

	q.Done("re-added")
	first, _ := get(t, q.Get)
	second, _ := get(t, q.Get)
	require.Equal(t, []string{"due", "re-added"}, []string{first, second},
		"the item due before Done is handed out first")
}

// BenchmarkQueueAddGetDone is one item's trip through a queue: 0 allocs/op.
func BenchmarkQueueAddGetDone(b *testing.B) {
	q := backoff.NewQueue[int]()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		q.Add(i & 1023)
		item, _ := q.Get()
		q.Done(item)
	}
}

// BenchmarkQueueAddGetDoneParallel is the same trip from GOMAXPROCS
// goroutines sharing the queue, each with its own items: 0 allocs/op.
func BenchmarkQueueAddGetDoneParallel(b *testing.B) {
	q := backoff.NewQueue[int]()
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		base := int(next.Add(1)) << 20
		for i := 0; pb.Next(); i++ {
			q.Add(base + i&1023)
			item, _ := q.Get()
			q.Done(item)
		}
	})
}

// BenchmarkDelayingQueueAddAfter adds distinct items an hour ahead on the
// real clock: a heap push each, with no timer change. Every 100 000 items the
// heap is emptied (outside the timer), so memory stays bounded; its regrowth
// is the only allocation, 0 allocs/op amortised.
func BenchmarkDelayingQueueAddAfter(b *testing.B) {
	q := backoff.NewDelayingQueue[int]()
	defer q.ShutDown()
	const block = 100_000
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if i%block == block-1 {
			b.StopTimer()
			q.TakeWaiting()
			b.StartTimer()
		}
		q.AddAfter(i, time.Hour)
	}
}

// waitingQueue returns a delaying queue on the real clock in which the
// items 0 to n-1 wait an hour, shut down when b ends.
func waitingQueue(b *testing.B, n int) *backoff.DelayingQueue[int] {
	q := backoff.NewDelayingQueue[int]()
	b.Cleanup(q.ShutDown)
	for i := 0; i < n; i++ {
		q.AddAfter(i, time.Hour)
	}
	return q
}

// movedItems is the number of waiting items of the benchmarks that move
// them.
const movedItems = 10_000

// BenchmarkDelayingQueueAddAfterUpdate moves waiting items earlier and
// later at random in a heap of 10 000: the decrease-key path.
func BenchmarkDelayingQueueAddAfterUpdate(b *testing.B) {
	q := waitingQueue(b, movedItems)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.AddAfter(i*7919%movedItems, time.Hour-time.Duration(i))
	}
}

// BenchmarkDelayingQueueReschedule moves waiting items to a random new
// ready time, later or earlier, in a heap of 10 000: beside
// BenchmarkDelayingQueueAddAfterUpdate, which can only move them earlier.
func BenchmarkDelayingQueueReschedule(b *testing.B) {
	q := waitingQueue(b, movedItems)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.Reschedule(i*7919%movedItems, time.Hour+time.Duration(i*104729%movedItems)*time.Millisecond)
	}
}

// BenchmarkDelayingQueueCancelWaiting cancels a waiting item and makes it
// wait again (AddAfter), in a heap of 10 000: a cancel costs the difference
// from BenchmarkDelayingQueueAddAfterUpdate.
func BenchmarkDelayingQueueCancelWaiting(b *testing.B) {
	q := waitingQueue(b, movedItems)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := i * 7919 % movedItems
		q.CancelWaiting(x)
		q.AddAfter(x, time.Hour+time.Duration(i%movedItems))
	}
}

// BenchmarkDelayingQueueBytesPerWaitingItem measures the heap memory of a
// million int items waiting in a queue, in B/item. client-go's delaying
// queue holds about 95 B per item.
func BenchmarkDelayingQueueBytesPerWaitingItem(b *testing.B) {
	const n = 1_000_000
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		q := backoff.NewDelayingQueue[int](backoff.WithClock(newQueueClock()))
		for item := 0; item < n; item++ {
			q.AddAfter(item, time.Hour)
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/n, "B/item")
		runtime.KeepAlive(q)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkDelayingQueueLateness measures, on the real clock, how late items
// added with a 10 ms delay reach a worker blocked in Get, against a bare
// time.AfterFunc for the same deadlines. One item is added every 50 µs, so
// about 200 wait at once. It reports the 50th and 99th percentile and the
// maximum lateness in µs. It is the one benchmark that uses the real clock.
func BenchmarkDelayingQueueLateness(b *testing.B) {
	const delay = 10 * time.Millisecond
	b.Run("queue", func(b *testing.B) {
		q := backoff.NewDelayingQueue[int]()
		deadlines := make([]time.Time, b.N)
		late := make([]time.Duration, b.N)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < b.N; n++ {
				item, _ := q.Get()
				late[item] = time.Since(deadlines[item])
				q.Done(item)
			}
		}()
		for i := 0; i < b.N; i++ {
			deadlines[i] = time.Now().Add(delay)
			q.AddAfter(i, delay)
			time.Sleep(50 * time.Microsecond)
		}
		wg.Wait()
		q.ShutDown()
		reportLateness(b, late)
	})
	b.Run("time.AfterFunc", func(b *testing.B) {
		deadlines := make([]time.Time, b.N)
		late := make([]time.Duration, b.N)
		var wg sync.WaitGroup
		wg.Add(b.N)
		for i := 0; i < b.N; i++ {
			deadlines[i] = time.Now().Add(delay)
			time.AfterFunc(delay, func() {
				late[i] = time.Since(deadlines[i])
				wg.Done()
			})
			time.Sleep(50 * time.Microsecond)
		}
		wg.Wait()
		reportLateness(b, late)
	})
	b.Run("time.AfterFunc+chan", func(b *testing.B) {
		// The bare timer plus the hand-off to a worker goroutine that any
		// queue needs: the floor for a delaying queue.
		deadlines := make([]time.Time, b.N)
		late := make([]time.Duration, b.N)
		ch := make(chan int, b.N)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < b.N; n++ {
				i := <-ch
				late[i] = time.Since(deadlines[i])
			}
		}()
		for i := 0; i < b.N; i++ {
			deadlines[i] = time.Now().Add(delay)
			time.AfterFunc(delay, func() { ch <- i })
			time.Sleep(50 * time.Microsecond)
		}
		wg.Wait()
		reportLateness(b, late)
	})
}

func reportLateness(b *testing.B, late []time.Duration) {
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(late[len(late)/2]), "p50-µs")
	b.ReportMetric(us(late[len(late)*99/100]), "p99-µs")
	b.ReportMetric(us(late[len(late)-1]), "max-µs")
	b.ReportMetric(0, "ns/op") // the wall time per item is the 50 µs pacing
}
