package controllerruntime

import (
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/retrykit/backoff"
)

// request is the item type of controller-runtime's controllers.
type request = reconcile.Request

// The rate limiters, both ways.
var (
	_ workqueue.TypedRateLimiter[request] = backoff.RateLimiter[request](nil)
	_ workqueue.TypedRateLimiter[request] = (*backoff.ItemExponentialFailureRateLimiter[request])(nil)
	_ workqueue.TypedRateLimiter[request] = (*backoff.ItemFastSlowRateLimiter[request])(nil)
	_ workqueue.TypedRateLimiter[request] = (*backoff.BucketRateLimiter[request])(nil)
	_ workqueue.TypedRateLimiter[request] = (*backoff.MaxOfRateLimiter[request])(nil)
	_ workqueue.TypedRateLimiter[request] = (*backoff.WithMaxWaitRateLimiter[request])(nil)

	_ backoff.RateLimiter[request] = workqueue.TypedRateLimiter[request](nil)
)

// The queues.
var (
	_ workqueue.TypedInterface[request]             = (*backoff.Queue[request])(nil)
	_ workqueue.TypedDelayingInterface[request]     = (*backoff.DelayingQueue[request])(nil)
	_ workqueue.TypedRateLimitingInterface[request] = (*backoff.RateLimitingQueue[request])(nil)
)

// The same for every item type, not only reconcile.Request.
func _[T comparable]() {
	var _ workqueue.TypedRateLimiter[T] = backoff.RateLimiter[T](nil)
	var _ backoff.RateLimiter[T] = workqueue.TypedRateLimiter[T](nil)
	var _ workqueue.TypedRateLimitingInterface[T] = (*backoff.RateLimitingQueue[T])(nil)
}

// newQueue has the type of controller.TypedOptions.NewQueue. The limiter it
// receives, a client-go TypedRateLimiter, is passed as is to
// NewRateLimitingQueue, which takes a backoff.RateLimiter: the two
// interfaces have one method set, so each converts to the other implicitly.
func newQueue(name string, limiter workqueue.TypedRateLimiter[request]) workqueue.TypedRateLimitingInterface[request] {
	return backoff.NewRateLimitingQueue(limiter, backoff.WithName(name))
}

// Both fit controller-runtime's controller options. The literal is built,
// once, when the package is initialized; it calls nothing.
var _ = controller.TypedOptions[request]{
	RateLimiter: backoff.RateLimiter[request](nil),
	NewQueue:    newQueue,
}
