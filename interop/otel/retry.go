package otel

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
	"github.com/retrykit/backoff/internal/optionhook"
)

// The attributes of the spans and events a [Retrier] records.
const (
	// AttemptKey is the number of an attempt, 1 for the first: on each
	// attempt's span and on each retry.scheduled event.
	AttemptKey = attribute.Key("retrykit.retry.attempt")
	// DelayKey is the wait before the next attempt, in seconds, on each
	// retry.scheduled event.
	DelayKey = attribute.Key("retrykit.retry.delay")
	// ReasonKey says, on each retry.scheduled event, who chose the wait:
	// ReasonSchedule, ReasonRetryAfter or ReasonThrottle.
	ReasonKey = attribute.Key("retrykit.retry.reason")
	// StopReasonKey says, on the event that records a call's final error,
	// why the retries stopped: one of the StopReason values.
	StopReasonKey = attribute.Key("retrykit.retry.stop_reason")
	// AttemptsKey is how many attempts a call made, on the final error's
	// event and on the call's span when the Retrier started one.
	AttemptsKey = attribute.Key("retrykit.retry.attempts")
)

// The values of ReasonKey.
const (
	// ReasonSchedule: the wait is the Schedule's.
	ReasonSchedule = "schedule"
	// ReasonRetryAfter: the error carried a Retry-After hint
	// (backoff.RetryAfter, or a 429 or 503 with a Retry-After header), and
	// the wait is the hint's, as bounded by backoff.WithMaxRetryAfter.
	ReasonRetryAfter = "retry_after"
	// ReasonThrottle: the server said it was overloaded (an HTTP 429 or 503
	// without a usable Retry-After header); the wait is the Schedule's.
	ReasonThrottle = "throttle"
)

// The values of StopReasonKey.
const (
	StopAttemptsExhausted = "attempts_exhausted" // backoff.ErrAttemptsExhausted
	StopMaxElapsedTime    = "max_elapsed_time"   // backoff.ErrMaxElapsedTime
	StopBudget            = "budget"             // backoff.ErrRetryBudgetExhausted: the retry budget refused
	StopCanceled          = "canceled"           // context.Canceled
	StopDeadlineExceeded  = "deadline_exceeded"  // context.DeadlineExceeded
	StopNotRetryable      = "not_retryable"      // a backoff.Permanent error, or one backoff.WithRetryable rejected
)

// RetryScheduledEvent is the name of the event recorded before each wait.
const RetryScheduledEvent = "retry.scheduled"

// RetrySkippedEvent is the name of the event recorded when an answer that
// would have been retried is not, because the request may not be sent
// twice (httpretry.ErrNotRepeatable): a POST's 503, say.
const RetrySkippedEvent = "retry.skipped"

// Retrier traces and measures the backoff.Retry calls of one operation, and
// the requests of an [httpretry.Transport] with [Retrier.Transport].
//
// Each attempt is a span, a child of the span in the caller's context (or,
// with [WithSpanEvents], an event on it), named after the operation, with
// the attempt's number in [AttemptKey] and, when it fails, status Error and
// the error's message. An attempt that is retried gets a retry.scheduled
// event at its end, with the wait ([DelayKey]), who chose it ([ReasonKey])
// and its number. The error the call returns is recorded once, with
// span.RecordError on the call's span, with [StopReasonKey] and
// [AttemptsKey]. When the caller's context carries no span, the Retrier
// starts one for the call, so that the attempts share a trace.
//
// With [WithMetrics], each call that retried records its retries in
// retrykit.retry.retries and its total wait in retrykit.retry.delay,
// attributed name=the operation's name: gRPC's A96 retry metrics.
//
// With a no-op TracerProvider (go.opentelemetry.io/otel/trace/noop), or the
// global one while no SDK has been set with otel.SetTracerProvider, and no
// metrics or disabled ones (the no-op MeterProvider's, or the global one's
// before an SDK is set), Retry is backoff.Retry, with no more allocations;
// see BenchmarkRetry.
//
// A Retrier does not hedge: backoff.WithHedge among the options of its
// calls is turned off, as its spans and [RetryValue]'s value follow one
// attempt at a time.
//
// A Retrier is safe for concurrent use by multiple goroutines. Its zero
// value is not usable: create it with [NewRetrier].
type Retrier struct {
	name    string
	cfg     config
	tracer  trace.Tracer
	noop    bool                  // tracer is the no-op one
	global  bool                  // tracer is the global provider's, from before any was set
	metrics []metric.RecordOption // name=name, for the retry histograms
	notify  []backoff.Option      // backoff.WithNotify(cfg.notify), if set
}

