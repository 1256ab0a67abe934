package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
	testingclock "k8s.io/utils/clock/testing"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"
)

// Retry calls fn until it succeeds. Here the fake clock is stepped from the
// notify hook, which Retry calls once the wait is set: each wait then ends at
// once, and the attempts carry the fake times they would have had.
func ExampleRetry() {
	clk := testingclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	s := backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 5}
	attempt := 0
	err := backoff.Retry(context.Background(), s, func(context.Context) error {
		attempt++
		fmt.Printf("attempt %d at %v\n", attempt, clk.Since(start))
		if attempt < 4 {
			return errors.New("connection refused")
		}
		return nil
	}, backoff.WithClock(clk), backoff.WithNotify(func(_ int, _ error, next time.Duration) {
		clk.Step(next)
	}))
	fmt.Println("err:", err)
	// Output:
	// attempt 1 at 0s
	// attempt 2 at 10ms
	// attempt 3 at 30ms
	// attempt 4 at 70ms
	// err: <nil>
}

// A Permanent error ends Retry at once: it is returned as fn returned it.
func ExampleRetry_permanent() {
	errNotFound := errors.New("not found")
	attempts := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Duration: time.Second, Steps: 5}, func(context.Context) error {
		attempts++
		return backoff.Permanent(errNotFound)
	})
	fmt.Println(attempts, err, errors.Is(err, errNotFound), backoff.IsPermanent(err))
	// Output:
	// 1 not found true true
}

// When attempts run out, the error says how many were made, and errors.Is
// reaches both the last error and the reason.
func ExampleRetry_exhausted() {
	errBusy := errors.New("busy")
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 3}, func(context.Context) error {
		return errBusy
	})
	var re *backoff.RetryError
	fmt.Println(err)
	fmt.Println(errors.As(err, &re), re.Attempts, errors.Is(err, errBusy), errors.Is(err, backoff.ErrAttemptsExhausted))
	// Output:
	// backoff: retry stopped after 3 attempts: attempts exhausted; last error: busy
	// true 3 true true
}

// A server's Retry-After hint replaces the scheduled wait; a hint above the
// bound (WithMaxRetryAfter, DefaultMaxRetryAfter by default) waits the bound.
func ExampleRetryAfter() {
	clk := testingclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	s := backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 4}
	hints := []time.Duration{2 * time.Second, 24 * time.Hour}
	attempt := 0
	err := backoff.Retry(context.Background(), s, func(context.Context) error {
		attempt++
		if attempt <= len(hints) {
			return backoff.RetryAfter(hints[attempt-1], errors.New("503 Service Unavailable"))
		}
		return errors.New("500 Internal Server Error")
	}, backoff.WithClock(clk), backoff.WithMaxRetryAfter(time.Minute),
		backoff.WithNotify(func(attempt int, err error, next time.Duration) {
			fmt.Printf("attempt %d: %v; next in %v\n", attempt, err, next)
			clk.Step(next)
		}))
	fmt.Println(err)
	// Output:
	// attempt 1: 503 Service Unavailable; next in 2s
	// attempt 2: 503 Service Unavailable; next in 1m0s
	// attempt 3: 500 Internal Server Error; next in 40ms
	// backoff: retry stopped after 4 attempts: attempts exhausted; last error: 500 Internal Server Error
}

func ExampleRetryValue() {
	calls := 0
	v, err := backoff.RetryValue(context.Background(), backoff.Schedule{Steps: 3}, func(context.Context) (int, error) {
		calls++
		if calls < 2 {
			return 0, errors.New("not yet")
		}
		return 42, nil
	})
	fmt.Println(v, err, calls)
	// Output:
	// 42 <nil> 2
}

// OnError is client-go's retry.OnError: it returns fn's last error, not a
// wrapper, when the attempts run out.
func ExampleOnError() {
	errConflict := errors.New("the object has been modified")
	err := backoff.OnError(backoff.Schedule{Steps: 3}, func(err error) bool { return err == errConflict },
		func() error { return errConflict })
	fmt.Println(err)
	// Output:
	// the object has been modified
}

// A Backoff gates a retry per id: each failure doubles the id's delay, up to
// the maximum.
func ExampleNewBackOff() {
	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	b := backoff.NewBackOff(10*time.Second, 300*time.Second, backoff.WithClock(clock))

	for range 7 {
		b.Next("default/web_app", clock.Now()) // the container crashed
		fmt.Printf("attempt %d: wait %v\n", b.Attempts("default/web_app"), b.Get("default/web_app"))
	}
	// Output:
	// attempt 1: wait 10s
	// attempt 2: wait 20s
	// attempt 3: wait 40s
	// attempt 4: wait 1m20s
	// attempt 5: wait 2m40s
	// attempt 6: wait 5m0s
	// attempt 7: wait 5m0s
}

// IsInBackOffSince tells whether work that failed at some time must still
// wait: this is how kubelet decides to restart a crashed container.
func ExampleBackoff_IsInBackOffSince() {
	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	b := backoff.NewBackOff(5*time.Second, time.Minute, backoff.WithClock(clock))
	const id = "sync-job"

	failedAt := clock.Now()
	b.Next(id, failedAt) // 5 s from now
	for _, after := range []time.Duration{time.Second, 4 * time.Second, 5 * time.Second} {
		clock.SetTime(failedAt.Add(after))
		fmt.Printf("%v after the failure: in backoff %v\n", after, b.IsInBackOffSince(id, failedAt))
	}

	// An entry not updated for more than 2×max expires: the next failure
	// starts again from the initial delay.
	clock.Step(2*time.Minute + time.Second)
	b.Next(id, clock.Now())
	fmt.Println("after a quiet spell:", b.Get(id))
	// Output:
	// 1s after the failure: in backoff true
	// 4s after the failure: in backoff true
	// 5s after the failure: in backoff false
	// after a quiet spell: 5s
}

