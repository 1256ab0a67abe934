// Program controllerruntime is the release rehearsal's user of the module
// github.com/retrykit/backoff/interop/controllerruntime: the priority queue
// that controller-runtime's Options.NewQueue makes, on the library's
// controller rate limiter, handing out the higher priority first.
package main

import (
	"fmt"
	"os"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/controllerruntime"
)

func main() {
	newQueue := controllerruntime.NewQueue[string]()
	q, ok := newQueue("pods", backoff.DefaultControllerRateLimiter[string]()).(priorityqueue.PriorityQueue[string])
	if !ok {
		fail("NewQueue's queue is not a controller-runtime PriorityQueue")
	}
	defer q.ShutDown()
	q.Add("default/low")
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(10)}, "default/high")
	item, priority, _ := q.GetWithPriority()
	if item != "default/high" || priority != 10 {
		fail("first item %q at priority %d; want \"default/high\" at 10", item, priority)
	}
	q.Done(item)
	if _, ok := q.(controllerruntime.Scheduler[string]); !ok {
		fail("NewQueue's queue is not a Scheduler")
	}
	fmt.Printf("controllerruntime.NewQueue: %q first, at priority %d\n", item, priority)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "controllerruntime: "+format+"\n", args...)
	os.Exit(1)
}
