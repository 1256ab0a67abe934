package backoff_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

// flag is a ready function's condition that a test sets.
type flag struct{ v atomic.Bool }

func (f *flag) ready() bool { return f.v.Load() }

func TestParkHoldsUntilWakeFindsReady(t *testing.T) {
	q, _ := newDelayingQueue[string](t)
	var f flag
	q.Park("a", f.ready, time.Minute)
	q.Add("b")
	assert.Equal(t, 1, q.Len(), "a is held")
	assert.True(t, q.Parked("a"))
	q.Wake()
	assert.True(t, q.Parked("a"), "not ready yet")
	f.v.Store(true)
	q.Wake()
	assert.False(t, q.Parked("a"))
	assert.Equal(t, []string{"b", "a"}, getReady[string](t, q))
}

// TestParkChecksOnceAtTheCall: a Wake that ran before Park (the cache
// caught up first) is not missed.
func TestParkChecksOnceAtTheCall(t *testing.T) {
	q, _ := newDelayingQueue[string](t)
	var f flag
	f.v.Store(true)
	q.Park("a", f.ready, time.Minute)
	assert.False(t, q.Parked("a"))
	assert.Equal(t, 1, q.Len())
}

func TestParkMaxWaitReleases(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	defer q.ShutDown()
	var f flag
	q.Park("a", f.ready, time.Second)
	at, ok := q.NextReadyAt()
	require.True(t, ok, "a parked item counts in NextReadyAt")
	assert.Equal(t, time.Second, at.Sub(epoch))
	fc.Step(time.Second - 1)
	assert.Equal(t, 0, q.Len())
	fc.Step(1)
	assert.Equal(t, 1, q.Len(), "released when maxWait has passed, without a Wake")
	assert.False(t, fc.HasWaiters(), "the timer stops once nothing is parked")
}

func TestParkWithoutMaxWaitIsAdd(t *testing.T) {
	q, _ := newDelayingQueue[string](t)
	var f flag
	q.Park("a", f.ready, 0)
	assert.Equal(t, 1, q.Len())
	q.Park("b", f.ready, time.Minute)
	q.Park("b", f.ready, -1) // the last call wins: released
	assert.Equal(t, []string{"a", "b"}, getReady[string](t, q))
}

// TestParkAddKeepsItParked: the informer's event for the controller's own
// write arrives before its cache is read as caught up; the item runs once,
// after.
func TestParkAddKeepsItParked(t *testing.T) {
	q, _ := newDelayingQueue[string](t)
	var f flag
	q.Park("a", f.ready, time.Minute)
	q.Add("a")
	q.AddAfter("a", 0)
	assert.Equal(t, 0, q.Len())
	f.v.Store(true)
	q.Wake()
	assert.Equal(t, []string{"a"}, getReady[string](t, q), "one run")
}

// TestParkWhileProcessing is the controller's pattern: Park from the
// reconcile, then Done, which does not queue the item again.
func TestParkWhileProcessing(t *testing.T) {
	q, _ := newDelayingQueue[string](t)
	var f flag
	q.Add("a")
	item, _ := q.Get()
	q.Park(item, f.ready, time.Minute)
	q.Done(item)
	assert.Equal(t, 0, q.Len(), "held after Done")
	f.v.Store(true)
	q.Wake()
	assert.Equal(t, 1, q.Len())

	// Released while still processing: queued at Done.
	item, _ = q.Get()
	f.v.Store(false)
	q.Park(item, f.ready, time.Minute)
	f.v.Store(true)
	q.Wake()
	assert.Equal(t, 0, q.Len(), "being processed")
	q.Done(item)
	assert.Equal(t, 1, q.Len())
}

func TestParkTakesAQueuedItemOut(t *testing.T) {
	q, _ := newDelayingQueue[string](t)
	var f flag
	q.Add("a")
	q.Add("b")
	q.Park("a", f.ready, time.Minute)
	assert.Equal(t, 1, q.Len())
	f.v.Store(true)
	q.Wake()
	assert.Equal(t, []string{"b", "a"}, getReady[string](t, q), "a rejoins at the end")
}