// NewRetrier returns a Retrier for the operation called name: the name of
// its spans (but for the HTTP attempts, which are named after their method)
// and the value of the name attribute of its metrics. NewRetrier panics if
// name is empty.
func NewRetrier(name string, opts ...Option) *Retrier {
	if name == "" {
		panic("otel: NewRetrier: name must not be empty")
	}
	r := &Retrier{name: name, cfg: newConfig(opts)}
	r.tracer = r.cfg.tracerProvider.Tracer(ScopeName)
	_, r.noop = r.tracer.(noop.Tracer)
	r.global = r.cfg.tracerProvider == unsetGlobal
	r.metrics = []metric.RecordOption{metric.WithAttributeSet(nameSet(name))}
	if r.cfg.notify != nil {
		r.notify = []backoff.Option{backoff.WithNotify(r.cfg.notify)}
	}
	return r
}

// plainOptions returns opts with the notify hook of WithNotify, if any,
// for a call that records nothing.
func (r *Retrier) plainOptions(opts []backoff.Option) []backoff.Option {
	opts = noHedge(opts)
	switch {
	case r.notify == nil:
		return opts
	case len(opts) == 0:
		return r.notify
	}
	return append(opts[:len(opts):len(opts)], r.notify...)
}

// Retry is backoff.Retry(ctx, s, fn, opts...), traced and measured as
// [Retrier] says. fn receives a context that carries the attempt's span,
// so that its own spans are the attempt's children.
func (r *Retrier) Retry(ctx context.Context, s backoff.Schedule, fn func(context.Context) error, opts ...backoff.Option) error {
	if r.off(ctx) {
		return backoff.Retry(ctx, s, fn, r.plainOptions(opts)...)
	}
	c := r.begin(ctx, false)
	err := backoff.Retry(c.ctx, s, func(ctx context.Context) error {
		ctx = c.startAttempt(ctx, r.name)
		err := fn(ctx)
		c.endAttempt(err)
		return err
	}, c.options(opts)...)
	c.finish(err)
	return err
}

// RetryValue is backoff.RetryValue(ctx, s, fn, opts...), traced and
// measured by r as [Retrier.Retry] is.
func RetryValue[T any](ctx context.Context, r *Retrier, s backoff.Schedule, fn func(context.Context) (T, error), opts ...backoff.Option) (T, error) {
	var v T
	err := r.Retry(ctx, s, func(ctx context.Context) error {
		x, err := fn(ctx)
		if err == nil {
			v = x
		}
		return err
	}, opts...)
	return v, err
}

// unsetGlobal is the global TracerProvider before any is set: it forwards
// to the provider set later, if any, and until then records nothing.
var unsetGlobal = otel.GetTracerProvider()

// tracing reports whether the Retrier's spans go anywhere: its tracer is
// not the no-op one, nor the global one while no provider is set.
func (r *Retrier) tracing() bool {
	return !r.noop && (!r.global || otel.GetTracerProvider() != unsetGlobal)
}

// off reports whether a call would record nothing: no tracing and no
// enabled metric.
func (r *Retrier) off(ctx context.Context) bool {
	return !r.tracing() && (r.cfg.metrics == nil || !r.cfg.metrics.retries.Enabled(ctx))
}

// call is the state of one traced call across its attempts. backoff.Retry
// runs fn and notify on the caller's goroutine, one after the other, so it
// needs no lock.
type call struct {
	r      *Retrier
	ctx    context.Context // the caller's, with the call's span if the Retrier started one
	span   trace.Span      // the call's span: the caller's or the Retrier's
	own    bool            // span was started by the Retrier
	trace  bool            // the spans go somewhere (Retrier.tracing)
	events bool            // attempts are events on span, not spans

	attempts int
	attempt  trace.Span // the latest attempt's span, until notify or finish ends it
	end      time.Time  // when the latest attempt ended
	waiting  bool       // a retry was scheduled after the latest attempt
	delay    time.Duration
}

// begin starts a call.
func (r *Retrier) begin(ctx context.Context, isHTTP bool) *call {
	c := &call{r: r, ctx: ctx, events: r.cfg.events && !isHTTP, trace: r.tracing()}
	c.span = trace.SpanFromContext(ctx)
	if !c.span.SpanContext().IsValid() && c.trace {
		c.ctx, c.span = r.tracer.Start(ctx, r.name, trace.WithTimestamp(r.cfg.clock.Now()))
		c.own = true
	}
	return c
}

// options returns opts with the call's notify hook last.
func (c *call) options(opts []backoff.Option) []backoff.Option {
	opts = noHedge(opts)
	return append(opts[:len(opts):len(opts)], backoff.WithNotify(c.notify))
}

// noHedge returns opts, with backoff.WithHedge(0) after them if they hedge
// (see Retrier): a call's attempts then never run at once.
func noHedge(opts []backoff.Option) []backoff.Option {
	if !optionhook.Hedged(opts) {
		return opts
	}
	return append(opts[:len(opts):len(opts)], backoff.WithHedge(0))
}

