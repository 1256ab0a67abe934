package backoff_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

// syncBuffer is a bytes.Buffer for a logger that workers write concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logLines returns the lines of log that mention item.
func logLines(log, item string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "item="+item+" ") {
			out = append(out, l)
		}
	}
	return out
}

func TestRunWorkersAppliesResultRules(t *testing.T) {
	fc := newQueueClock()
	l := newQLimiter[string](func(int) time.Duration { return time.Minute })
	var logs syncBuffer
	q := backoff.NewRateLimitingQueue[string](l, backoff.WithClock(fc), backoff.WithName("pods"),
		backoff.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	for _, item := range []string{"ok", "perm", "after"} {
		l.When(item) // a failure count that Forget must clear
	}
	items := []string{"ok", "err", "perm", "after", "requeue", "both", "negative", "panic", "exit", "end"}
	for _, item := range items {
		q.Add(item)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var seen []string
	handle := func(hctx context.Context, item string) (backoff.Result, error) {
		require.Equal(t, ctx, hctx)
		seen = append(seen, item) // one worker: no race
		switch item {
		case "err":
			return backoff.Result{}, errors.New("transient")
		case "perm":
			return backoff.Result{}, backoff.Permanent(errors.New("bad spec"))
		case "after":
			return backoff.Result{RequeueAfter: time.Hour}, nil
		case "requeue":
			return backoff.Result{Requeue: true}, nil
		case "both":
			return backoff.Result{Requeue: true, RequeueAfter: 2 * time.Hour}, nil
		case "negative":
			return backoff.Result{RequeueAfter: -time.Hour}, nil
		case "panic":
			panic("boom")
		case "exit":
			runtime.Goexit()
		case "end":
			cancel() // every earlier item has been settled: there is one worker
		}
		return backoff.Result{}, nil
	}
	done := make(chan struct{})
	go func() {
		backoff.RunWorkers(ctx, q, 1, handle)
		close(done)
	}()
	waitFor(t, "RunWorkers to return once the last item cancelled ctx", done, fc)

	assert.Equal(t, items, seen, "the worker survived the panic and the Goexit")
	assert.True(t, q.ShuttingDown(), "RunWorkers shuts the queue down when ctx ends")
	requeues := map[string]int{}
	for _, item := range items {
		requeues[item] = q.NumRequeues(item)
	}
	assert.Equal(t, map[string]int{"ok": 0, "err": 1, "perm": 0, "after": 0, "requeue": 1, "both": 0,
		"negative": 0, "panic": 1, "exit": 1, "end": 0}, requeues)
	assert.Equal(t, []backoff.WaitingItem[string]{
		{Item: "err", ReadyAt: epoch.Add(time.Minute)},
		{Item: "requeue", ReadyAt: epoch.Add(time.Minute)},
		{Item: "panic", ReadyAt: epoch.Add(time.Minute)},
		{Item: "exit", ReadyAt: epoch.Add(time.Minute)},
		{Item: "after", ReadyAt: epoch.Add(time.Hour)},
		{Item: "both", ReadyAt: epoch.Add(2 * time.Hour)},
	}, q.TakeWaiting())

	log := logs.String()
	for _, item := range []string{"ok", "after", "requeue", "both", "negative", "end"} {
		assert.Empty(t, logLines(log, item), "%s is not a failure", item)
	}
	for item, want := range map[string]string{
		"err":   `msg="backoff: item failed; requeued with backoff" queue=pods item=err error=transient requeues=1`,
		"perm":  `msg="backoff: item failed permanently; not requeued" queue=pods item=perm error="bad spec"`,
		"panic": `msg="backoff: handler panicked; item requeued with backoff" queue=pods item=panic error="backoff: handler panicked: boom" requeues=1 stack=`,
		"exit":  `msg="backoff: item failed; requeued with backoff" queue=pods item=exit error="backoff: handler called runtime.Goexit" requeues=1`,
	} {
		lines := logLines(log, item)
		if assert.Len(t, lines, 1, item) {
			assert.Contains(t, lines[0], "level=ERROR "+want)
		}
	}
	assert.Contains(t, log, "worker_test.go", "the panic's stack")
}

// TestRunWorkersItemTimeout: with WithItemTimeout, a handler that hangs
// has its context ended at the timeout, on the queue's clock; the error it
// returns takes the error path (requeued with backoff, logged).
func TestRunWorkersItemTimeout(t *testing.T) {
	fc := newQueueClock()
	l := newQLimiter[string](func(int) time.Duration { return time.Minute })
	var logs syncBuffer
	q := backoff.NewRateLimitingQueue[string](l, backoff.WithClock(fc), backoff.WithName("pods"),
		backoff.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	q.Add("hang")
	q.Add("end")
	ctx, cancel := context.WithCancel(context.Background())
	var deadline time.Time
	var ended error
	handle := func(hctx context.Context, item string) (backoff.Result, error) {
		switch item {
		case "hang":
			_, hasDeadline := hctx.Deadline()
			assert.False(t, hasDeadline, "no fake instant for real I/O code to misread")
			fc.Step(30*time.Second - 1) // the handler hangs for 30 s of the queue's clock
			assert.NoError(t, hctx.Err(), "not before the timeout")
			fc.Step(1)
			<-hctx.Done()
			deadline = fc.Now()
			ended = hctx.Err()
			return backoff.Result{}, ended
		case "end":
			assert.NoError(t, hctx.Err(), "every item gets its own timeout")
			cancel()
		}
		return backoff.Result{}, nil
	}
	done := make(chan struct{})
	go func() {
		backoff.RunWorkers(ctx, q, 1, handle, backoff.WithItemTimeout(30*time.Second))
		close(done)
	}()
	waitFor(t, "RunWorkers to return", done, fc)
	assert.Equal(t, epoch.Add(30*time.Second), deadline, "ended at the timeout's instant on the queue's clock")
	assert.Equal(t, context.DeadlineExceeded, ended)
	assert.Equal(t, 1, q.NumRequeues("hang"), "requeued with backoff")
	if lines := logLines(logs.String(), "hang"); assert.Len(t, lines, 1) {
		assert.Contains(t, lines[0], `msg="backoff: item failed; requeued with backoff" queue=pods item=hang error="context deadline exceeded"`)
	}
	assert.False(t, fc.HasWaiters(), "no timeout timer is left behind (the queue, shut down, holds none)")
}

// TestRunWorkersSpreadsRequeueAfterWithJitter: 1,000 items processed at
// one instant, each asking to be requeued after 5 minutes (a periodic
// resync), are due at one instant without jitter, and spread over the
// jitter's window with WithRequeueJitter(0.1): 5 to 5.5 minutes.
func TestRunWorkersSpreadsRequeueAfterWithJitter(t *testing.T) {
	t.Parallel()
	readyAts := func(opts ...backoff.Option) []time.Duration {
		fc := newQueueClock()
		q := backoff.NewRateLimitingQueue[int](newQLimiter[int](func(int) time.Duration { return time.Minute }), backoff.WithClock(fc))
		for i := range 1000 {
			q.Add(i)
		}
		q.Add(-1) // last: ends the run once every other item is settled
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			backoff.RunWorkers(ctx, q, 1, func(_ context.Context, item int) (backoff.Result, error) {
				if item == -1 {
					cancel()
					return backoff.Result{}, nil
				}
				return backoff.Result{RequeueAfter: 5 * time.Minute}, nil
			}, opts...)
			close(done)
		}()
		waitFor(t, "RunWorkers to return", done, fc)
		var ds []time.Duration
		for _, w := range q.TakeWaiting() {
			ds = append(ds, w.ReadyAt.Sub(epoch))
		}
		require.Len(t, ds, 1000)
		return ds
	}
	plain := readyAts()
	assert.Equal(t, 5*time.Minute, slices.Min(plain))
	assert.Equal(t, 5*time.Minute, slices.Max(plain), "no jitter: all due at one instant")

	jittered := readyAts(backoff.WithRequeueJitter(0.1))
	lo, hi := slices.Min(jittered), slices.Max(jittered)
	assert.GreaterOrEqual(t, lo, 5*time.Minute)
	assert.Less(t, hi, 5*time.Minute+30*time.Second)
	assert.Greater(t, hi-lo, 27*time.Second, "spread over 90%% of the 30 s window at least")
	slices.Sort(jittered)
	assert.Greater(t, len(slices.Compact(jittered)), 990, "distinct instants")
}

// TestRunWorkersKeepsPoolSize: after panics and Goexits, as many items as
// there are workers are still processed at once.
func TestRunWorkersKeepsPoolSize(t *testing.T) {
	const workers = 3
	q := backoff.NewRateLimitingQueue[string](newQLimiter[string](func(int) time.Duration { return time.Hour }),
		backoff.WithClock(newQueueClock()), backoff.WithLogger(slog.New(slog.NewTextHandler(&syncBuffer{}, nil))))
	for _, item := range []string{"panic1", "exit1", "panic2", "exit2", "b1", "b2", "b3"} {
		q.Add(item)
	}
	var inside sync.WaitGroup
	inside.Add(workers)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		backoff.RunWorkers(ctx, q, workers, func(_ context.Context, item string) (backoff.Result, error) {
			switch {
			case strings.HasPrefix(item, "panic"):
				panic(item)
			case strings.HasPrefix(item, "exit"):
				runtime.Goexit()
			}
			inside.Done()
			inside.Wait() // only returns once all three workers are here
			return backoff.Result{}, nil
		})
		close(done)
	}()
	waitForCall(t, "all three workers to be inside the handler at once (the pool lost a worker?)", inside.Wait)
	cancel()
	waitFor(t, "RunWorkers to return after cancel", done)
}

func TestRunWorkersStopsOnCancelLeavingQueuedItems(t *testing.T) {
	var logs syncBuffer
	q := backoff.NewRateLimitingQueue[string](newQLimiter[string](func(int) time.Duration { return time.Hour }),
		backoff.WithClock(newQueueClock()), backoff.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	q.Add("a")
	started := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		backoff.RunWorkers(ctx, q, 1, func(ctx context.Context, item string) (backoff.Result, error) {
			close(started)
			<-ctx.Done()
			return backoff.Result{}, ctx.Err()
		})
		close(done)
	}()
	waitFor(t, "the worker to start on \"a\"", started)
	q.Add("b")
	cancel()
	waitFor(t, "RunWorkers to return after cancel", done)

	assert.True(t, q.ShuttingDown())
	assert.Equal(t, []string{"b"}, getReady[string](t, q), "b stays queued: the worker took nothing after ctx ended")
	assert.NotContains(t, logs.String(), "item=a", "an error caused by the cancellation is not logged")
}

// TestRunWorkersLogsAHandlersOwnTimeout: only an error caused by the end of
// RunWorkers' ctx goes unlogged. A handler whose own call timed out, while
// ctx runs, returns context.DeadlineExceeded too: that failure is logged
// and the item requeued.
func TestRunWorkersLogsAHandlersOwnTimeout(t *testing.T) {
	var logs syncBuffer
	q := backoff.NewRateLimitingQueue[string](newQLimiter[string](func(int) time.Duration { return time.Hour }),
		backoff.WithClock(newQueueClock()), backoff.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	q.Add("a")
	q.Add("end")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		backoff.RunWorkers(ctx, q, 1, func(_ context.Context, item string) (backoff.Result, error) {
			if item == "end" {
				cancel()
				return backoff.Result{}, nil
			}
			return backoff.Result{}, fmt.Errorf("get pod: %w", context.DeadlineExceeded)
		})
		close(done)
	}()
	waitFor(t, "RunWorkers to return after cancel", done)
	lines := logLines(logs.String(), "a")
	require.Len(t, lines, 1, "the handler's own timeout is a failure: logged")
	assert.Contains(t, lines[0], "level=ERROR")
	assert.Equal(t, 1, q.NumRequeues("a"))
}

// TestRunWorkersEndsThePermitOfAFailedHandler: with an AdaptiveLimiter, a
// handler that panics or calls runtime.Goexit still ends the permit its
// worker took (as a neutral outcome: the limit stays), and so does a worker
// that took a permit and then found the queue shutting down.
func TestRunWorkersEndsThePermitOfAFailedHandler(t *testing.T) {
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(newQueueClock()), backoff.WithInitialLimit(4))
	q := backoff.NewRateLimitingQueue[string](newQLimiter[string](func(int) time.Duration { return time.Hour }),
		backoff.WithClock(newQueueClock()), backoff.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	q.Add("panic")
	q.Add("exit")
	q.Add("end")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		backoff.RunWorkers(ctx, q, 1, func(_ context.Context, item string) (backoff.Result, error) {
			switch item {
			case "panic":
				panic("boom")
			case "exit":
				runtime.Goexit()
			}
			cancel()
			return backoff.Result{}, nil
		}, backoff.WithPacer(l))
		close(done)
	}()
	waitFor(t, "RunWorkers to return after cancel", done)
	assert.Zero(t, l.Inflight(), "every permit ended")
	assert.Equal(t, 4, l.Limit(), "a handler's panic says nothing about the downstream")

	// Idle workers hold a permit while they wait for an item; the queue shut
	// down by someone else ends their wait, and their permits.
	q = backoff.NewRateLimitingQueue[string](newQLimiter[string](func(int) time.Duration { return 0 }), backoff.WithClock(newQueueClock()))
	done = make(chan struct{})
	go func() {
		backoff.RunWorkers(context.Background(), q, 3, func(context.Context, string) (backoff.Result, error) {
			return backoff.Result{}, nil
		}, backoff.WithPacer(l))
		close(done)
	}()
	q.ShutDown()
	waitFor(t, "RunWorkers to return after ShutDown", done)
	assert.Zero(t, l.Inflight(), "the idle workers' permits ended")
}