func TestParkDelayedAddJoinsTheHeldRun(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewRateLimitingQueue[string](backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second, backoff.WithClock(fc)), backoff.WithClock(fc))
	defer q.ShutDown()
	var f flag
	q.Park("a", f.ready, time.Minute)
	q.AddWithOptions(backoff.AddOptions{After: time.Second, Priority: 3}, "a")
	fc.Step(time.Second)
	assert.Equal(t, 0, q.Len(), "due, but held")
	f.v.Store(true)
	q.Wake()
	item, prio, _ := q.GetWithPriority()
	assert.Equal(t, "a", item)
	assert.Equal(t, 3, prio, "at the highest priority asked for")
	q.Done(item)
	assert.Equal(t, 0, q.Len(), "one run")
}

func TestParkAgainReplacesReadyAndMaxWait(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	defer q.ShutDown()
	var never, now flag
	now.v.Store(false)
	q.Park("a", never.ready, time.Second)
	q.Park("a", now.ready, time.Hour)
	fc.Step(time.Second)
	assert.Equal(t, 0, q.Len(), "the first maxWait is gone")
	now.v.Store(true)
	q.Wake()
	assert.Equal(t, 1, q.Len(), "the second ready function counts")
}

// TestParkAgainDuringACheckWins: a Park of the item that comes while an
// earlier park's ready function is being checked (here, from inside it: the
// controller wrote the object again) replaces that park; the earlier
// check's true must not release the new one, neither at Wake nor at the
// check Park makes itself.
func TestParkAgainDuringACheckWins(t *testing.T) {
	never := func() bool { return false }
	t.Run("Wake", func(t *testing.T) {
		q, _ := newDelayingQueue[string](t)
		var f flag
		q.Park("a", func() bool {
			if !f.ready() {
				return false
			}
			q.Park("a", never, time.Minute) // the second write
			return true                     // the cache has seen the first
		}, time.Minute)
		f.v.Store(true)
		q.Wake()
		assert.True(t, q.Parked("a"), "the second park holds")
		assert.Zero(t, q.Len())
	})
	t.Run("Park", func(t *testing.T) {
		q, _ := newDelayingQueue[string](t)
		again := true
		q.Park("a", func() bool {
			if again {
				again = false
				q.Park("a", never, time.Minute)
			}
			return true
		}, time.Minute)
		assert.True(t, q.Parked("a"), "the second park holds")
		assert.Zero(t, q.Len())
	})
}

// TestWakeReleasesInParkOrder: whatever the order of the map of parked
// items, a Wake queues them as they were parked.
func TestWakeReleasesInParkOrder(t *testing.T) {
	q, _ := newDelayingQueue[int](t)
	var f flag
	var want []int
	for i := range 50 {
		x := (i * 37) % 50
		q.Park(x, f.ready, time.Minute)
		want = append(want, x)
	}
	f.v.Store(true)
	q.Wake()
	assert.Equal(t, want, getReady[int](t, q))
}

// TestTakeWaitingGivesAParkedItemItsPriority: a parked item taken by
// TakeWaiting carries the priority of the run it holds, whether that run
// was queued before the park or asked for while it was parked.
func TestTakeWaitingGivesAParkedItemItsPriority(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewRateLimitingQueue[string](backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second, backoff.WithClock(fc)), backoff.WithClock(fc))
	var f flag
	q.AddWithOptions(backoff.AddOptions{Priority: 3}, "queued")
	q.Park("queued", f.ready, time.Minute)
	q.Park("asked", f.ready, 2*time.Minute)
	q.AddWithOptions(backoff.AddOptions{Priority: 7}, "asked") // joins the held run
	q.ShutDown()
	assert.Equal(t, []backoff.WaitingItem[string]{
		{Item: "queued", ReadyAt: epoch.Add(time.Minute), Priority: 3, Parked: true},
		{Item: "asked", ReadyAt: epoch.Add(2 * time.Minute), Priority: 7, Parked: true},
	}, q.TakeWaiting())
}

