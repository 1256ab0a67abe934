package backoff_test

import (
	"context"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	testingclock "k8s.io/utils/clock/testing"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func newRateLimitingQueue(t *testing.T) (*backoff.RateLimitingQueue[string], *qLimiter[string], *testingclock.FakeClock) {
	t.Helper()
	fc := newQueueClock()
	l := newQLimiter[string](qExponential(time.Second))
	q := backoff.NewRateLimitingQueue[string](l, backoff.WithClock(fc))
	t.Cleanup(q.ShutDown)
	return q, l, fc
}

func TestRateLimitingQueueAddRateLimitedWaitsForWhen(t *testing.T) {
	q, l, fc := newRateLimitingQueue(t)
	q.Add("a")
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		item, _ := get(t, q.Get, fc)
		q.AddRateLimited(item)
		q.Done(item)
		assert.Equal(t, n+1, q.NumRequeues("a"))
		fc.Step(want - 1)
		assert.Equal(t, 0, q.Len(), "attempt %d: 1ns early", n)
		fc.Step(1)
		assert.Equal(t, 1, q.Len(), "attempt %d", n)
	}
	q.Forget("a")
	assert.Equal(t, 0, q.NumRequeues("a"))
	item, _ := get(t, q.Get, fc)
	q.AddRateLimited(item)
	q.Done(item)
	fc.Step(time.Second)
	assert.Equal(t, 1, q.Len(), "after Forget, the first delay again")
	assert.Equal(t, 4, l.Whens())
}

// TestRateLimitingQueueAddRateLimitedOfPendingItem covers kubernetes#104554:
// client-go calls When for every AddRateLimited, so re-adds of items that are
// already queued spend bucket tokens and failure counts.
func TestRateLimitingQueueAddRateLimitedOfPendingItem(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(q *backoff.RateLimitingQueue[string])
		wantWhens int
	}{
		{"idle item: When is called", func(q *backoff.RateLimitingQueue[string]) {}, 1},
		{"queued", func(q *backoff.RateLimitingQueue[string]) { q.Add("a") }, 0},
		{"waiting", func(q *backoff.RateLimitingQueue[string]) { q.AddAfter("a", time.Hour) }, 0},
		{"processing: the worker's requeue calls When", func(q *backoff.RateLimitingQueue[string]) {
			q.Add("a")
			_, _ = get(t, q.Get)
		}, 1},
		{"processing and queued again", func(q *backoff.RateLimitingQueue[string]) {
			q.Add("a")
			_, _ = get(t, q.Get)
			q.Add("a")
		}, 0},
		{"shut down", func(q *backoff.RateLimitingQueue[string]) { q.ShutDown() }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, l, _ := newRateLimitingQueue(t)
			tt.setup(q)
			for range 100 {
				q.AddRateLimited("a")
			}
			assert.Equal(t, tt.wantWhens, l.Whens(), "When calls for 100 AddRateLimited")
			assert.Equal(t, tt.wantWhens, q.NumRequeues("a"))
		})
	}
}

func TestRateLimitingQueueAddRateLimitedKeepsPendingRunTime(t *testing.T) {
	q, _, fc := newRateLimitingQueue(t)
	q.AddRateLimited("a") // waits 1s
	fc.Step(500 * time.Millisecond)
	q.AddRateLimited("a") // pending: no new delay, and not a later one
	fc.Step(500 * time.Millisecond)
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, 1, q.NumRequeues("a"))
}

func TestRateLimitingQueueDueItemCountsAsQueued(t *testing.T) {
	q, l, fc := newRateLimitingQueue(t)
	q.AddAfter("a", time.Second)
	fc.Step(time.Second) // a is due; the timer goroutine may not have run
	q.AddRateLimited("a")
	assert.Equal(t, 0, l.Whens())
	assert.Equal(t, 1, q.Len())
}