// newAutoStepClock returns a fake clock on which waiting takes no time (see
// backofftest.AutoStepClock): it lets the Examples run the loop helpers
// synchronously, with fake timestamps, and print deterministic output.
func newAutoStepClock() *backofftest.AutoStepClock {
	return backofftest.NewAutoStepClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
}

func ExampleUntil() {
	clk := newAutoStepClock()
	start := clk.Now()
	stop := make(chan struct{})
	runs := 0
	backoff.Until(func() {
		runs++
		fmt.Printf("run %d at %v\n", runs, clk.Since(start))
		if runs == 3 {
			close(stop) // checked before every run: there is no fourth
		}
	}, time.Second, stop, backoff.WithClock(clk))
	// Output:
	// run 1 at 0s
	// run 2 at 1s
	// run 3 at 2s
}

// A sliding loop starts the period when f returns; a non-sliding one when f
// starts. Here f takes 300ms.
func ExampleNonSlidingUntil() {
	for _, sliding := range []bool{true, false} {
		clk := newAutoStepClock()
		start := clk.Now()
		stop := make(chan struct{})
		var at []time.Duration
		f := func() {
			at = append(at, clk.Since(start))
			clk.Step(300 * time.Millisecond) // f's run time
			if len(at) == 3 {
				close(stop)
			}
		}
		if sliding {
			backoff.Until(f, time.Second, stop, backoff.WithClock(clk))
		} else {
			backoff.NonSlidingUntil(f, time.Second, stop, backoff.WithClock(clk))
		}
		fmt.Printf("sliding %-5v runs at %v\n", sliding, at)
	}
	// Output:
	// sliding true  runs at [0s 1.3s 2.6s]
	// sliding false runs at [0s 1s 2s]
}

func ExampleJitterUntil() {
	clk := newAutoStepClock()
	stop := make(chan struct{})
	last := clk.Now()
	runs := 0
	backoff.JitterUntil(func() {
		runs++
		if runs > 1 {
			wait := clk.Since(last)
			fmt.Printf("run %d after a wait in [1s, 1.5s): %v\n", runs, wait >= time.Second && wait < 1500*time.Millisecond)
		}
		last = clk.Now()
		if runs == 4 {
			close(stop)
		}
	}, time.Second, 0.5, true, stop, backoff.WithClock(clk))
	// Output:
	// run 2 after a wait in [1s, 1.5s): true
	// run 3 after a wait in [1s, 1.5s): true
	// run 4 after a wait in [1s, 1.5s): true
}

func ExampleSchedule_Step() {
	s := backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 3, Cap: 3 * time.Second}
	for i := 0; i < 4; i++ {
		fmt.Printf("%v (Steps left: %d)\n", s.Step(), s.Steps)
	}
	// Output:
	// 1s (Steps left: 2)
	// 2s (Steps left: 0)
	// 3s (Steps left: 0)
	// 3s (Steps left: 0)
}

func ExampleExponentialBackoffWithContext() {
	clk := newAutoStepClock()
	start := clk.Now()
	s := backoff.Schedule{Duration: 10 * time.Millisecond, Factor: 2, Steps: 4}
	err := backoff.ExponentialBackoffWithContext(context.Background(), s, func(context.Context) (bool, error) {
		fmt.Println("check at", clk.Since(start))
		return false, nil // never ready
	}, backoff.WithClock(clk))
	fmt.Println(err, backoff.Interrupted(err))
	// Output:
	// check at 0s
	// check at 10ms
	// check at 30ms
	// check at 70ms
	// backoff: timed out waiting for the condition true
}

// ExponentialBackoff gives up early when its wait reaches the cap
// (kubernetes#131122): here after 2 of 10 checks. Retry does not.
func ExampleExponentialBackoff_capQuirk() {
	clk := newAutoStepClock()
	s := backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 10, Cap: 3 * time.Second}
	checks := 0
	err := backoff.ExponentialBackoff(s, func() (bool, error) { checks++; return false, nil }, backoff.WithClock(clk))
	fmt.Println("ExponentialBackoff:", checks, "checks:", err)

	attempts := 0
	err = backoff.Retry(context.Background(), s, func(context.Context) error { attempts++; return fmt.Errorf("not ready") },
		backoff.WithClock(clk))
	fmt.Println("Retry:", attempts, "attempts:", err)
	// Output:
	// ExponentialBackoff: 2 checks: backoff: timed out waiting for the condition
	// Retry: 10 attempts: backoff: retry stopped after 10 attempts: attempts exhausted; last error: not ready
}

func ExamplePollUntilContextTimeout() {
	clk := newAutoStepClock()
	start := clk.Now()
	err := backoff.PollUntilContextTimeout(context.Background(), time.Second, 3500*time.Millisecond, true,
		func(context.Context) (bool, error) {
			fmt.Println("check at", clk.Since(start))
			return false, nil
		}, backoff.WithClock(clk))
	fmt.Println(err)
	// Output:
	// check at 0s
	// check at 1s
	// check at 2s
	// check at 3s
	// context deadline exceeded
}

