package controllerruntime_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/retrykit/backoff"
	crinterop "github.com/retrykit/backoff/interop/controllerruntime"
)

func object(name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
}

// TestControllerUsesPriorities runs a real controller-runtime controller on
// a queue from NewQueue. Its source adds three objects as controller-runtime's
// informers add the initial list (Create events with IsInInitialList, which
// handler.WithLowPriorityWhenUnchanged queues at handler.LowPriority), then
// a real change; all before the worker starts, since controller-runtime
// starts sources first. The real change is reconciled first, and the
// requeues follow reconcile.Result.Priority, or keep the priority the item
// was handed out with.
func TestControllerUsesPriorities(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reconciled := make(chan string, 16)
	attempts := map[string]int{} // one worker: no race
	reconciler := reconcile.TypedFunc[request](func(_ context.Context, req request) (reconcile.Result, error) {
		attempts[req.Name]++
		reconciled <- fmt.Sprint(req.Name, "#", attempts[req.Name])
		if attempts[req.Name] > 1 {
			return reconcile.Result{}, nil
		}
		switch req.Name {
		case "changed": // asks for a retry before everything else
			return reconcile.Result{Priority: ptr.To(50)}, errors.New("not yet")
		case "listed-1": // its retry keeps the low priority
			return reconcile.Result{}, errors.New("not yet")
		}
		return reconcile.Result{}, nil
	})
	// No delay between retries: the order is the queue's alone.
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[request](0, 0)
	ctrl, err := controller.NewTypedUnmanaged("prioritized", controller.TypedOptions[request]{
		Reconciler:         reconciler,
		RateLimiter:        limiter,
		NewQueue:           crinterop.NewQueue[request](),
		SkipNameValidation: ptr.To(true),
	})
	if err != nil {
		t.Fatalf("NewTypedUnmanaged: %v", err)
	}
	h := handler.WithLowPriorityWhenUnchanged[client.Object, request](&handler.EnqueueRequestForObject{})
	src := source.TypedFunc[request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[request]) error {
		if _, ok := q.(priorityqueue.PriorityQueue[request]); !ok {
			return fmt.Errorf("the controller's queue %T is not a PriorityQueue", q)
		}
		for _, name := range []string{"listed-1", "listed-2", "listed-3"} {
			h.Create(ctx, event.CreateEvent{Object: object(name), IsInInitialList: true}, q)
		}
		h.Create(ctx, event.CreateEvent{Object: object("changed")}, q)
		return nil
	})
	if err := ctrl.Watch(src); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	started := make(chan error, 1)
	go func() { started <- ctrl.Start(ctx) }()

	want := []string{"changed#1", "changed#2", "listed-1#1", "listed-2#1", "listed-3#1", "listed-1#2"}
	var got []string
	for len(got) < len(want) {
		select {
		case r := <-reconciled:
			got = append(got, r)
		case err := <-started:
			t.Fatalf("Start returned %v after %v", err, got)
		case <-ctx.Done():
			t.Fatalf("timed out after %v", got)
		}
	}
	cancel()
	if err := <-started; err != nil {
		t.Errorf("Start returned %v", err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("reconciled %v, want %v", got, want)
	}
}

func TestNewPriorityQueueAddWithOpts(t *testing.T) {
	fake := testingclock.NewFakeClock(epoch)
	q := crinterop.NewPriorityQueue[string]("q", workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
		backoff.WithClock(fake))
	defer q.ShutDown()
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(-100)}, "low")
	q.AddWithOpts(priorityqueue.AddOpts{}, "default")
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true, Priority: ptr.To(3)}, "limited")
	q.AddWithOpts(priorityqueue.AddOpts{After: 2 * time.Second, Priority: ptr.To(7)}, "after")
	fake.Step(time.Second)
	var got []string
	for q.Len() > 0 {
		item, prio, _ := q.GetWithPriority()
		got = append(got, fmt.Sprint(item, "@", prio))
		q.Done(item)
	}
	if want := []string{"limited@3", "default@0", "low@-100"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if q.NumRequeues("limited") != 1 {
		t.Errorf("NumRequeues = %d, want 1: RateLimited asks the limiter", q.NumRequeues("limited"))
	}
	fake.Step(time.Second)
	if item, prio, _ := q.GetWithPriority(); item != "after" || prio != 7 {
		t.Errorf("got %v@%d, want after@7", item, prio)
	}
}

// controller-runtime's priority queue runs goroutines of its own per queue;
// ours runs none, also while items wait in it at a priority: one queued at
// handler.LowPriority and one waiting an hour at priority 10.
func TestIdlePriorityQueuesRunNoGoroutine(t *testing.T) {
	limiter := workqueue.DefaultTypedControllerRateLimiter[request]()
	var later request
	later.Name = "later"
	before := runtime.NumGoroutine()
	queues := make([]priorityqueue.PriorityQueue[request], 10_000)
	for i := range queues {
		queues[i] = crinterop.NewPriorityQueue(fmt.Sprint("idle-", i), limiter)
		queues[i].AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, request{})
		queues[i].AddWithOpts(priorityqueue.AddOpts{After: time.Hour, Priority: ptr.To(10)}, later)
	}
	if got := queues[0].Len(); got != 1 {
		t.Fatalf("Len() = %d, want 1 (the waiting item is not counted)", got)
	}
	if got := runtime.NumGoroutine() - before; got > 0 {
		t.Errorf("10,000 idle queues run %d goroutines", got)
	}
	for _, q := range queues {
		q.ShutDown()
	}
}

// TestPriorityQueueIsAScheduler: the queue NewQueue hands to
// controller-runtime reschedules, cancels and parks items through a type
// assertion, with the semantics of backoff's queues.
func TestPriorityQueueIsAScheduler(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	newQueue := crinterop.NewQueue[request](backoff.WithClock(fc))
	q := newQueue("things", backoff.NewItemExponentialFailureRateLimiter[request](time.Second, time.Minute, backoff.WithClock(fc)))
	defer q.ShutDown()
	s, ok := q.(crinterop.Scheduler[request])
	if !ok {
		t.Fatal("the queue of NewQueue is not a Scheduler")
	}
	a := request{NamespacedName: client.ObjectKey{Namespace: "default", Name: "a"}}
	q.AddAfter(a, time.Minute)
	s.Reschedule(a, 10*time.Minute)
	if d, ok := s.WaitingFor(a); !ok || d != 10*time.Minute {
		t.Fatalf("WaitingFor = %v, %v, want 10m, true", d, ok)
	}
	if !s.CancelWaiting(a) {
		t.Fatal("CancelWaiting found no pending requeue")
	}
	cacheSeen := false
	s.Park(a, func() bool { return cacheSeen }, time.Minute)
	q.Add(a) // the event of the controller's own write
	if q.Len() != 0 || !s.Parked(a) {
		t.Fatalf("Len = %d, Parked = %v: want the item held", q.Len(), s.Parked(a))
	}
	cacheSeen = true
	s.Wake()
	if q.Len() != 1 {
		t.Fatalf("Len after Wake = %d, want 1", q.Len())
	}
}
