package controllerruntime_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/prommetrics"
)

// request is the item type of controller-runtime's controllers.
type request = reconcile.Request

// controllerName names the controllers under test, and so their queues and
// metric series.
const controllerName = "flaky"

// target is the object every test enqueues, and want the request that
// controller-runtime's EnqueueRequestForObject makes of it.
var (
	target = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	want   = request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}}
)

// call is one Reconcile call, as the reconciler reports it to the test.
type call struct {
	req     request
	attempt int
}

// handshakeQueue is a backoff queue that tells the test each time the
// controller calls Done: by then the controller has finished with the item
// (requeued it or forgotten it), so the test can look at the queue and
// limiter, and step the clock, with no worker in between. Everything else is
// the backoff queue's own method.
type handshakeQueue struct {
	*backoff.RateLimitingQueue[request]
	done chan<- request
	stop <-chan struct{}
}

func (q handshakeQueue) Done(item request) {
	q.RateLimitingQueue.Done(item)
	select {
	case q.done <- item:
	case <-q.stop:
	}
}

// harness is a running controller-runtime controller on a backoff queue and
// limiter.
type harness struct {
	ctx      context.Context
	limiter  backoff.RateLimiter[request]
	queue    *backoff.RateLimitingQueue[request] // the queue NewQueue made
	registry *prometheus.Registry                // its metrics
	calls    <-chan call
	done     <-chan request
	events   chan<- event.GenericEvent
	stop     func() error // ends the controller; returns what Start returned
}

// startController starts an unmanaged controller-runtime controller fed by
// a channel source, whose queue is a backoff.RateLimitingQueue on clk with a
// backoff.DefaultControllerRateLimiter on clk, and whose reconciler reports
// every call and answers with reconcile(attempt). It returns once the
// controller has made its queue. The controller is stopped at the end of
// the test if stop was not called.
func startController(t *testing.T, clk clock.WithDelayedExecution, reconcileFn func(attempt int) (reconcile.Result, error)) *harness {
	t.Helper()
	// Bounds the whole test: a handshake that never comes fails the test
	// instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)

	calls := make(chan call)
	done := make(chan request)
	attempts := 0 // the controller has one worker, so only it touches attempts
	reconciler := reconcile.TypedFunc[request](func(ctx context.Context, req request) (reconcile.Result, error) {
		attempts++
		select {
		case calls <- call{req, attempts}:
		case <-ctx.Done():
			return reconcile.Result{}, ctx.Err()
		}
		return reconcileFn(attempts)
	})

	limiter := backoff.DefaultControllerRateLimiter[request](backoff.WithClock(clk))
	metrics := prommetrics.New()
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)

	type made struct {
		name    string
		limiter workqueue.TypedRateLimiter[request]
		queue   *backoff.RateLimitingQueue[request]
	}
	queues := make(chan made, 1)
	ctrl, err := controller.NewTypedUnmanaged(controllerName, controller.TypedOptions[request]{
		Reconciler:  reconciler,
		RateLimiter: limiter,
		NewQueue: func(name string, rl workqueue.TypedRateLimiter[request]) workqueue.TypedRateLimitingInterface[request] {
			q := backoff.NewRateLimitingQueue(rl,
				backoff.WithClock(clk), backoff.WithName(name), backoff.WithMetrics(metrics.ForQueue(name)))
			queues <- made{name, rl, q}
			return handshakeQueue{RateLimitingQueue: q, done: done, stop: ctx.Done()}
		},
		// On by default; set here to show that NewQueue takes precedence.
		UsePriorityQueue: ptr.To(true),
		// Tests and -count=N make one name many times.
		SkipNameValidation: ptr.To(true),
	})
	if err != nil {
		cancel()
		t.Fatalf("NewTypedUnmanaged: %v", err)
	}
	events := make(chan event.GenericEvent)
	if err := ctrl.Watch(source.Channel(events, &handler.EnqueueRequestForObject{})); err != nil {
		cancel()
		t.Fatalf("Watch: %v", err)
	}

	started := make(chan error, 1)
	go func() { started <- ctrl.Start(ctx) }()
	var startErr error
	stopped := false
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			startErr = <-started
		}
		return startErr
	}
	t.Cleanup(func() { _ = stop() })

	var m made
	select {
	case m = <-queues:
	case err := <-started:
		stopped = true
		cancel()
		t.Fatalf("Start returned before making its queue: %v", err)
	case <-ctx.Done():
		t.Fatal("timed out waiting for the controller to make its queue")
	}
	if m.name != controllerName {
		t.Errorf("NewQueue got name %q, want %q", m.name, controllerName)
	}
	if any(m.limiter) != any(limiter) {
		t.Errorf("NewQueue got limiter %T, want the Options.RateLimiter", m.limiter)
	}
	return &harness{
		ctx: ctx, limiter: limiter, queue: m.queue, registry: registry,
		calls: calls, done: done, events: events, stop: stop,
	}
}

// send hands an event for target to the controller's channel source.
func (h *harness) send(t *testing.T) {
	t.Helper()
	select {
	case h.events <- event.GenericEvent{Object: target}:
	case <-h.ctx.Done():
		t.Fatal("timed out sending an event")
	}
}

// nextCall waits for the reconciler's next call and checks its number.
func (h *harness) nextCall(t *testing.T, attempt int) {
	t.Helper()
	select {
	case c := <-h.calls:
		if c.req != want || c.attempt != attempt {
			t.Fatalf("Reconcile(%v) attempt %d, want Reconcile(%v) attempt %d", c.req, c.attempt, want, attempt)
		}
	case <-h.ctx.Done():
		t.Fatalf("timed out waiting for Reconcile attempt %d", attempt)
	}
}

// nextDone waits until the controller calls Done for the item it holds.
func (h *harness) nextDone(t *testing.T) {
	t.Helper()
	select {
	case item := <-h.done:
		if item != want {
			t.Fatalf("Done(%v), want Done(%v)", item, want)
		}
	case <-h.ctx.Done():
		t.Fatal("timed out waiting for Done")
	}
}

// metric is the value of the counter or gauge metric of the controller's
// queue.
func (h *harness) metric(t *testing.T, metric string) float64 {
	t.Helper()
	families, err := h.registry.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == controllerName {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{name=%q}", metric, controllerName)
	return 0
}
