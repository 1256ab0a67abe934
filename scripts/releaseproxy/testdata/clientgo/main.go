// Program clientgo is the release rehearsal's user of the module
// github.com/retrykit/backoff/interop/clientgo: client-go's discovery client,
// configured with Configure, asks a local server for its version through a
// 429 with Retry-After: 0.
package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	clientgobackoff "github.com/retrykit/backoff/interop/clientgo"
)

func main() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.0"}`)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	clientgobackoff.Configure(cfg)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	v, err := dc.RESTClient().Get().AbsPath("/version").DoRaw(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("clientgo: %s after %d calls\n", v, calls.Load())
}
