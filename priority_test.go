package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

// getAll hands out every queued item, calling Done on each, and returns them
// as "item@priority".
func getAll[T comparable](t *testing.T, q interface {
	Len() int
	GetWithPriority() (T, int, bool)
	Done(T)
}) []string {
	t.Helper()
	var got []string
	for q.Len() > 0 {
		item, prio, shut := q.GetWithPriority()
		require.False(t, shut)
		got = append(got, fmt.Sprintf("%v@%d", item, prio))
		q.Done(item)
	}
	return got
}

func at(prio int) backoff.AddOptions { return backoff.AddOptions{Priority: prio} }

func TestPriorityHighestFirstFIFOWithin(t *testing.T) {
	q, _, _ := newRateLimitingQueue(t)
	q.Add("a")
	q.AddWithOptions(at(-100), "b", "c")
	q.AddWithOptions(at(5), "d")
	q.AddWithOptions(at(5), "e")
	q.Add("f")
	assert.Equal(t, 6, q.Len())
	assert.Equal(t, []string{"d@5", "e@5", "a@0", "f@0", "b@-100", "c@-100"}, getAll[string](t, q))
}

func TestPriorityRaiseMovesItemToTheEndOfItsNewLevel(t *testing.T) {
	q, _, _ := newRateLimitingQueue(t)
	q.Add("a")
	q.Add("b")
	q.AddWithOptions(at(5), "x")
	q.AddWithOptions(at(5), "a")    // raised: after x
	q.AddWithOptions(at(-100), "b") // lower: ignored, b stays at 0
	q.AddWithOptions(at(5), "x")    // same: x keeps its place
	assert.Equal(t, 3, q.Len(), "a raise does not count an item twice")
	assert.Equal(t, []string{"x@5", "a@5", "b@0"}, getAll[string](t, q))
}

func TestPriorityInitialListThenRealChange(t *testing.T) {
	// controller-runtime's pattern: the initial list at -100, then a real
	// change of one of those items at 0 goes first.
	q, _, _ := newRateLimitingQueue(t)
	q.AddWithOptions(at(-100), "1", "2", "3")
	q.Add("2")
	assert.Equal(t, []string{"2@0", "1@-100", "3@-100"}, getAll[string](t, q))
}

func TestPriorityReAddWhileProcessingRunsAfterDoneAtThatPriority(t *testing.T) {
	q, _, _ := newRateLimitingQueue(t)
	q.Add("a")
	item, prio, _ := q.GetWithPriority()
	require.Equal(t, "a", item)
	require.Equal(t, 0, prio)
	q.AddWithOptions(at(5), "b")
	q.AddWithOptions(at(10), "a")
	q.AddWithOptions(at(-3), "a") // lower: the pending run keeps 10
	assert.Equal(t, 1, q.Len(), "a waits for Done")
	q.Done("a")
	assert.Equal(t, []string{"a@10", "b@5"}, getAll[string](t, q))
	// Once handed out, the item's priority is forgotten.
	q.Add("a")
	assert.Equal(t, []string{"a@0"}, getAll[string](t, q))
}

func TestPriorityDelayedItemBecomesReadyAtItsPriority(t *testing.T) {
	q, _, fc := newRateLimitingQueue(t)
	q.AddWithOptions(backoff.AddOptions{After: time.Second, Priority: 5}, "a")
	q.Add("b")
	fc.Step(time.Second)
	assert.Equal(t, []string{"a@5", "b@0"}, getAll[string](t, q))
}

func TestPriorityWaitingItemKeepsEarlierTimeAndHigherPriority(t *testing.T) {
	q, _, fc := newRateLimitingQueue(t)
	q.AddWithOptions(backoff.AddOptions{After: 10 * time.Second, Priority: 5}, "a")
	q.AddWithOptions(backoff.AddOptions{After: 2 * time.Second, Priority: -1}, "a")
	q.AddWithOptions(backoff.AddOptions{After: 30 * time.Second, Priority: 7}, "a")
	q.AddWithOptions(at(1), "b")
	fc.Step(2*time.Second - 1)
	assert.Equal(t, 1, q.Len())
	fc.Step(1)
	assert.Equal(t, []string{"a@7", "b@1"}, getAll[string](t, q))
	_, ok := q.NextReadyAt()
	assert.False(t, ok, "a waits once")
}