// Items added with a delay become ready when the clock reaches their ready
// time, earliest first; with a FakeClock, as soon as Step passes it.
func ExampleNewDelayingQueue() {
	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	q := backoff.NewDelayingQueue[string](backoff.WithClock(clock))
	defer q.ShutDown()

	q.AddAfter("default/late", 3*time.Second)
	q.AddAfter("default/early", time.Second)
	q.AddAfter("default/early", 2*time.Second) // already waiting: the earlier time wins
	q.Add("default/now")

	for range 4 {
		for q.Len() > 0 {
			item, shutdown := q.Get()
			if shutdown {
				break
			}
			fmt.Printf("t=%v %s\n", clock.Since(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)), item)
			q.Done(item)
		}
		clock.Step(time.Second)
	}
	// Output:
	// t=0s default/now
	// t=1s default/early
	// t=3s default/late
}

// Add of an item that waits for a delay queues it now and cancels the wait,
// so the item runs once (kubernetes#126027).
func ExampleQueue_Add() {
	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	q := backoff.NewDelayingQueue[string](backoff.WithClock(clock))
	defer q.ShutDown()

	q.AddAfter("default/web", time.Hour) // a periodic resync
	q.Add("default/web")                 // an event comes first
	fmt.Println("queued:", q.Len())
	_, waits := q.NextReadyAt()
	fmt.Println("still waiting:", waits)
	// Output:
	// queued: 1
	// still waiting: false
}

// GetContext stops waiting when its context ends, and leaves the queue
// running (kubernetes#131185).
func ExampleQueue_GetContext() {
	q := backoff.NewQueue[string]()
	defer q.ShutDown()

	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Millisecond, errors.New("leader election lost"))
	defer cancel()
	_, err := q.GetContext(ctx) // nothing queued: waits until ctx ends
	fmt.Println(err)
	fmt.Println("queue shut down:", q.ShuttingDown())
	// Output:
	// leader election lost
	// queue shut down: false
}

// Items that still wait for their delay when the queue shuts down are not
// lost: TakeWaiting returns them with their ready times.
func ExampleDelayingQueue_TakeWaiting() {
	start := time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)
	clock := testingclock.NewFakeClock(start)
	q := backoff.NewDelayingQueue[string](backoff.WithClock(clock))
	q.AddAfter("default/db", 10*time.Minute)
	q.AddAfter("default/web", 30*time.Second)
	q.ShutDown()

	for _, w := range q.TakeWaiting() {
		fmt.Printf("%s was due in %v\n", w.Item, w.ReadyAt.Sub(start))
	}
	// Output:
	// default/web was due in 30s
	// default/db was due in 10m0s
}

// RunWorkers drains a queue with controller-runtime's rules: an error
// requeues the item with the limiter's delay, a permanent error drops it, a
// RequeueAfter schedules it, success forgets it.
func ExampleRunWorkers() {
	start := time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)
	clock := testingclock.NewFakeClock(start)
	limiter := backoff.DefaultControllerRateLimiter[string](backoff.WithClock(clock))
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // deterministic output
			}
			return a
		},
	}))
	q := backoff.NewRateLimitingQueue[string](limiter, backoff.WithClock(clock), backoff.WithLogger(logger), backoff.WithName("demo"))
	for _, item := range []string{"default/ok", "default/flaky", "default/broken", "default/cron", "stop"} {
		q.Add(item)
	}

	// The real-time bound only keeps the example from hanging if "stop"
	// never reaches the worker; "stop" ends it at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	backoff.RunWorkers(ctx, q, 1, func(ctx context.Context, item string) (backoff.Result, error) {
		switch item {
		case "default/flaky":
			return backoff.Result{}, errors.New("connection refused")
		case "default/broken":
			return backoff.Result{}, backoff.Permanent(errors.New("invalid spec"))
		case "default/cron":
			return backoff.Result{RequeueAfter: time.Hour}, nil
		case "stop":
			cancel() // RunWorkers shuts the queue down and returns
		}
		return backoff.Result{}, nil
	})

	for _, w := range q.TakeWaiting() {
		fmt.Printf("%s retries in %v\n", w.Item, w.ReadyAt.Sub(start))
	}
	// Output:
	// level=ERROR msg="backoff: item failed; requeued with backoff" queue=demo item=default/flaky error="connection refused" requeues=1
	// level=ERROR msg="backoff: item failed permanently; not requeued" queue=demo item=default/broken error="invalid spec"
	// default/flaky retries in 5ms
	// default/cron retries in 1h0m0s
}

// A controller's queue: a worker that fails on an item requeues it with
// AddRateLimited, and the item comes back after the limiter's delay, 5 ms,
// 10 ms, 20 ms … with DefaultControllerRateLimiter.
func ExampleNewRateLimitingQueue() {
	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	q := backoff.NewRateLimitingQueue[string](backoff.DefaultControllerRateLimiter[string](backoff.WithClock(clock)),
		backoff.WithClock(clock))
	defer q.ShutDown()

	q.Add("default/cluster")
	// Get blocks until an item is ready; Len says whether one is, so this
	// loop never waits for a time that the fake clock will not reach.
	for attempt := 1; q.Len() > 0; attempt++ {
		item, shutdown := q.Get()
		if shutdown {
			break
		}
		if attempt == 5 {
			q.Forget(item) // the reconcile succeeded
			q.Done(item)
			fmt.Println("after success:", q.NumRequeues(item), "requeues")
			break
		}
		failedAt := clock.Now()
		q.AddRateLimited(item) // the reconcile failed
		q.Done(item)
		readyAt, _ := q.NextReadyAt()
		fmt.Printf("failure %d: back in %v\n", q.NumRequeues(item), readyAt.Sub(failedAt))
		clock.SetTime(readyAt)
	}
	// Output:
	// failure 1: back in 5ms
	// failure 2: back in 10ms
	// failure 3: back in 20ms
	// failure 4: back in 40ms
	// after success: 0 requeues
}

