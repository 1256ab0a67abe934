package backoff_test

import (
	"fmt"
	"strings"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

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