// TestRunWorkersWithCtxAlreadyDone: RunWorkers hands out nothing, leaves
// the queued items in the queue and shuts it down, however its workers and
// its own wait for ctx interleave.
func TestRunWorkersWithCtxAlreadyDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 30 {
		q := backoff.NewRateLimitingQueue[int](newQLimiter[int](func(int) time.Duration { return 0 }),
			backoff.WithClock(newQueueClock()))
		q.Add(1)
		backoff.RunWorkers(ctx, q, 2, func(context.Context, int) (backoff.Result, error) {
			t.Error("an item was handed out after ctx ended")
			return backoff.Result{}, nil
		})
		require.True(t, q.ShuttingDown(), "RunWorkers shuts the queue down when ctx has ended")
		assert.Equal(t, 1, q.Len(), "the queued item stays")
	}
}

func TestRunWorkersReturnsWhenQueueShutsDown(t *testing.T) {
	q := backoff.NewRateLimitingQueue[int](newQLimiter[int](func(int) time.Duration { return 0 }),
		backoff.WithClock(newQueueClock()))
	for i := range 10 {
		q.Add(i)
	}
	q.ShutDown()
	var mu sync.Mutex
	var seen []int
	backoff.RunWorkers(context.Background(), q, 3, func(_ context.Context, item int) (backoff.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, item)
		return backoff.Result{}, nil
	})
	assert.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, seen, "queued items are processed first")
}

