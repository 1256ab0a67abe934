package controllerruntime_test

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/retrykit/backoff"
)

// A controller-runtime controller on a backoff queue and limiter. The
// reconciler fails twice; the controller retries it after 5 ms, then 10 ms
// (real time: this example takes about 15 ms), and forgets the failures
// once it succeeds.
func Example() {
	limiter := backoff.DefaultControllerRateLimiter[reconcile.Request]()

	attempts := 0
	succeeded := make(chan struct{})
	reconciler := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		attempts++
		if attempts < 3 {
			fmt.Printf("reconcile %s: attempt %d failed\n", req, attempts)
			return reconcile.Result{}, errors.New("not ready")
		}
		fmt.Printf("reconcile %s: attempt %d succeeded\n", req, attempts)
		close(succeeded)
		return reconcile.Result{}, nil
	})

	ctrl, err := controller.NewUnmanaged("web", controller.Options{
		Reconciler:  reconciler,
		RateLimiter: limiter,
		NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			return backoff.NewRateLimitingQueue(rl, backoff.WithName(name))
		},
		SkipNameValidation: ptr.To(true), // go test -count=2 runs this twice
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Without an API server, events come from a channel.
	events := make(chan event.GenericEvent, 1)
	if err := ctrl.Watch(source.Channel(events, &handler.EnqueueRequestForObject{})); err != nil {
		fmt.Println(err)
		return
	}
	events <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
	}}

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- ctrl.Start(ctx) }()
	<-succeeded
	cancel()
	if err := <-stopped; err != nil {
		fmt.Println(err)
	}

	// Start has returned: the workers are gone, and the last one forgot
	// the request's failures after its success.
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}}
	fmt.Println("failures remembered:", limiter.NumRequeues(req))
	// Output:
	// reconcile default/web: attempt 1 failed
	// reconcile default/web: attempt 2 failed
	// reconcile default/web: attempt 3 succeeded
	// failures remembered: 0
}
