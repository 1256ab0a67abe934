// Program otel is the release rehearsal's user of the module
// github.com/retrykit/backoff/interop/otel: a Retrier that traces a Retry
// of two attempts, recorded by OpenTelemetry's SDK.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/retrykit/backoff"
	backoffotel "github.com/retrykit/backoff/interop/otel"
)

func main() {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	defer tp.Shutdown(context.Background())

	r := backoffotel.NewRetrier("load config", backoffotel.WithTracerProvider(tp))
	attempts := 0
	err := r.Retry(context.Background(), backoff.Schedule{Duration: time.Millisecond, Steps: 3}, func(context.Context) error {
		attempts++
		if attempts == 1 {
			return errors.New("connection refused")
		}
		return nil
	})
	if err != nil {
		fail("Retry: %v", err)
	}
	named := 0
	for _, s := range recorder.Ended() {
		if s.Name() == "load config" {
			named++
		}
	}
	// One span per attempt, and the call's own span (the context had none).
	if named != 3 {
		fail("%d spans named \"load config\" for %d attempts; want 3 (the call's and one per attempt)", named, attempts)
	}
	fmt.Printf("otel.Retrier: %d attempts, %d spans\n", attempts, named)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "otel: "+format+"\n", args...)
	os.Exit(1)
}
