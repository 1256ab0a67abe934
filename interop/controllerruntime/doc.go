// Package controllerruntime shows, and checks at compile time and in its
// tests, that the queues and rate limiters of github.com/retrykit/backoff
// plug into sigs.k8s.io/controller-runtime and k8s.io/client-go unchanged:
// no adapter, no wrapper.
//
// The package exports two functions, [NewPriorityQueue] and [NewQueue],
// which make a backoff queue a controller-runtime priorityqueue.PriorityQueue
// (its AddOpts adapted to backoff.AddOptions), so that a controller keeps
// using priorities: the initial list at handler.LowPriority, and
// reconcile.Result.Priority. Its other source file holds the compile-time
// proof that
//
//   - every rate limiter of the backoff package is a client-go
//     workqueue.TypedRateLimiter[reconcile.Request], and client-go's rate
//     limiters are backoff.RateLimiter values in turn;
//   - backoff's Queue, DelayingQueue and RateLimitingQueue are client-go's
//     TypedInterface, TypedDelayingInterface and TypedRateLimitingInterface;
//   - both fit controller-runtime's controller.TypedOptions[reconcile.Request]:
//     a limiter as RateLimiter, and backoff.NewRateLimitingQueue behind
//     NewQueue.
//
// Its tests run a real controller-runtime controller, with no API server,
// on a backoff queue and limiter, and scrape the queue's Prometheus metrics
// (from github.com/retrykit/backoff/interop/prommetrics) while it runs.
//
// The wiring, in a controller built by controller-runtime's builder or by
// controller.New:
//
//	controller.Options{
//		RateLimiter: backoff.DefaultControllerRateLimiter[reconcile.Request](),
//		NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
//			return backoff.NewRateLimitingQueue(rl, backoff.WithName(name))
//		},
//	}
//
// or, with priorities:
//
//	controller.Options{
//		RateLimiter: backoff.DefaultControllerRateLimiter[reconcile.Request](),
//		NewQueue:    controllerruntime.NewQueue[reconcile.Request](),
//	}
//
// A NewQueue function takes precedence over UsePriorityQueue, which
// controller-runtime turns on by default: the flag only selects the queue
// that controller-runtime builds when NewQueue is nil.
package controllerruntime