func TestPriorityAddOfWaitingItemQueuesItNowAtItsPriority(t *testing.T) {
	q, _, _ := newRateLimitingQueue(t)
	q.AddWithOptions(backoff.AddOptions{After: time.Hour, Priority: 3}, "a")
	q.Add("b")
	q.Add("a")
	assert.Equal(t, []string{"a@3", "b@0"}, getAll[string](t, q))
	_, ok := q.NextReadyAt()
	assert.False(t, ok, "a no longer waits (kubernetes#126027)")
}

func TestPriorityTakeWaitingReportsPriorities(t *testing.T) {
	q, _, _ := newRateLimitingQueue(t)
	q.AddWithOptions(backoff.AddOptions{After: time.Second, Priority: -100}, "a")
	q.AddAfter("b", 2*time.Second)
	q.ShutDown()
	got := q.TakeWaiting()
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].Item)
	assert.Equal(t, -100, got[0].Priority)
	assert.Equal(t, 0, got[1].Priority)
}

func TestPriorityRateLimitedWaitsTheShorterDelay(t *testing.T) {
	q, l, fc := newRateLimitingQueue(t) // the limiter's first delay is 1s
	q.AddWithOptions(backoff.AddOptions{RateLimited: true, After: 500 * time.Millisecond, Priority: 2}, "short")
	q.AddWithOptions(backoff.AddOptions{RateLimited: true, After: 5 * time.Second}, "limiter")
	q.AddWithOptions(backoff.AddOptions{RateLimited: true}, "no-after")
	assert.Equal(t, 3, l.Whens())
	fc.Step(500 * time.Millisecond)
	assert.Equal(t, []string{"short@2"}, getAll[string](t, q))
	fc.Step(500 * time.Millisecond)
	assert.Equal(t, []string{"limiter@0", "no-after@0"}, getAll[string](t, q))
	assert.Equal(t, 1, q.NumRequeues("limiter"))
}

func TestPriorityRateLimitedOfPendingItemAsksNoLimiter(t *testing.T) {
	q, l, fc := newRateLimitingQueue(t)
	q.Add("queued")
	q.AddAfter("waiting", time.Hour)
	q.AddWithOptions(backoff.AddOptions{RateLimited: true, Priority: 4}, "queued")
	q.AddWithOptions(backoff.AddOptions{RateLimited: true, After: time.Second, Priority: 6}, "waiting")
	assert.Equal(t, 0, l.Whens(), "kubernetes#104554: pending runs spend no failure")
	fc.Step(time.Second)
	assert.Equal(t, []string{"waiting@6", "queued@4"}, getAll[string](t, q))
}

func TestPriorityDelayingQueueAddWithOptions(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	defer q.ShutDown()
	q.AddWithOptions(backoff.AddOptions{RateLimited: true, Priority: 1}, "now")
	q.AddWithOptions(backoff.AddOptions{RateLimited: true, After: time.Second, Priority: 2}, "later")
	assert.Equal(t, []string{"now@1"}, getAll[string](t, q))
	fc.Step(time.Second)
	assert.Equal(t, []string{"later@2"}, getAll[string](t, q))
}

func TestPriorityAfterShutDownAddsNothing(t *testing.T) {
	q, l, _ := newRateLimitingQueue(t)
	q.ShutDown()
	q.AddWithOptions(backoff.AddOptions{RateLimited: true, Priority: 1}, "a")
	assert.Equal(t, 0, q.Len())
	assert.Equal(t, 0, l.Whens())
}

func TestPriorityGetContextWithPriority(t *testing.T) {
	q, _, _ := newRateLimitingQueue(t)
	q.AddWithOptions(at(-7), "a")
	item, prio, err := q.GetContextWithPriority(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "a", item)
	assert.Equal(t, -7, prio)
	q.Done(item)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = q.GetContextWithPriority(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	q.ShutDown()
	_, _, err = q.GetContextWithPriority(context.Background())
	assert.ErrorIs(t, err, backoff.ErrQueueShutDown)
}

func TestPriorityShutDownWithDrainHandsOutEveryLevel(t *testing.T) {
	q, _, _ := newRateLimitingQueue(t)
	q.AddWithOptions(at(-100), "low")
	q.AddWithOptions(at(100), "high")
	q.AddWithOptions(at(100), "low") // leaves a stale entry behind
	done := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(done) }()
	var got []string
	for {
		item, prio, shut := q.GetWithPriority()
		if shut {
			break
		}
		got = append(got, fmt.Sprintf("%v@%d", item, prio))
		q.Done(item)
	}
	<-done
	assert.Equal(t, []string{"high@100", "low@100"}, got)
}