func TestParkAtShutDownIsWaiting(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	var f flag
	q.Add("p")
	item, _ := q.Get()
	q.Park(item, f.ready, time.Minute) // processing and parked
	q.Park("b", f.ready, 2*time.Minute)
	q.AddAfter("c", 90*time.Second)
	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain() // waits for p's processing, not for the parked runs
		close(drained)
	}()
	q.Done(item)
	<-drained
	f.v.Store(true)
	q.Wake()
	_, shutdown := q.Get()
	assert.True(t, shutdown, "parked items are not handed out after ShutDown")
	got := q.TakeWaiting()
	require.Len(t, got, 3)
	assert.Equal(t, backoff.WaitingItem[string]{Item: "p", ReadyAt: epoch.Add(time.Minute), Parked: true}, got[0])
	assert.Equal(t, backoff.WaitingItem[string]{Item: "c", ReadyAt: epoch.Add(90 * time.Second)}, got[1])
	assert.Equal(t, backoff.WaitingItem[string]{Item: "b", ReadyAt: epoch.Add(2 * time.Minute), Parked: true}, got[2])
	q.Park("d", f.ready, time.Minute)
	assert.False(t, q.Parked("d"), "Park does nothing after ShutDown")
}

// TestParkCostsNoGoroutine: a thousand parked items hold one clock waiter
// and start no goroutine.
func TestParkCostsNoGoroutine(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[int](backoff.WithClock(fc))
	defer q.ShutDown()
	var f flag
	before := runtime.NumGoroutine()
	for i := range 1000 {
		q.Park(i, f.ready, time.Duration(i+1)*time.Millisecond)
	}
	// No more goroutines than before (one of an earlier test may have
	// ended meanwhile).
	assert.LessOrEqual(t, runtime.NumGoroutine(), before)
	assert.Equal(t, 1, fc.Waiters(), "one timer for every maxWait")
}

func TestParkPanicsOnNilReady(t *testing.T) {
	q, _ := newDelayingQueue[string](t)
	assert.PanicsWithValue(t, "backoff: Park: ready must not be nil, got <nil>", func() { q.Park("a", nil, time.Second) })
}

// TestParkConcurrent parks, wakes, adds and processes from many goroutines:
// every item ends processed, none twice at once, and nothing stays parked.
func TestParkConcurrent(t *testing.T) {
	q := backoff.NewDelayingQueue[int]()
	const items, rounds = 20, 200
	var gate atomic.Int64
	var busy [items]atomic.Int32
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				x, shut := q.Get()
				if shut {
					return
				}
				if busy[x].Add(1) != 1 {
					t.Errorf("item %d handed to two workers", x)
				}
				if gate.Load()%3 == 0 {
					target := gate.Load() + 1
					q.Park(x, func() bool { return gate.Load() >= target }, time.Hour)
				}
				busy[x].Add(-1)
				q.Done(x)
			}
		}()
	}
	for r := 0; r < rounds; r++ {
		q.Add(r % items)
		gate.Add(1)
		q.Wake()
	}
	gate.Store(1 << 40)
	q.Wake()
	for i := 0; i < items; i++ {
		assert.False(t, q.Parked(i), "item %d", i)
	}
	q.ShutDownWithDrain()
	wg.Wait()
}

