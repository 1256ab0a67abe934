// Command otelretry prints, with OpenTelemetry's stdout exporter, the spans
// of one HTTP GET that a server on the loopback interface answers with 503,
// then 429 with Retry-After: 1, then 200: otelhttp's span for the request,
// and under it one span per attempt sent, each with
// http.request.resend_count on a resend and a retry.scheduled event before
// each wait.
//
//	go run ./examples/otelretry
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/otel"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	exporter, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	// A syncer exports each span as it ends, so the attempts print before
	// the request that holds them.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer tp.Shutdown(context.Background())

	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			io.WriteString(w, "ok\n")
		}
	}))
	defer srv.Close()

	propagators := propagation.TraceContext{}
	retrier := otel.NewRetrier("GET /", otel.WithTracerProvider(tp), otel.WithPropagators(propagators))
	// otelhttp outside: its span is the request; the attempts are its
	// children.
	client := &http.Client{Transport: otelhttp.NewTransport(
		retrier.Transport(srv.Client().Transport,
			backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Steps: 4}),
		otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagators))}

	resp, err := client.Get(srv.URL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s after %d requests: %s", resp.Status, calls.Load(), body)
	return nil
}
