package backoff_test

import (
	"fmt"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

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
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
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
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
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