// printMetrics prints what a queue reports; a real implementation would
// update Prometheus or OpenTelemetry instruments.
type printMetrics struct {
	backoff.NopQueueMetrics // leaves out what it does not implement
}

func (printMetrics) SetDepth(n int)                 { fmt.Println("depth", n) }
func (printMetrics) ObserveLatency(d time.Duration) { fmt.Println("waited", d) }

func ExampleWithMetrics() {
	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	q := backoff.NewQueue[string](backoff.WithClock(clock), backoff.WithMetrics(printMetrics{}))
	q.Add("a")
	clock.Step(250 * time.Millisecond)
	for q.Len() > 0 { // Len first: Get would block if nothing were queued
		item, shutdown := q.Get()
		if shutdown {
			break
		}
		q.Done(item)
	}
	// Output:
	// depth 1
	// depth 0
	// waited 250ms
}

// The initial list goes in at a low priority, so that a real change added
// later is handed out first; a delayed item becomes ready at its priority.
func ExampleRateLimitingQueue_AddWithOptions() {
	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	opts := []backoff.Option{backoff.WithClock(clock)} // one clock for the queue and its limiter
	q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](opts...), opts...)
	defer q.ShutDown()

	q.AddWithOptions(backoff.AddOptions{Priority: -100}, "default/a", "default/b", "default/c")
	q.Add("default/b") // a real change: priority 0, ahead of the list
	q.AddWithOptions(backoff.AddOptions{After: time.Second, Priority: 10}, "default/urgent")
	clock.Step(time.Second)

	for q.Len() > 0 {
		item, priority, shutdown := q.GetWithPriority()
		if shutdown {
			break
		}
		fmt.Println(priority, item)
		q.Done(item)
	}
	// Output:
	// 10 default/urgent
	// 0 default/b
	// -100 default/a
	// -100 default/c
}

// With fairness, one namespace's backlog does not hold another's items
// back: each namespace takes its turn.
func ExampleWithFairness() {
	namespace := func(key string) string { return strings.Split(key, "/")[0] }
	q := backoff.NewQueue[string](backoff.WithFairness(namespace))
	defer q.ShutDown()

	for _, key := range []string{"busy/1", "busy/2", "busy/3", "busy/4", "quiet/1", "other/1"} {
		q.Add(key)
	}
	for q.Len() > 0 {
		item, shutdown := q.Get()
		if shutdown {
			break
		}
		fmt.Println(item)
		q.Done(item)
	}
	// Output:
	// busy/1
	// quiet/1
	// other/1
	// busy/2
	// busy/3
	// busy/4
}

// An item that keeps failing waits twice as long each time, up to the cap;
// Forget starts it over.
func ExampleNewItemExponentialFailureRateLimiter() {
	l := backoff.NewItemExponentialFailureRateLimiter[string](100*time.Millisecond, time.Second)
	fmt.Println(whenEach(l, "default/web", "default/web", "default/web", "default/web", "default/web", "default/web"))
	fmt.Println("requeues:", l.NumRequeues("default/web"))

	l.Forget("default/web") // processed successfully
	fmt.Println("after Forget:", l.When("default/web"))
	// Output:
	// [100ms 200ms 400ms 800ms 1s 1s]
	// requeues: 6
	// after Forget: 100ms
}

// The requeue delays of a controller whose reconcile keeps failing, with
// controller-runtime's default limiter: 5 ms doubling to 655.36 s, then
// 1000 s.
func ExampleDefaultControllerRateLimiter() {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := backoff.DefaultControllerRateLimiter[string](backoff.WithClock(clk))
	for failure := 1; failure <= 20; failure++ {
		d := l.When("default/web")
		if failure <= 3 || failure >= 17 {
			fmt.Printf("failure %2d: %v\n", failure, d)
		}
	}

	// Then 120 other items fail at the same instant. The bucket (bursts of
	// 100) has 80 tokens left after default/web's 20 failures: 80 items wait
	// their own 5 ms, then each waits 100 ms longer than the one before.
	for item := 1; item <= 120; item++ {
		d := l.When(fmt.Sprint("default/item-", item))
		if item >= 80 && item <= 82 || item == 120 {
			fmt.Printf("item %3d: %v\n", item, d)
		}
	}
	// Output:
	// failure  1: 5ms
	// failure  2: 10ms
	// failure  3: 20ms
	// failure 17: 5m27.68s
	// failure 18: 10m55.36s
	// failure 19: 16m40s
	// failure 20: 16m40s
	// item  80: 5ms
	// item  81: 100ms
	// item  82: 200ms
	// item 120: 4s
}

// A bucket shared by all items: a burst at once, then a steady rate.
func ExampleNewBucketRateLimiter() {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := backoff.NewBucketRateLimiter[string](2, 3, backoff.WithClock(clk)) // 2 per second, bursts of 3
	fmt.Println(whenEach(l, "a", "b", "c", "d", "e"))
	clk.Step(2 * time.Second) // 4 tokens earned; 2 were owed
	fmt.Println(whenEach(l, "f", "g", "h"))
	// Output:
	// [0s 0s 0s 500ms 1s]
	// [0s 0s 500ms]
}