func TestPriorityStrictByDefault(t *testing.T) {
	q, _, fc := newRateLimitingQueue(t)
	q.AddWithOptions(at(-1), "low")
	for i := range 100 {
		q.AddWithOptions(at(1), fmt.Sprint(i))
		item, _, _ := q.GetWithPriority()
		require.NotEqual(t, "low", item)
		q.Done(item)
		fc.Step(time.Second)
	}
}

// TestMaxReadyWaitBoundsStarvation feeds the queue a steady stream of
// high-priority items, one more per Get than it hands out: without the
// bound the low item would never run.
func TestMaxReadyWaitBoundsStarvation(t *testing.T) {
	fc := newQueueClock()
	qa := backoff.NewDelayingQueue[string](backoff.WithClock(fc), backoff.WithMaxReadyWait(time.Second))
	defer qa.ShutDown()
	qa.AddWithOptions(at(-100), "low")
	added := fc.Now()
	var ranAt time.Time
	for i := 0; ranAt.IsZero(); i++ {
		require.Less(t, i, 1000, "the low item starved")
		qa.AddWithOptions(at(100), fmt.Sprint("h", 2*i), fmt.Sprint("h", 2*i+1))
		item, _, _ := qa.GetWithPriority()
		if item == "low" {
			ranAt = fc.Now()
		}
		qa.Done(item)
		fc.Step(100 * time.Millisecond)
	}
	waited := ranAt.Sub(added)
	assert.Greater(t, waited, time.Second, "strict priority until the bound")
	assert.LessOrEqual(t, waited, time.Second+100*time.Millisecond, "handed out at the first Get after the bound")
	// None of the backlog has waited a second yet: strict priority again.
	item, prio, _ := qa.GetWithPriority()
	assert.Equal(t, "h11", item)
	assert.Equal(t, 100, prio)
}

func tenantOf(s string) string { return s[:strings.IndexByte(s, '/')] }

func TestFairnessRoundRobinAcrossKeys(t *testing.T) {
	q := backoff.NewQueue[string](backoff.WithFairness(tenantOf))
	defer q.ShutDown()
	for i := range 1000 {
		q.Add(fmt.Sprint("hot/", i))
	}
	q.Add("cold/0")
	q.Add("warm/0")
	q.Add("warm/1")
	var got []string
	for range 6 {
		item, _ := q.Get()
		got = append(got, item)
		q.Done(item)
	}
	assert.Equal(t, []string{"hot/0", "cold/0", "warm/0", "hot/1", "warm/1", "hot/2"}, got,
		"round-robin across keys, FIFO within a key")
	assert.Equal(t, 997, q.Len())
}

func TestFairnessWithinEachPriority(t *testing.T) {
	q := backoff.NewDelayingQueue[string](backoff.WithFairness(tenantOf))
	defer q.ShutDown()
	q.AddWithOptions(at(-1), "a/0", "a/1", "b/0")
	q.AddWithOptions(at(1), "a/2", "a/3", "b/1")
	q.AddWithOptions(at(1), "b/0") // raised
	assert.Equal(t, []string{"a/2@1", "b/1@1", "a/3@1", "b/0@1", "a/0@-1", "a/1@-1"}, getAll[string](t, q))
}

// TestFairnessSmallTenantsServedWithin100Gets: one tenant adds 10,000
// keys and 99 tenants one each; every small tenant's key is handed out
// within the first 100 Gets (round-robin: one turn each, and the big
// tenant's turns in between).
func TestFairnessSmallTenantsServedWithin100Gets(t *testing.T) {
	t.Parallel()
	q := backoff.NewQueue[string](backoff.WithFairness(tenantOf))
	defer q.ShutDown()
	for i := range 10_000 {
		q.Add(fmt.Sprint("big/", i))
	}
	for i := range 99 {
		q.Add(fmt.Sprintf("small%02d/0", i))
	}
	servedAt := map[string]int{}
	for n := 1; n <= 100; n++ {
		item, _ := q.Get()
		if tenant := tenantOf(item); tenant != "big" {
			servedAt[tenant] = n
		}
		q.Done(item)
	}
	assert.Len(t, servedAt, 99, "every small tenant within 100 Gets")
	last := 0
	for _, n := range servedAt {
		last = max(last, n)
	}
	t.Logf("the last small tenant's key came out at Get %d of 100", last)
}