// startAttempt counts an attempt, starts its span, called name, with the
// options extra, and returns the context that carries it.
func (c *call) startAttempt(ctx context.Context, name string, extra ...trace.SpanStartOption) context.Context {
	now := c.r.cfg.clock.Now()
	c.attempts++
	if c.waiting {
		c.delay += now.Sub(c.end)
		c.waiting = false
	}
	if c.events || !c.trace {
		return ctx
	}
	opts := append([]trace.SpanStartOption{trace.WithTimestamp(now), trace.WithAttributes(AttemptKey.Int(c.attempts))}, extra...)
	ctx, c.attempt = c.r.tracer.Start(ctx, name, opts...)
	return ctx
}

// endAttempt notes the end of the attempt and its error on its span, which
// stays open for the retry.scheduled event.
func (c *call) endAttempt(err error) {
	c.end = c.r.cfg.clock.Now()
	if c.attempt != nil && err != nil {
		c.attempt.SetStatus(codes.Error, err.Error())
		c.attempt.SetAttributes(errorType(err))
	}
}

// notify is the call's backoff.WithNotify hook: the attempt failed and
// another follows after next, or, for an err that wraps
// httpretry.ErrNotRepeatable, none follows although the answer was
// retryable.
func (c *call) notify(attempt int, err error, next time.Duration) {
	if errors.Is(err, httpretry.ErrNotRepeatable) {
		target := c.attempt
		if c.events {
			target = c.span
		}
		if c.trace && target != nil {
			target.AddEvent(RetrySkippedEvent, trace.WithTimestamp(c.end), trace.WithAttributes(
				AttemptKey.Int(attempt), ReasonKey.String(reason(err))))
		}
		if c.r.cfg.notify != nil {
			c.r.cfg.notify(attempt, err, next)
		}
		return
	}
	c.waiting = true
	if c.trace {
		ev := []trace.EventOption{trace.WithTimestamp(c.end), trace.WithAttributes(
			AttemptKey.Int(attempt), DelayKey.Float64(next.Seconds()), ReasonKey.String(reason(err)))}
		if c.events {
			c.span.AddEvent(RetryScheduledEvent, ev...)
		} else if c.attempt != nil {
			c.attempt.AddEvent(RetryScheduledEvent, ev...)
			c.attempt.End(trace.WithTimestamp(c.end))
			c.attempt = nil
		}
	}
	if c.r.cfg.notify != nil {
		c.r.cfg.notify(attempt, err, next)
	}
}

// finish ends the call with err, what backoff.Retry returned.
func (c *call) finish(err error) {
	now := c.r.cfg.clock.Now()
	if c.waiting {
		c.delay += now.Sub(c.end) // the wait that ctx's end cut short
	}
	if c.attempt != nil {
		c.attempt.End(trace.WithTimestamp(c.end))
	}
	if err != nil && c.trace {
		c.span.RecordError(err, trace.WithTimestamp(now), trace.WithAttributes(
			StopReasonKey.String(stopReason(err)), AttemptsKey.Int(c.attempts)))
		if c.own {
			c.span.SetStatus(codes.Error, err.Error())
		}
	}
	if c.own {
		c.span.SetAttributes(AttemptsKey.Int(c.attempts))
		c.span.End(trace.WithTimestamp(now))
	}
	if m := c.r.cfg.metrics; m != nil && c.attempts > 1 {
		m.retries.Record(c.ctx, int64(c.attempts-1), c.r.metrics...)
		m.delay.Record(c.ctx, c.delay.Seconds(), c.r.metrics...)
	}
}

// reason returns the ReasonKey value for a retried error.
func reason(err error) string {
	var hint interface{ RetryAfter() time.Duration }
	if errors.As(err, &hint) && hint.RetryAfter() > 0 {
		return ReasonRetryAfter
	}
	var status *httpretry.StatusError
	if errors.As(err, &status) && (status.StatusCode == 429 || status.StatusCode == 503) {
		return ReasonThrottle
	}
	return ReasonSchedule
}

// stopReason returns the StopReasonKey value for the error a call returned.
func stopReason(err error) string {
	var re *backoff.RetryError
	if !errors.As(err, &re) {
		return StopNotRetryable
	}
	switch {
	case errors.Is(re.Reason, backoff.ErrAttemptsExhausted):
		return StopAttemptsExhausted
	case errors.Is(re.Reason, backoff.ErrMaxElapsedTime):
		return StopMaxElapsedTime
	case errors.Is(re.Reason, backoff.ErrRetryBudgetExhausted):
		return StopBudget
	case errors.Is(re.Reason, context.DeadlineExceeded):
		return StopDeadlineExceeded
	default:
		return StopCanceled
	}
}

// errorType is the error.type attribute of err: its dynamic type, or the
// status code of an httpretry.StatusError, as the HTTP conventions ask.
func errorType(err error) attribute.KeyValue {
	var status *httpretry.StatusError
	if errors.As(err, &status) {
		return semconv.ErrorTypeKey.String(strconv.Itoa(status.StatusCode))
	}
	return semconv.ErrorTypeKey.String(reflect.TypeOf(err).String())
}