// whenEach returns l's delay for each item in turn.
func whenEach(l backoff.RateLimiter[string], items ...string) []time.Duration {
	var ds []time.Duration
	for _, item := range items {
		ds = append(ds, l.When(item))
	}
	return ds
}

// A few quick retries, then slow ones.
func ExampleNewItemFastSlowRateLimiter() {
	l := backoff.NewItemFastSlowRateLimiter[string](time.Second, time.Minute, 3)
	fmt.Println(whenEach(l, "x", "x", "x", "x", "x"))
	// Output:
	// [1s 1s 1s 1m0s 1m0s]
}

// The longest of two limiters' delays, capped.
// The delay is the longest any part asks for: here a fast-slow limiter holds
// the first retries at 3 s, then the exponential one takes over.
func ExampleNewMaxOfRateLimiter() {
	l := backoff.NewMaxOfRateLimiter[string](
		backoff.NewItemExponentialFailureRateLimiter[string](time.Second, time.Hour),
		backoff.NewItemFastSlowRateLimiter[string](3*time.Second, 5*time.Second, 2),
	)
	fmt.Println(whenEach(l, "x", "x", "x", "x", "x"))
	fmt.Println("requeues:", l.NumRequeues("x"))
	l.Forget("x")
	fmt.Println("after Forget:", l.NumRequeues("x"))
	// Output:
	// [3s 3s 5s 8s 16s]
	// requeues: 5
	// after Forget: 0
}

func ExampleNewWithMaxWaitRateLimiter() {
	l := backoff.NewWithMaxWaitRateLimiter[string](
		backoff.NewMaxOfRateLimiter[string](
			backoff.NewItemExponentialFailureRateLimiter[string](time.Second, time.Hour),
			backoff.NewItemFastSlowRateLimiter[string](3*time.Second, 5*time.Second, 2),
		),
		10*time.Second,
	)
	fmt.Println(whenEach(l, "x", "x", "x", "x", "x"))
	// Output:
	// [3s 3s 5s 8s 10s]
}

// A controller that never calls Forget keeps one count per item it ever saw;
// a bound makes room by dropping the least recently failed item.
func ExampleWithMaxTrackedItems() {
	l := backoff.NewItemExponentialFailureRateLimiter[string](time.Second, time.Hour, backoff.WithMaxTrackedItems(2))
	l.When("a")
	l.When("a")
	l.When("b")
	l.When("c") // full: drops a, whose last failure is the oldest
	fmt.Println(l.NumRequeues("a"), l.NumRequeues("b"), l.NumRequeues("c"))
	fmt.Println("a starts over:", l.When("a"))
	// Output:
	// 0 1 1
	// a starts over: 1s
}

// Pacing calls to an API that allows 10 requests per second with bursts of
// 5: the first five go at once, then one every 100 ms. Reserve says how long
// each call must wait; a real caller would sleep that long, or call Wait,
// which does both. The fake clock stands in for the passing time.
func ExampleLimiter() {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	api := backoff.NewLimiter(10, 5, backoff.WithClock(clk))
	for call := 1; call <= 8; call++ {
		r := api.Reserve()
		clk.Step(r.Delay()) // in production: time.Sleep(r.Delay()), or api.Wait(ctx)
		fmt.Printf("call %d at %v\n", call, clk.Since(start))
	}
	fmt.Println("allowed at once now:", api.Allow())
	// Output:
	// call 1 at 0s
	// call 2 at 0s
	// call 3 at 0s
	// call 4 at 0s
	// call 5 at 0s
	// call 6 at 100ms
	// call 7 at 200ms
	// call 8 at 300ms
	// allowed at once now: false
}

// Per-client limits in an HTTP handler: each client gets 1 request per
// second with bursts of 2, and a client over its limit gets 429 while the
// others are served. The handler is called in-process.
func ExampleKeyedLimiter() {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	perClient := backoff.NewKeyedLimiter[string](1, 2, backoff.WithClock(clk), backoff.WithMaxKeys(100_000))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !perClient.Allow(r.Header.Get("X-Client-ID")) {
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	get := func(client string) int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-Client-ID", client)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code
	}
	fmt.Println("alice:", get("alice"), get("alice"), get("alice"))
	fmt.Println("bob:", get("bob"))
	clk.Step(time.Second)
	fmt.Println("alice a second later:", get("alice"), get("alice"))
	// Output:
	// alice: 200 200 429
	// bob: 200
	// alice a second later: 200 429
}

// A budget of 10% of requests (and no floor) refuses the second retry after
// ten requests, until the requests that paid for the first leave the window.
func ExampleNewRetryBudget() {
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	budget := backoff.NewRetryBudget(0.1, 0, 10*time.Second, backoff.WithClock(fc))
	for range 10 {
		budget.RecordRequest()
	}
	fmt.Println(budget.TryRetry(), budget.TryRetry())
	fmt.Printf("%+v\n", budget.Snapshot())
	// Output:
	// true false
	// {Requests:10 Retries:1 Refused:1 Balance:0}
}

