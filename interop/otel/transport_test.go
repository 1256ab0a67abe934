package otel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/interop/otel"
)

// flakyServer answers 503, then 429 with Retry-After: 3, then 200, and
// keeps the traceparent header of each request it receives.
type flakyServer struct {
	*httptest.Server
	mu      sync.Mutex
	parents []string
}

func newFlakyServer(t *testing.T) *flakyServer {
	t.Helper()
	s := &flakyServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.parents = append(s.parents, r.Header.Get("Traceparent"))
		n := len(s.parents)
		s.mu.Unlock()
		switch n {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// httpRetrier returns a Retrier on fc that records in tp and steps fc by
// each wait, and the backoff options of its transport.
func httpRetrier(tp trace.TracerProvider, fc *testingclock.FakeClock, opts ...otel.Option) (*otel.Retrier, []backoff.Option) {
	opts = append(opts, otel.WithTracerProvider(tp), otel.WithClock(fc),
		otel.WithPropagators(propagation.TraceContext{}),
		otel.WithNotify(func(_ int, _ error, next time.Duration) { fc.Step(next) }))
	return otel.NewRetrier("GET /", opts...), []backoff.Option{backoff.WithClock(fc)}
}

func get(t *testing.T, rt http.RoundTripper, url string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("got %d %q, want 200 ok", resp.StatusCode, body)
	}
}

// traceparent is the header value that carries sc.
func traceparent(sc trace.SpanContext) string {
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
}

func TestTransportSendsOneSpanPerAttempt(t *testing.T) {
	tp, sr := newTracer(t)
	m, reader := newMetrics(t)
	fc := testingclock.NewFakeClock(epoch)
	srv := newFlakyServer(t)
	r, bopts := httpRetrier(tp, fc, otel.WithMetrics(m))
	rt := r.Transport(srv.Client().Transport, backoff.Schedule{Duration: time.Second, Steps: 5}, bopts...)
	defer rt.CloseIdleConnections()

	get(t, rt, srv.URL)
	assertTree(t, sr, `
GET / internal [0s..4s] Unset retrykit.retry.attempts=3
  GET client [0s..0s] Error error.type=503 http.request.method=GET http.response.status_code=503 retrykit.retry.attempt=1 server.address=127.0.0.1
    event retry.scheduled @0s retrykit.retry.attempt=1 retrykit.retry.delay=1 retrykit.retry.reason=throttle
  GET client [1s..1s] Error error.type=429 http.request.method=GET http.request.resend_count=1 http.response.status_code=429 retrykit.retry.attempt=2 server.address=127.0.0.1
    event retry.scheduled @1s retrykit.retry.attempt=2 retrykit.retry.delay=3 retrykit.retry.reason=retry_after
  GET client [4s..4s] Unset http.request.method=GET http.request.resend_count=2 http.response.status_code=200 retrykit.retry.attempt=3 server.address=127.0.0.1
`, "url.full", "server.port")

	spans := sr.Ended()
	var attempts []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindClient {
			attempts = append(attempts, s)
			if got, want := attr(s, "url.full"), srv.URL; got != want {
				t.Errorf("url.full = %q, want %q", got, want)
			}
		}
	}
	assertParents(t, srv, attempts)
	c := collect(t, reader)
	name := otel.NameKey.String("GET /")
	if h, ok := c.intHistogram(otel.RetryRetriesName, name); !ok || h.Count != 1 || h.Sum != 2 {
		t.Errorf("retries = %+v, want one call with 2 retries", h)
	}
	if h, ok := c.histogram(otel.RetryDelayName, name); !ok || h.Count != 1 || h.Sum != 4 {
		t.Errorf("delay = %+v, want one call that waited 4 s", h)
	}
}

// TestTransportInsideOtelhttp checks the documented order: otelhttp's
// Transport outside, whose span is the call's and the parent of one span
// per attempt; the server sees each attempt's own span as its parent.
func TestTransportInsideOtelhttp(t *testing.T) {
	tp, sr := newTracer(t)
	fc := testingclock.NewFakeClock(epoch)
	srv := newFlakyServer(t)
	r, bopts := httpRetrier(tp, fc)
	inner := r.Transport(srv.Client().Transport, backoff.Schedule{Duration: time.Second, Steps: 5}, bopts...)
	defer inner.CloseIdleConnections()
	rt := otelhttp.NewTransport(inner, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))

	get(t, rt, srv.URL)
	spans := sr.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want otelhttp's and 3 attempts:\n%s", len(spans), tree(spans))
	}
	var outer sdktrace.ReadOnlySpan
	var attempts []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Parent().IsValid() {
			attempts = append(attempts, s)
		} else {
			outer = s
		}
	}
	if outer == nil || attr(outer, "http.response.status_code") != "200" || outer.InstrumentationScope().Name == otel.ScopeName {
		t.Fatalf("no otelhttp span with the final status at the root:\n%s", tree(spans))
	}
	for i, s := range attempts {
		if s.Parent().SpanID() != outer.SpanContext().SpanID() {
			t.Errorf("attempt %d is not a child of otelhttp's span:\n%s", i+1, tree(spans))
		}
		want := ""
		if i > 0 {
			want = string(rune('0' + i))
		}
		if got := attr(s, "http.request.resend_count"); got != want {
			t.Errorf("attempt %d: resend_count %q, want %q", i+1, got, want)
		}
	}
	assertParents(t, srv, attempts)
}

// assertParents checks that the server saw each attempt's span as the
// parent of the request it received.
func assertParents(t *testing.T, srv *flakyServer, attempts []sdktrace.ReadOnlySpan) {
	t.Helper()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.parents) != len(attempts) {
		t.Fatalf("server saw %d requests, want %d", len(srv.parents), len(attempts))
	}
	for i, s := range attempts {
		if want := traceparent(s.SpanContext()); srv.parents[i] != want {
			t.Errorf("request %d carried traceparent %q, want its attempt's %q", i+1, srv.parents[i], want)
		}
	}
}

// attr returns the value of s's attribute key, emitted as a string, or "".
func attr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

func TestTransportSendsAPostOnce(t *testing.T) {
	tp, sr := newTracer(t)
	fc := testingclock.NewFakeClock(epoch)
	srv := newFlakyServer(t)
	r, bopts := httpRetrier(tp, fc)
	rt := r.Transport(srv.Client().Transport, backoff.Schedule{Duration: time.Second, Steps: 5}, bopts...)
	defer rt.CloseIdleConnections()

	req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want the first answer, 503", resp.StatusCode)
	}
	assertTree(t, sr, `
GET / internal [0s..0s] Unset retrykit.retry.attempts=1
  POST client [0s..0s] Error error.type=503 http.request.method=POST http.response.status_code=503 retrykit.retry.attempt=1 server.address=127.0.0.1
    event retry.skipped @0s retrykit.retry.attempt=1 retrykit.retry.reason=throttle
`, "url.full", "server.port")
}