// TestPriorityDelayedAddRaisesAQueuedItem: a ready item added again with a
// delay and a higher priority is handed out now at the higher priority,
// and not a second time later, as in controller-runtime's priority queue
// (lockedAddWithOpts: the earliest ready time, the highest priority).
func TestPriorityDelayedAddRaisesAQueuedItem(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewRateLimitingQueue[string](newQLimiter[string](qExponential(time.Second)), backoff.WithClock(fc))
	defer q.ShutDown()
	q.Add("x")
	q.AddWithOptions(backoff.AddOptions{After: time.Hour, Priority: 7}, "x")
	assert.Equal(t, []string{"x@7"}, getAll[string](t, q))
	_, waits := q.NextReadyAt()
	assert.False(t, waits, "absorbed: no second run an hour later")

	// Processing and not queued again: the delayed add is a further run.
	q.Add("y")
	item, _ := q.Get()
	q.AddWithOptions(backoff.AddOptions{After: time.Hour, Priority: 7}, "y")
	q.Done(item)
	d, ok := q.WaitingFor("y")
	assert.True(t, ok)
	assert.Equal(t, time.Hour, d)
}

func TestPriorityOptionsPanicOnBadArguments(t *testing.T) {
	assert.PanicsWithValue(t, "backoff: WithFairness: key must not be nil, got <nil>", func() { backoff.WithFairness[string](nil) })
	assert.PanicsWithValue(t, "backoff: WithMaxReadyWait: d must not be negative, got -1ns", func() { backoff.WithMaxReadyWait(-1) })
	assert.PanicsWithValue(t, "backoff: WithFairness: key must be a func(int) string for this queue, got func(string) string", func() {
		backoff.NewQueue[int](backoff.WithFairness(tenantOf))
	})
}

func TestPriorityHotPathsAllocateNothing(t *testing.T) {
	q := backoff.NewDelayingQueue[int]()
	defer q.ShutDown()
	for i := range 64 { // grow to the working size
		q.AddWithOptions(at(-100*(i%2)), i)
	}
	getAll[int](t, q)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		q.AddWithOptions(at(-100*(i%2)), i%64)
		item, _, _ := q.GetWithPriority()
		q.Done(item)
		i++
	})
	assert.Zero(t, allocs)
}

func TestMaxReadyWaitOldestOverdueFirst(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc), backoff.WithMaxReadyWait(time.Second))
	defer q.ShutDown()
	q.AddWithOptions(at(-100), "low")
	fc.Step(500 * time.Millisecond)
	q.AddWithOptions(at(-50), "mid")
	q.AddWithOptions(at(100), "high")
	fc.Step(time.Second) // low waited 1.5s, mid and high 1s: only low is overdue
	assert.Equal(t, []string{"low@-100", "high@100", "mid@-50"}, getAll[string](t, q))
	q.AddWithOptions(at(-50), "mid")
	q.AddWithOptions(at(100), "high")
	fc.Step(2 * time.Second) // both overdue, added at the same time: the higher first
	assert.Equal(t, []string{"high@100", "mid@-50"}, getAll[string](t, q))
}