// A Retry that shares a budget returns at once when the budget refuses its
// next attempt, with an error that says so and still carries the last error.
func ExampleWithRetryBudget() {
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	budget := backoff.NewRetryBudget(0.1, 0, 10*time.Second, backoff.WithClock(fc))
	errDown := errors.New("dependency down")
	attempts := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Duration: time.Second, Steps: 5},
		func(context.Context) error { attempts++; return errDown },
		backoff.WithClock(fc), backoff.WithRetryBudget(budget),
		// Steps the fake clock through any wait, as a real one would pass.
		backoff.WithNotify(func(_ int, _ error, next time.Duration) { fc.Step(next) }))
	var re *backoff.RetryError
	fmt.Println(attempts, errors.Is(err, backoff.ErrRetryBudgetExhausted), errors.Is(err, errDown), errors.As(err, &re))
	fmt.Println(err)
	// Output:
	// 1 true true true
	// backoff: retry stopped after 1 attempt: retry budget exhausted; last error: dependency down
}

// The Examples of this file cover the rest of the loop helpers, the
// BackoffManagers, jitter and the options that no main entry point's Example
// shows. Those that wait run on a backofftest.AutoStepClock, on which
// waiting takes no time; jittered delays are random, so they print
// whether each delay lies in its documented range.

// Forever is for work that lasts as long as the process. It never returns
// unless f panics; here f panics on its third run, which is how this Example
// ends.
func ExampleForever() {
	clk := newAutoStepClock()
	start := clk.Now()
	errDone := errors.New("done")
	func() {
		defer func() { fmt.Println("Forever ended by:", recover()) }()
		runs := 0
		backoff.Forever(func() {
			runs++
			fmt.Println("run at", clk.Since(start))
			if runs == 3 {
				panic(errDone)
			}
		}, time.Second, backoff.WithClock(clk))
	}()
	// Output:
	// run at 0s
	// run at 1s
	// run at 2s
	// Forever ended by: done
}

// UntilWithContext stops when its context ends; f receives the context.
func ExampleUntilWithContext() {
	clk := newAutoStepClock()
	start := clk.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := 0
	backoff.UntilWithContext(ctx, func(ctx context.Context) {
		runs++
		fmt.Println("run at", clk.Since(start))
		if runs == 3 {
			cancel() // checked before every run: there is no fourth
		}
	}, time.Second, backoff.WithClock(clk))
	fmt.Println("runs:", runs)
	// Output:
	// run at 0s
	// run at 1s
	// run at 2s
	// runs: 3
}

// The period of a non-sliding loop includes f's run time: an f that takes
// 300ms still starts every second.
func ExampleNonSlidingUntilWithContext() {
	clk := newAutoStepClock()
	start := clk.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := 0
	backoff.NonSlidingUntilWithContext(ctx, func(ctx context.Context) {
		runs++
		fmt.Println("run at", clk.Since(start))
		clk.Step(300 * time.Millisecond) // f's run time
		if runs == 3 {
			cancel()
		}
	}, time.Second, backoff.WithClock(clk))
	// Output:
	// run at 0s
	// run at 1s
	// run at 2s
}

// Each wait of a jittered loop is drawn afresh from [period, period +
// factor·period); with factor 0.2 and a period of 10s, from [10s, 12s).
func ExampleJitterUntilWithContext() {
	clk := newAutoStepClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	last := clk.Now()
	runs := 0
	backoff.JitterUntilWithContext(ctx, func(ctx context.Context) {
		runs++
		if runs > 1 {
			wait := clk.Since(last)
			fmt.Printf("run %d after a wait in [10s, 12s): %v\n", runs, wait >= 10*time.Second && wait < 12*time.Second)
		}
		last = clk.Now()
		if runs == 3 {
			cancel()
		}
	}, 10*time.Second, 0.2, true, backoff.WithClock(clk))
	// Output:
	// run 2 after a wait in [10s, 12s): true
	// run 3 after a wait in [10s, 12s): true
}

// BackoffUntil waits for the manager's timer between runs: with an
// exponential manager, the waits double up to the cap, as client-go's
// reflector paces its re-lists after failures.
func ExampleBackoffUntil() {
	clk := newAutoStepClock()
	start := clk.Now()
	manager := backoff.NewExponentialBackoffManager(time.Second, 4*time.Second, time.Minute, 2, 0, backoff.WithClock(clk))
	stop := make(chan struct{})
	runs := 0
	backoff.BackoffUntil(func() {
		runs++
		fmt.Println("run at", clk.Since(start))
		if runs == 5 {
			close(stop)
		}
	}, manager, true, stop)
	// Output:
	// run at 0s
	// run at 1s
	// run at 3s
	// run at 7s
	// run at 11s
}

// BackoffUntilWithContext is BackoffUntil with a context. Not sliding, the
// manager's wait starts when f starts, so f's 300ms are part of it.
func ExampleBackoffUntilWithContext() {
	clk := newAutoStepClock()
	start := clk.Now()
	manager := backoff.NewJitteredBackoffManager(time.Second, 0, backoff.WithClock(clk))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := 0
	backoff.BackoffUntilWithContext(ctx, func(ctx context.Context) {
		runs++
		fmt.Println("run at", clk.Since(start))
		clk.Step(300 * time.Millisecond) // f's run time
		if runs == 3 {
			cancel()
		}
	}, manager, false)
	// Output:
	// run at 0s
	// run at 1s
	// run at 2s
}

// timerWait returns how long the timer t makes its reader wait on an
// autoStepClock.
func timerWait(clk *backofftest.AutoStepClock, t interface{ C() <-chan time.Time }) time.Duration {
	before := clk.Now()
	<-t.C()
	return clk.Since(before)
}