// TestParkControllerSeesNoStaleCache is the controller of KEP-5647 on a
// simulated informer whose cache sees each write 500 ms late. Each of 20
// objects needs three writes (one per reconcile that finds work). With
// Park, no reconcile reads a cache older than the controller's own last
// write; the baseline, which requeues every 100 ms until its cache has
// caught up (as the KEP's adopters do), runs stale reconciles that do
// nothing.
func TestParkControllerSeesNoStaleCache(t *testing.T) {
	ours := runCacheLagController(t, true)
	base := runCacheLagController(t, false)
	t.Logf("Park:     %d reconciles, %d on a stale cache, done at %v", ours.reconciles, ours.stale, ours.done)
	t.Logf("baseline: %d reconciles, %d on a stale cache, done at %v", base.reconciles, base.stale, base.done)
	assert.Zero(t, ours.stale)
	assert.Equal(t, 20*4, ours.reconciles, "three writes and the reconcile that finds nothing left, per object")
	assert.Greater(t, base.stale, 20*3*3, "at least three wasted reconciles per write")
	assert.LessOrEqual(t, ours.done, base.done, "no slower")
}

type cacheLagResult struct {
	reconciles, stale int
	done              time.Duration
}

// runCacheLagController runs the simulation of
// TestParkControllerSeesNoStaleCache on a fake clock, in one goroutine.
func runCacheLagController(t *testing.T, park bool) cacheLagResult {
	const (
		objects = 20
		writes  = 3
		lag     = 500 * time.Millisecond
		recheck = 100 * time.Millisecond
	)
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[int](backoff.WithClock(fc))
	defer q.ShutDown()
	server := make([]int, objects)    // each object's version on the server
	cache := make([]int, objects)     // and in the informer's cache
	lastWrite := make([]int, objects) // the version of the controller's last write
	type event struct {
		at           time.Duration
		obj, version int
	}
	var events []event // deliveries to the cache, in time order
	var mu sync.Mutex  // the ready functions may run on Park's and Wake's callers
	var res cacheLagResult
	for i := range objects {
		q.Add(i)
	}
	now := func() time.Duration { return fc.Since(epoch) }
	for {
		for q.Len() > 0 {
			x, _ := q.Get()
			res.reconciles++
			mu.Lock()
			stale := cache[x] < lastWrite[x]
			cached := cache[x]
			mu.Unlock()
			switch {
			case stale:
				res.stale++
				if !park {
					q.AddAfter(x, recheck) // the baseline: look again later
				}
			case cached < writes:
				server[x]++
				mu.Lock()
				lastWrite[x] = server[x]
				mu.Unlock()
				events = append(events, event{now() + lag, x, server[x]})
				if park {
					want := server[x]
					q.Park(x, func() bool { mu.Lock(); defer mu.Unlock(); return cache[x] >= want }, 5*time.Second)
				} else {
					q.AddAfter(x, recheck)
				}
			default:
				res.done = max(res.done, now())
			}
			q.Done(x)
		}
		// Move the clock to the next delivery or ready time.
		next, ok := time.Duration(0), false
		if len(events) > 0 {
			next, ok = events[0].at, true
		}
		if at, waits := q.NextReadyAt(); waits && (!ok || at.Sub(epoch) < next) {
			next, ok = at.Sub(epoch), true
		}
		if !ok {
			return res
		}
		require.Less(t, next, time.Hour, "the simulation must end")
		fc.SetTime(epoch.Add(next))
		for len(events) > 0 && events[0].at <= now() {
			e := events[0]
			events = events[1:]
			mu.Lock()
			cache[e.obj] = e.version
			mu.Unlock()
			q.Add(e.obj) // the informer's event handler
			q.Wake()
		}
	}
}

// ExampleDelayingQueue_Park holds an item until a condition holds: here
// the version a cache has seen, which a controller compares with its own
// last write.
func ExampleDelayingQueue_Park() {
	q := backoff.NewDelayingQueue[string]()
	defer q.ShutDown()
	var cacheVersion atomic.Int64
	written := int64(7) // the version of the controller's write
	q.Park("default/web", func() bool { return cacheVersion.Load() >= written }, 5*time.Second)
	fmt.Println("before the cache catches up:", q.Len())
	cacheVersion.Store(7) // the informer's event handler...
	q.Wake()              // ...wakes the queue
	fmt.Println("after:", q.Len())
	// Output:
	// before the cache catches up: 0
	// after: 1
}