func TestRunWorkersRequeuesAtPriority(t *testing.T) {
	fc := newQueueClock()
	l := newQLimiter[string](func(int) time.Duration { return time.Minute })
	q := backoff.NewRateLimitingQueue[string](l, backoff.WithClock(fc),
		backoff.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	q.AddWithOptions(at(5), "err", "err-set")
	q.AddWithOptions(at(-100), "keep", "set")
	q.AddWithOptions(at(3), "after", "after-set")
	q.AddWithOptions(at(-1000), "end")
	ctx, cancel := context.WithCancel(context.Background())
	var seen []string
	worker := func(_ context.Context, item string) (backoff.Result, error) {
		seen = append(seen, item)
		switch item {
		case "err":
			return backoff.Result{}, errors.New("transient") // an error keeps the priority
		case "err-set":
			return backoff.Result{Priority: 9}, errors.New("transient")
		case "keep":
			return backoff.Result{Requeue: true}, nil
		case "set":
			return backoff.Result{Requeue: true, Priority: 7}, nil
		case "after":
			return backoff.Result{RequeueAfter: time.Hour}, nil
		case "after-set":
			return backoff.Result{RequeueAfter: time.Hour, Priority: -1}, nil
		}
		cancel()
		return backoff.Result{}, nil
	}
	// The worker cancels ctx at "end"; the deadline turns a queue that never
	// hands "end" out (or a RunWorkers that never returns) into a failure
	// that says so, instead of go test's timeout.
	waitForCall(t, "RunWorkers to hand out every item and return once \"end\" cancels it",
		func() { backoff.RunWorkers(ctx, q, 1, worker) }, fc)
	assert.Equal(t, []string{"err", "err-set", "after", "after-set", "keep", "set", "end"}, seen, "highest priority first")
	got := map[string]int{}
	for _, w := range q.TakeWaiting() {
		got[w.Item] = w.Priority
	}
	assert.Equal(t, map[string]int{"err": 5, "err-set": 9, "keep": -100, "set": 7, "after": 3, "after-set": -1}, got)
}

// prioDepthRecorder records the last depth reported per priority label.
type prioDepthRecorder struct {
	backoff.NopQueueMetrics
	depth  int
	depths map[string]int
}

func (r *prioDepthRecorder) SetDepth(n int) { r.depth = n }

func (r *prioDepthRecorder) SetPriorityDepth(p string, n int) { r.depths[p] = n }

func TestPriorityDepthMetrics(t *testing.T) {
	m := &prioDepthRecorder{depths: map[string]int{}}
	q := backoff.NewDelayingQueue[int](backoff.WithMetrics(m))
	defer q.ShutDown()
	q.AddWithOptions(at(-100), 1, 2)
	q.Add(3)
	q.AddWithOptions(at(0), 1) // raised
	assert.Equal(t, map[string]int{"-100": 1, "0": 2}, m.depths)
	assert.Equal(t, 3, m.depth, "a raised item counts once")
	item, _, _ := q.GetWithPriority()
	q.Done(item)
	assert.Equal(t, map[string]int{"-100": 1, "0": 1}, m.depths)

	getAll[int](t, q)
	for p := range backoff.MaxPriorityLabels + 4 {
		q.AddWithOptions(at(p+1), 100+p)
	}
	assert.Len(t, m.depths, backoff.MaxPriorityLabels+1, "labels are bounded")
	assert.Equal(t, 6, m.depths[backoff.OtherPriorityLabel], "-100 and 0 took two labels: 6 priorities share the other label")
}

func TestMaxReadyWaitGetAllocatesNothing(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewDelayingQueue[int](backoff.WithClock(fc), backoff.WithMaxReadyWait(time.Millisecond))
	defer q.ShutDown()
	for i := range 64 {
		q.AddWithOptions(at(-100*(i%2)), i)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		q.AddWithOptions(at(-100*(i%2)), 64+i%64)
		item, _, _ := q.GetWithPriority()
		q.Done(item)
		fc.Step(time.Millisecond / 4)
		i++
	})
	assert.Zero(t, allocs)
}

// TestAddWithOptionsCountsRetriesAsAddAfter checks that AddWithOptions
// counts a retry exactly where AddAfter or AddRateLimited would: an add with
// a delay or through the limiter is one retry, a plain add at a priority
// none.
func TestAddWithOptionsCountsRetriesAsAddAfter(t *testing.T) {
	fc := newQueueClock()
	m := &recMetrics{}
	q := backoff.NewRateLimitingQueue[string](newQLimiter[string](qExponential(time.Second)),
		backoff.WithClock(fc), backoff.WithMetrics(m))
	defer q.ShutDown()
	q.AddWithOptions(at(-100), "a")
	assert.Equal(t, "add depth=1", m.take(), "a plain add at a priority")
	q.AddWithOptions(backoff.AddOptions{After: time.Second, Priority: 5}, "b")
	assert.Equal(t, "retry", m.take(), "a delayed add")
	q.AddWithOptions(backoff.AddOptions{RateLimited: true, Priority: 5}, "c")
	assert.Equal(t, "retry", m.take(), "a rate-limited add")
	q.AddWithOptions(backoff.AddOptions{After: -time.Second}, "d")
	assert.Equal(t, "add depth=2", m.take(), "a negative delay adds now")
}