// The delays of an exponential manager grow by the factor up to the cap and
// start again from the first after a quiet spell longer than resetDuration.
func ExampleNewExponentialBackoffManager() {
	clk := newAutoStepClock()
	m := backoff.NewExponentialBackoffManager(time.Second, 5*time.Second, time.Minute, 2, 0, backoff.WithClock(clk))
	var waits []time.Duration
	for range 5 {
		waits = append(waits, timerWait(clk, m.Backoff()))
	}
	fmt.Println(waits)

	clk.Step(2 * time.Minute) // quiet for longer than resetDuration
	fmt.Println("after a quiet spell:", timerWait(clk, m.Backoff()))
	// Output:
	// [1s 2s 4s 5s 5s]
	// after a quiet spell: 1s
}

// Every delay of a jittered manager is drawn afresh from [duration, duration
// + jitter·duration).
func ExampleNewJitteredBackoffManager() {
	clk := newAutoStepClock()
	m := backoff.NewJitteredBackoffManager(time.Second, 0.5, backoff.WithClock(clk))
	for range 3 {
		d := timerWait(clk, m.Backoff())
		fmt.Println("in [1s, 1.5s):", d >= time.Second && d < 1500*time.Millisecond)
	}
	// Output:
	// in [1s, 1.5s): true
	// in [1s, 1.5s): true
	// in [1s, 1.5s): true
}

// PollUntilContextCancel checks the condition every interval until it is
// met, it fails, or the context ends.
func ExamplePollUntilContextCancel() {
	clk := newAutoStepClock()
	start := clk.Now()
	checks := 0
	err := backoff.PollUntilContextCancel(context.Background(), time.Second, false, func(context.Context) (bool, error) {
		checks++
		fmt.Println("check at", clk.Since(start))
		return checks == 3, nil // ready on the third check
	}, backoff.WithClock(clk))
	fmt.Println("met:", err)

	// A context that ends stops the polling with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	err = backoff.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		cancel() // for example, the process is shutting down
		return false, nil
	}, backoff.WithClock(clk))
	fmt.Println("cancelled:", err)
	// Output:
	// check at 1s
	// check at 2s
	// check at 3s
	// met: <nil>
	// cancelled: context canceled
}

// ContextForChannel passes a stop channel where a context is expected.
func ExampleContextForChannel() {
	stop := make(chan struct{})
	ctx := backoff.ContextForChannel(stop)
	fmt.Println("before close:", ctx.Err())
	close(stop)
	<-ctx.Done()
	fmt.Println("after close:", ctx.Err())
	// Output:
	// before close: <nil>
	// after close: context canceled
}

// Jitter adds up to maxFactor·d to d; a factor ≤ 0 adds nothing (where
// apimachinery's wait.Jitter would use 1.0).
func ExampleJitter() {
	d := backoff.Jitter(time.Second, 0.1)
	fmt.Println("in [1s, 1.1s):", d >= time.Second && d < 1100*time.Millisecond)
	fmt.Println("factor 0:", backoff.Jitter(time.Second, 0))
	// Output:
	// in [1s, 1.1s): true
	// factor 0: 1s
}

// With jitter, each delay is at least twice the one before, at most 2.5
// times with maxJitterFactor 0.5, and never above the maximum.
func ExampleNewBackOffWithJitter() {
	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	b := backoff.NewBackOffWithJitter(time.Second, 10*time.Second, 0.5, backoff.WithClock(clock))
	const id = "default/web"

	b.Next(id, clock.Now())
	prev := b.Get(id)
	fmt.Println("attempt 1 in [1s, 1.5s):", prev >= time.Second && prev < 1500*time.Millisecond)
	for attempt := 2; attempt <= 3; attempt++ {
		b.Next(id, clock.Now())
		d := b.Get(id)
		fmt.Printf("attempt %d in [2×, 2.5×) the last: %v\n", attempt, d >= 2*prev && d < 2*prev+prev/2)
		prev = d
	}
	for range 2 {
		b.Next(id, clock.Now())
	}
	fmt.Println("attempt 5:", b.Get(id))
	// Output:
	// attempt 1 in [1s, 1.5s): true
	// attempt 2 in [2×, 2.5×) the last: true
	// attempt 3 in [2×, 2.5×) the last: true
	// attempt 5: 10s
}

// WithExpiry replaces the rule by which a Backoff forgets an id: here after
// one quiet minute instead of twice the maximum delay (two hours).
func ExampleWithExpiry() {
	clock := testingclock.NewFakeClock(time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC))
	oneQuietMinute := func(eventTime, lastUpdate time.Time, _ time.Duration) bool {
		return eventTime.Sub(lastUpdate) > time.Minute
	}
	byDefault := backoff.NewBackOff(time.Second, time.Hour, backoff.WithClock(clock))
	custom := backoff.NewBackOff(time.Second, time.Hour, backoff.WithClock(clock), backoff.WithExpiry(oneQuietMinute))
	for _, b := range []*backoff.Backoff{byDefault, custom} {
		for range 3 {
			b.Next("job", clock.Now())
		}
	}
	clock.Step(2 * time.Minute)
	for _, b := range []*backoff.Backoff{byDefault, custom} {
		b.Next("job", clock.Now())
	}
	fmt.Println("default rule:", byDefault.Get("job"))
	fmt.Println("one quiet minute:", custom.Get("job"))
	// Output:
	// default rule: 8s
	// one quiet minute: 1s
}

