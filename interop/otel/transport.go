package otel

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
)

// Transport is an httpretry.Transport whose requests are traced and
// measured by a [Retrier]: one client span per attempt sent, as the HTTP
// semantic conventions ask, a child of the request's span, named after the
// method, with http.request.method, url.full, server.address, server.port,
// http.response.status_code and, on each resend, http.request.resend_count
// (1 for the first resend); an attempt that is retried carries a
// retry.scheduled event. Each attempt's request carries the context of its
// own span in its headers (with the Retrier's propagators), so the server's
// spans are children of the attempt that reached it.
//
// # With otelhttp
//
// Wrap the Transport in otelhttp's, not the other way round:
//
//	otelhttp.NewTransport(r.Transport(http.DefaultTransport, schedule, opts...))
//
// otelhttp's span is then the request as the caller sees it, with its final
// status and duration, and the parent of the attempts' spans; its metrics
// count one request per call. Wrapped inside (r.Transport(otelhttp.NewTransport(base), ...))
// it would make a second span per attempt, without the resend count.
//
// A Transport is safe for concurrent use by multiple goroutines, as long as
// its fields are not changed once it is in use. Build it with
// [Retrier.Transport].
type Transport struct {
	// RetryInternalServerError and Idempotent are httpretry.Transport's
	// fields of the same names, copied to it for each request.
	RetryInternalServerError bool
	Idempotent               func(req *http.Request) bool

	r        *Retrier
	attempts *attemptTransport
	schedule backoff.Schedule
	opts     []backoff.Option
}

// Transport returns a [Transport] that sends requests through base (nil:
// http.DefaultTransport) with httpretry's retries on schedule s and options
// opts, as httpretry.NewTransport(base, s, opts...) does, traced and
// measured by r. It builds an httpretry.Transport per request, to give its
// retries their own notify hook; as for [Retrier.Retry], a
// backoff.WithNotify among opts never runs: pass the hook to NewRetrier
// with [WithNotify] instead.
func (r *Retrier) Transport(base http.RoundTripper, s backoff.Schedule, opts ...backoff.Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{r: r, attempts: &attemptTransport{r: r, base: base}, schedule: s, opts: opts}
}

// RoundTrip sends req as httpretry.Transport.RoundTrip does, and returns
// what it returns.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.r.begin(req.Context(), true)
	rt := httpretry.NewTransport(t.attempts, t.schedule, c.options(t.opts)...)
	rt.RetryInternalServerError = t.RetryInternalServerError
	rt.Idempotent = t.Idempotent
	resp, err := rt.RoundTrip(req.WithContext(context.WithValue(c.ctx, callKey{}, c)))
	c.finish(err)
	return resp, err
}

// CloseIdleConnections closes the idle connections of the wrapped
// RoundTripper, if it has such a method.
func (t *Transport) CloseIdleConnections() {
	if ci, ok := t.attempts.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// callKey is the context key of the call a request belongs to.
type callKey struct{}

// attemptTransport makes each attempt's span: it is the base that the
// per-request httpretry.Transport sends each attempt through.
type attemptTransport struct {
	r    *Retrier
	base http.RoundTripper
}

func (a *attemptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c, _ := req.Context().Value(callKey{}).(*call)
	if c == nil {
		return a.base.RoundTrip(req)
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(method),
		semconv.URLFull(req.URL.Redacted()),
		semconv.ServerAddress(req.URL.Hostname()),
	}
	if p, err := strconv.Atoi(req.URL.Port()); err == nil {
		attrs = append(attrs, semconv.ServerPort(p))
	}
	if c.attempts > 0 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(c.attempts))
	}
	ctx := c.startAttempt(req.Context(), method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if c.attempt != nil {
		req = req.Clone(ctx)
		a.r.cfg.propagators.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	resp, err := a.base.RoundTrip(req)
	c.endAttempt(err)
	if c.attempt != nil && resp != nil {
		c.attempt.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
		if resp.StatusCode >= 400 {
			c.attempt.SetStatus(codes.Error, "")
			c.attempt.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
		}
	}
	return resp, err
}
