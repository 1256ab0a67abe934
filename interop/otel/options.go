package otel

import (
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/utils/clock"
)

// ScopeName is the instrumentation scope of every tracer and meter this
// package asks its providers for.
const ScopeName = "github.com/retrykit/backoff/interop/otel"

// Option configures a [Retrier] or the [Metrics] of [NewMetrics].
type Option func(*config)

// config holds the options; its zero value is completed by newConfig.
type config struct {
	tracerProvider trace.TracerProvider
	propagators    propagation.TextMapPropagator
	metrics        *Metrics
	clock          clock.PassiveClock
	events         bool
	notify         func(attempt int, err error, next time.Duration)
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.tracerProvider == nil {
		c.tracerProvider = otel.GetTracerProvider()
	}
	if c.propagators == nil {
		c.propagators = otel.GetTextMapPropagator()
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	return c
}

// WithTracerProvider makes a [Retrier] start its spans with a tracer of tp.
// The default is the global provider, otel.GetTracerProvider, read when the
// Retrier is built.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracerProvider = tp }
}

// WithPropagators makes a [Retrier]'s HTTP transport inject the context of
// each attempt's span into that attempt's request headers with p. The
// default is the global propagator, otel.GetTextMapPropagator, read when the
// Retrier is built.
func WithPropagators(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagators = p }
}

// WithMetrics makes a [Retrier] record the retries and the retry delay of
// each call in m's instruments. Without it, a Retrier records no metrics.
func WithMetrics(m *Metrics) Option {
	return func(c *config) { c.metrics = m }
}

// WithClock makes a [Retrier] read the start and end times of its spans and
// events, and the delays it records, from c. Pass the clock given to
// backoff.WithClock, so that spans agree with the waits; with a fake clock,
// the times in the spans are exact. The default is the real clock.
func WithClock(c clock.PassiveClock) Option {
	return func(cfg *config) { cfg.clock = c }
}

// WithSpanEvents makes [Retrier.Retry] and [RetryValue] record the
// attempts as events on the caller's span instead of as child spans: an
// event retry.scheduled before each wait and the final error, once. It has
// no effect on [Retrier.Transport], whose attempts are spans, one per
// request sent, as the HTTP semantic conventions ask.
func WithSpanEvents() Option {
	return func(c *config) { c.events = true }
}

// WithNotify makes a [Retrier] call notify as backoff.WithNotify would,
// after its own bookkeeping (so a notify that steps a fake clock sees the
// attempt's span ended). The Retrier passes a backoff.WithNotify of its own
// to backoff.Retry after the call's options, and the last option wins, so a
// backoff.WithNotify among the call's options never runs: give the hook
// here instead.
func WithNotify(notify func(attempt int, err error, next time.Duration)) Option {
	return func(c *config) { c.notify = notify }
}
