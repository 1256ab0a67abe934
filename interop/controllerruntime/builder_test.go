package controllerruntime_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	crinterop "github.com/retrykit/backoff/interop/controllerruntime"
)

// TestBuilderUsesPriorities is TestControllerUsesPriorities through
// controller-runtime's builder and a manager. The manager points at an
// address where no API server listens: the controller watches a raw source
// only, so nothing contacts it.
func TestBuilderUsesPriorities(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	reconciled := make(chan string, 16)
	h := handler.WithLowPriorityWhenUnchanged[client.Object, request](&handler.EnqueueRequestForObject{})
	src := source.TypedFunc[request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[request]) error {
		for _, name := range []string{"listed-1", "listed-2"} {
			h.Create(ctx, event.CreateEvent{Object: object(name), IsInInitialList: true}, q)
		}
		h.Create(ctx, event.CreateEvent{Object: object("changed")}, q)
		return nil
	})
	err = builder.TypedControllerManagedBy[request](mgr).
		Named("built").
		WithOptions(controller.TypedOptions[request]{
			NewQueue:           crinterop.NewQueue[request](),
			SkipNameValidation: ptr.To(true),
		}).
		WatchesRawSource(src).
		Complete(reconcile.TypedFunc[request](func(_ context.Context, req request) (reconcile.Result, error) {
			reconciled <- req.Name
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatalf("builder: %v", err)
	}
	started := make(chan error, 1)
	go func() { started <- mgr.Start(ctx) }()
	want := []string{"changed", "listed-1", "listed-2"}
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
