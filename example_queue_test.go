package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

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