// TestRateLimitingQueueRequeuesOnControllerRuntimeSeries: controller-runtime's item-exponential series
// (5 ms·2^n, capped at 1000 s) through the queue, exact to the nanosecond.
func TestRateLimitingQueueRequeuesOnControllerRuntimeSeries(t *testing.T) {
	fc := newQueueClock()
	l := newQLimiter[string](func(n int) time.Duration {
		return min(5*time.Millisecond<<min(n, 30), 1000*time.Second)
	})
	q := backoff.NewRateLimitingQueue[string](l, backoff.WithClock(fc))
	defer q.ShutDown()
	q.Add("x")
	for n := 0; n < 22; n++ {
		item, _ := get(t, q.Get, fc)
		q.AddRateLimited(item)
		q.Done(item)
		want := min(5*time.Millisecond<<n, 1000*time.Second)
		at, ok := q.NextReadyAt()
		require.True(t, ok)
		require.Equal(t, want, at.Sub(fc.Now()), "failure %d", n+1)
		fc.Step(want - 1)
		require.Equal(t, 0, q.Len(), "failure %d: 1ns early", n+1)
		fc.Step(1)
		require.Equal(t, 1, q.Len(), "failure %d", n+1)
	}
}

// TestRateLimitingQueueGetsCountBudgetRequests: with WithRetryBudget, each
// of the four Get forms counts one request per item it hands out, and none
// when it hands out nothing (an ended context, a shut-down queue).
func TestRateLimitingQueueGetsCountBudgetRequests(t *testing.T) {
	fc := newQueueClock()
	b := backoff.NewRetryBudget(1, 0, 10*time.Second, backoff.WithClock(fc))
	q := backoff.NewRateLimitingQueue[string](
		backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Minute),
		backoff.WithClock(fc), backoff.WithRetryBudget(b))
	for _, item := range []string{"a", "b", "c", "d"} {
		q.Add(item)
	}
	require.Equal(t, 4, q.Len())
	requests := func() int64 { return b.Snapshot().Requests }

	item, shutdown := q.Get()
	require.False(t, shutdown)
	q.Done(item)
	assert.Equal(t, int64(1), requests(), "Get")
	item, err := q.GetContext(context.Background())
	require.NoError(t, err)
	q.Done(item)
	assert.Equal(t, int64(2), requests(), "GetContext")
	item, _, shutdown = q.GetWithPriority()
	require.False(t, shutdown)
	q.Done(item)
	assert.Equal(t, int64(3), requests(), "GetWithPriority")
	item, _, err = q.GetContextWithPriority(context.Background())
	require.NoError(t, err)
	q.Done(item)
	assert.Equal(t, int64(4), requests(), "GetContextWithPriority")

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = q.GetContext(ended)
	require.ErrorIs(t, err, context.Canceled)
	_, _, err = q.GetContextWithPriority(ended)
	require.ErrorIs(t, err, context.Canceled)
	q.ShutDown()
	_, shutdown = q.Get()
	require.True(t, shutdown)
	_, _, shutdown = q.GetWithPriority()
	require.True(t, shutdown)
	assert.Equal(t, int64(4), requests(), "no request for a Get that hands out nothing")
}

// TestRateLimitingQueueRejectsALimiterOnAnotherClock: a FakeClock passed to
// the queue or to the limiter only used to leave the other on the real clock
// (a bucket refilling in real time under a queue whose time stands still).
// NewRateLimitingQueue now refuses the pair when the limiter is ours.
func TestRateLimitingQueueRejectsALimiterOnAnotherClock(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	other := testingclock.NewFakeClock(fc.Now())
	const want = "backoff: NewRateLimitingQueue: the limiter reads another clock than the queue (pass the same WithClock to both, e.g. one []Option for both)"
	exp := backoff.NewItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second)
	for name, tt := range map[string]struct {
		limiter backoff.RateLimiter[string]
		queue   []backoff.Option
	}{
		"clock given to the queue only":   {backoff.DefaultControllerRateLimiter[string](), []backoff.Option{backoff.WithClock(fc)}},
		"clock given to the limiter only": {backoff.DefaultControllerRateLimiter[string](backoff.WithClock(fc)), nil},
		"two fake clocks":                 {backoff.NewBucketRateLimiter[string](10, 100, backoff.WithClock(other)), []backoff.Option{backoff.WithClock(fc)}},
		"a bucket inside a max-of": {backoff.NewMaxOfRateLimiter(exp, backoff.NewBucketRateLimiter[string](10, 100)),
			[]backoff.Option{backoff.WithClock(fc)}},
		"a bucket inside a max-wait": {backoff.NewWithMaxWaitRateLimiter(backoff.NewBucketRateLimiter[string](10, 100), time.Second),
			[]backoff.Option{backoff.WithClock(fc)}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.PanicsWithValue(t, want, func() { backoff.NewRateLimitingQueue(tt.limiter, tt.queue...) })
		})
	}

	// One options slice for both: accepted, and the bucket runs on the fake
	// clock (the 101st requeue at one instant waits 100 ms of fake time).
	opts := []backoff.Option{backoff.WithClock(fc), backoff.WithName("pods")}
	q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](opts...), opts...)
	defer q.ShutDown()
	for i := range 101 {
		q.AddRateLimited(string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	assert.Equal(t, 0, q.Len(), "all wait their 5 ms")
	fc.Step(5 * time.Millisecond)
	assert.Equal(t, 100, q.Len(), "the burst")
	fc.Step(95 * time.Millisecond)
	assert.Equal(t, 101, q.Len(), "the 101st after 100 ms of fake time")

	// Both on the real clock (no WithClock anywhere), and limiters that read
	// no clock, are accepted.
	backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string]()).ShutDown()
	backoff.NewRateLimitingQueue[string](exp, backoff.WithClock(fc)).ShutDown()
}