// TestPriorityManyDistinctPriorities queues more distinct priorities than
// the queue interns at once, as pending runs of queued items and of items
// being processed: every item comes out once, at its priority, in order.
func TestPriorityManyDistinctPriorities(t *testing.T) {
	t.Parallel()
	q := backoff.NewDelayingQueue[int]()
	defer q.ShutDown()
	const n = 600
	for i := range n {
		q.AddWithOptions(at(i-n/2), i)
	}
	// Half of them rise by n: their old entries go stale.
	for i := 0; i < n; i += 2 {
		q.AddWithOptions(at(i-n/2+n), i)
	}
	require.Equal(t, n, q.Len())
	var want, got []string
	for i := n - 2; i >= 0; i -= 2 {
		want = append(want, fmt.Sprintf("%d@%d", i, i-n/2+n))
	}
	for i := n - 1; i >= 1; i -= 2 {
		want = append(want, fmt.Sprintf("%d@%d", i, i-n/2))
	}
	// Each item is re-added while processing, at a distinct priority
	// above everything queued: it runs again right after its Done.
	for q.Len() > 0 {
		item, prio, _ := q.GetWithPriority()
		got = append(got, fmt.Sprintf("%d@%d", item, prio))
		q.AddWithOptions(at(10*n+item), item)
		q.AddWithOptions(at(10*n-1), item) // lower than its pending run: ignored
		q.Done(item)
		again, prio, _ := q.GetWithPriority()
		require.Equal(t, item, again)
		require.Equal(t, 10*n+item, prio)
		q.Done(again)
	}
	assert.Equal(t, want, got)
}

// TestFairnessHotPathsAllocateNothing runs Add+Get+Done with fairness over
// 1,000 keys, two priorities and a raise per round, once the queue has
// seen its keys.
func TestFairnessHotPathsAllocateNothing(t *testing.T) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("ns-", i)
	}
	q := backoff.NewDelayingQueue[int](backoff.WithFairness(func(i int) string { return keys[i%1000] }))
	defer q.ShutDown()
	round := func(i int) {
		q.AddWithOptions(at(-100*(i%2)), i%5000)
		q.AddWithOptions(at(1), (i+7)%5000) // a raise when it is queued at -100
		for range 2 {
			if q.Len() > 0 {
				item, _, _ := q.GetWithPriority()
				q.Done(item)
			}
		}
	}
	for i := range 20_000 { // every key, priority and FIFO at its working size
		round(i)
	}
	i := 20_000
	allocs := testing.AllocsPerRun(5000, func() {
		round(i)
		i++
	})
	assert.Zero(t, allocs)
}

// BenchmarkQueueAddGetDonePriorities measures Add+Get+Done over a backlog of
// 1,000 items: all at priority 0 without fairness (what every queue pays),
// half at -100 (two levels), and with WithFairness over 1,000 keys.
func BenchmarkQueueAddGetDonePriorities(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	fair := backoff.WithFairness(func(i int) string { return keys[uint(i)%1000] })
	for _, bc := range []struct {
		name string
		prio func(i int) int
		opts []backoff.Option
	}{
		{"levels=1", func(int) int { return 0 }, nil},
		{"levels=2", func(i int) int { return -100 * (i & 1) }, nil},
		{"levels=1/fairness=1000keys", func(int) int { return 0 }, []backoff.Option{fair}},
		{"levels=2/fairness=1000keys", func(i int) int { return -100 * (i & 1) }, []backoff.Option{fair}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			q := backoff.NewDelayingQueue[int](bc.opts...)
			defer q.ShutDown()
			for i := range 1000 {
				q.AddWithOptions(backoff.AddOptions{Priority: bc.prio(i)}, -1-i)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.AddWithOptions(backoff.AddOptions{Priority: bc.prio(i)}, i)
				item, _ := q.Get()
				q.Done(item)
			}
		})
	}
}