func TestRunWorkersPanicsOnBadArguments(t *testing.T) {
	q := backoff.NewRateLimitingQueue[int](newQLimiter[int](qExponential(time.Second)))
	handle := func(context.Context, int) (backoff.Result, error) { return backoff.Result{}, nil }
	assert.PanicsWithValue(t, "backoff: RunWorkers: workers must be at least 1, got 0", func() {
		backoff.RunWorkers(context.Background(), q, 0, handle)
	})
	assert.PanicsWithValue(t, "backoff: RunWorkers: handle must not be nil, got <nil>", func() {
		backoff.RunWorkers(context.Background(), q, 1, nil)
	})
	assert.PanicsWithValue(t, "backoff: RunWorkers: q must not be nil, got <nil>", func() {
		backoff.RunWorkers[int](context.Background(), nil, 1, handle)
	})
	// A nil ctx used to crash the process from a worker goroutine, where the
	// caller could not recover it; it now panics here, before any worker
	// starts.
	var nilCtx context.Context
	assert.PanicsWithValue(t, "backoff: RunWorkers: ctx must not be nil, got <nil>", func() {
		backoff.RunWorkers(nilCtx, q, 1, handle)
	})
}

// TestRunWorkersSaysWhenTheBudgetRefusesARequeue: a requeue that the retry
// budget refused is logged as such, with the delay it set, and counted in
// the DelayMetrics; an allowed one keeps the usual line.
func TestRunWorkersSaysWhenTheBudgetRefusesARequeue(t *testing.T) {
	fc := newQueueClock()
	var logs syncBuffer
	m := &recDelayMetrics{}
	budget := backoff.NewRetryBudget(0, 1, time.Second, backoff.WithClock(fc)) // one retry per second
	l := newQLimiter[string](func(int) time.Duration { return time.Millisecond })
	q := backoff.NewRateLimitingQueue[string](l, backoff.WithClock(fc), backoff.WithMetrics(m), backoff.WithRetryBudget(budget),
		backoff.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	items := []string{"first", "second", "again", "end"}
	for _, item := range items {
		q.Add(item)
	}
	ctx, cancel := context.WithCancel(context.Background())
	handle := func(_ context.Context, item string) (backoff.Result, error) {
		switch item {
		case "first", "second":
			return backoff.Result{}, errors.New("transient")
		case "again":
			return backoff.Result{Requeue: true}, nil
		}
		cancel()
		return backoff.Result{}, nil
	}
	done := make(chan struct{})
	go func() {
		backoff.RunWorkers(ctx, q, 1, handle)
		close(done)
	}()
	waitFor(t, "RunWorkers to return", done, fc)

	log := logs.String()
	assert.Contains(t, log, `level=ERROR msg="backoff: item failed; requeued with backoff" item=first error=transient requeues=1`)
	second := logLines(log, "second")
	require.Len(t, second, 1)
	assert.Contains(t, second[0], `level=ERROR msg="backoff: item failed; retry budget exhausted, item waits for the budget, not its backoff" item=second error=transient requeues=1 retry_budget_refused=true delay=`)
	again := logLines(log, "again")
	require.Len(t, again, 1)
	assert.Contains(t, again[0], `level=WARN msg="backoff: retry budget exhausted; item waits for the budget, not its backoff" item=again requeues=1 retry_budget_refused=true delay=`)
	assert.Equal(t, 2, m.refused)
}