// TestRateLimitingQueueDefaultControllerMatchesControllerRuntime: with
// DefaultControllerRateLimiter, an item that fails every time becomes ready
// 5 ms, 10 ms, 20 ms … 655.36 s, then 1000 s after each AddRateLimited,
// exactly to the nanosecond; Forget starts the series again.
func TestRateLimitingQueueDefaultControllerMatchesControllerRuntime(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewRateLimitingQueue[string](backoff.DefaultControllerRateLimiter[string](backoff.WithClock(fc)),
		backoff.WithClock(fc))
	defer q.ShutDown()
	want := func(n int) time.Duration { return min(5*time.Millisecond<<min(n, 30), 1000*time.Second) }
	q.Add("default/cluster")
	for n := 0; n < 25; n++ {
		if n == 22 {
			q.Forget("default/cluster")
		}
		item, _ := get(t, q.Get, fc)
		q.AddRateLimited(item)
		q.Done(item)
		d := want(n)
		if n >= 22 {
			d = want(n - 22)
		}
		require.Equal(t, min(n%22+1, 22), q.NumRequeues(item), "failure %d", n+1)
		fc.Step(d - 1)
		require.Equal(t, 0, q.Len(), "failure %d: ready 1ns early", n+1)
		fc.Step(1)
		require.Equal(t, 1, q.Len(), "failure %d: not ready after %v", n+1, d)
	}
}

// TestQueueDocsNameThePromotedMethods: go doc lists only the methods declared
// on a type, not those promoted from the queue it embeds, so the doc comments
// of RateLimitingQueue and DelayingQueue name those ([DelayingQueue.Park]...):
// without that, go doc RateLimitingQueue shows neither Reschedule nor Park.
func TestQueueDocsNameThePromotedMethods(t *testing.T) {
	t.Parallel() // self-contained: see TestMain
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	declared := map[string]map[string]bool{} // type → methods declared on it
	docs := map[string]string{}              // type → its doc comment
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					continue
				}
				recv := types.ExprString(d.Recv.List[0].Type)
				recv = strings.TrimPrefix(recv, "*")
				recv, _, _ = strings.Cut(recv, "[")
				if declared[recv] == nil {
					declared[recv] = map[string]bool{}
				}
				declared[recv][d.Name.Name] = true
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok && d.Doc != nil {
						docs[ts.Name.Name] = d.Doc.Text()
					}
				}
			}
		}
	}
	for name, typ := range map[string]reflect.Type{
		"RateLimitingQueue": reflect.TypeOf(&backoff.RateLimitingQueue[int]{}),
		"DelayingQueue":     reflect.TypeOf(&backoff.DelayingQueue[int]{}),
	} {
		promoted := 0
		for i := range typ.NumMethod() {
			m := typ.Method(i).Name
			if declared[name][m] {
				continue
			}
			promoted++
			from := "Queue"
			if declared["DelayingQueue"][m] {
				from = "DelayingQueue"
			}
			assert.Contains(t, docs[name], "["+from+"."+m+"]", "%s's doc comment does not name %s, which go doc does not list", name, m)
		}
		assert.NotZero(t, promoted, name)
	}
}