// With EqualJitter, each wait of Retry lies in [b/2, b) for the schedule's
// wait b: never an immediate retry, and clients that failed together spread
// out.
func ExampleWithJitterKind() {
	clk := testingclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	s := backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Steps: 4}
	b := s.Duration
	_ = backoff.Retry(context.Background(), s, func(context.Context) error {
		return errors.New("busy")
	}, backoff.WithClock(clk), backoff.WithJitterKind(backoff.EqualJitter),
		backoff.WithNotify(func(attempt int, _ error, next time.Duration) {
			fmt.Printf("wait %d in [%v, %v): %v\n", attempt, b/2, b, next >= b/2 && next < b)
			b *= 2
			clk.Step(next)
		}))
	// Output:
	// wait 1 in [50ms, 100ms): true
	// wait 2 in [100ms, 200ms): true
	// wait 3 in [200ms, 400ms): true
}

// WithMaxElapsedTime bounds when attempts may start: here the fourth would
// start 7s after the call, past the 5s budget, so Retry stops after three.
func ExampleWithMaxElapsedTime() {
	clk := newAutoStepClock()
	start := clk.Now()
	s := backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 10}
	err := backoff.Retry(context.Background(), s, func(context.Context) error {
		fmt.Println("attempt at", clk.Since(start))
		return errors.New("unavailable")
	}, backoff.WithClock(clk), backoff.WithMaxElapsedTime(5*time.Second))
	fmt.Println("budget spent:", errors.Is(err, backoff.ErrMaxElapsedTime))
	// Output:
	// attempt at 0s
	// attempt at 1s
	// attempt at 3s
	// budget spent: true
}

// WithRetryable retries only the errors it accepts: any other ends Retry at
// once and is returned as fn returned it.
func ExampleWithRetryable() {
	errTimeout := errors.New("i/o timeout")
	errDenied := errors.New("permission denied")
	calls := 0
	err := backoff.Retry(context.Background(), backoff.Schedule{Steps: 5}, func(context.Context) error {
		calls++
		if calls < 3 {
			return errTimeout
		}
		return errDenied
	}, backoff.WithRetryable(func(err error) bool { return errors.Is(err, errTimeout) }))
	fmt.Println(calls, "calls:", err)
	// Output:
	// 3 calls: permission denied
}

// WithPanicHandler keeps a loop alive through a panic in f: the handler gets
// the panic's value and the schedule carries on.
func ExampleWithPanicHandler() {
	clk := newAutoStepClock()
	start := clk.Now()
	stop := make(chan struct{})
	runs := 0
	backoff.Until(func() {
		runs++
		if runs == 3 {
			close(stop)
		}
		if runs == 2 {
			panic("nil map")
		}
		fmt.Println("run at", clk.Since(start))
	}, time.Second, stop, backoff.WithClock(clk), backoff.WithPanicHandler(func(r any) {
		fmt.Printf("recovered %q at %v\n", r, clk.Since(start))
	}))
	// Output:
	// run at 0s
	// recovered "nil map" at 1s
	// run at 2s
}

// WithRequeueJitter spreads the requeues of items that failed together: each
// delay is up to maxFactor longer than the limiter's, never past its cap.
func ExampleWithRequeueJitter() {
	l := backoff.NewItemExponentialFailureRateLimiter[string](100*time.Millisecond, time.Second,
		backoff.WithRequeueJitter(0.5))
	base := 100 * time.Millisecond
	for failure := 1; failure <= 3; failure++ {
		d := l.When("default/web")
		fmt.Printf("failure %d in [%v, %v): %v\n", failure, base, base+base/2, d >= base && d < base+base/2)
		base *= 2
	}
	l.When("default/web") // 800ms plus jitter, at most 1s
	fmt.Println("at the cap:", l.When("default/web"), l.When("default/web"))
	// Output:
	// failure 1 in [100ms, 150ms): true
	// failure 2 in [200ms, 300ms): true
	// failure 3 in [400ms, 600ms): true
	// at the cap: 1s 1s
}

// A job queue that stores how often a job failed can wait what Retry would
// before the next run.
func ExampleSchedule_Delay() {
	s := backoff.Schedule{Duration: time.Second, Factor: 2, Cap: 10 * time.Second}
	for n := 1; n <= 6; n++ {
		fmt.Printf("after failure %d: %v\n", n, s.Delay(n))
	}
	// Output:
	// after failure 1: 1s
	// after failure 2: 2s
	// after failure 3: 4s
	// after failure 4: 8s
	// after failure 5: 10s
	// after failure 6: 10s
}

// WithHedge sends a second attempt when the first has not answered after the
// delay, and takes whichever succeeds first. Here the first attempt steps
// the fake clock past the delay, as a slow server would take that long; the
// hedge answers at once and wins, and the first attempt is cancelled.
func ExampleWithHedge() {
	clk := testingclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	var mu sync.Mutex // fn runs on two goroutines at once
	calls := 0
	v, err := backoff.RetryValue(context.Background(), backoff.Schedule{Steps: 3}, func(ctx context.Context) (string, error) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			clk.Step(10 * time.Millisecond) // slow: the hedge starts at 10ms
			<-ctx.Done()
			fmt.Println("first attempt:", ctx.Err())
			return "", ctx.Err()
		}
		return fmt.Sprintf("hedge, sent at %v", clk.Since(start)), nil
	}, backoff.WithClock(clk), backoff.WithHedge(10*time.Millisecond))
	fmt.Println(v, err)
	// Output:
	// first attempt: context canceled
	// hedge, sent at 10ms <nil>
}
