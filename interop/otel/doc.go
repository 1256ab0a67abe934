// Package otel reports the retries, queues, retry budgets and limiters of
// github.com/retrykit/backoff to OpenTelemetry: metrics through the
// library's metrics interfaces, and traces of retried calls.
package otel
