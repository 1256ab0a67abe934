package controllerruntime_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/retrykit/backoff/interop/prommetrics"
)

// controller-runtime registers workqueue_* families of its own, with other
// labels and help texts, in the registry its manager serves: prommetrics
// cannot go there under the same names (its package doc says so, and where
// to register it instead).
func TestControllerRuntimeRegistryHasWorkqueueNames(t *testing.T) {
	m := prommetrics.New()
	err := crmetrics.Registry.Register(m)
	if err == nil {
		crmetrics.Registry.Unregister(m)
		t.Fatal("controller-runtime's registry accepted prommetrics: update prommetrics' package doc")
	}
	if _, already := err.(prometheus.AlreadyRegisteredError); already || !strings.Contains(err.Error(), `"workqueue_`) {
		t.Fatalf("Register: %v; want a conflict on a workqueue_ name", err)
	}

	// Under a prefix the names are free.
	prefixed := prometheus.WrapRegistererWithPrefix("retrykit_", crmetrics.Registry)
	if err := prefixed.Register(m); err != nil {
		t.Fatalf("Register with a prefix: %v", err)
	}
	prefixed.Unregister(m)
}
