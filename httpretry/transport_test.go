package httpretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
)

var (
	busy = step{status: http.StatusServiceUnavailable, header: []string{"Retry-After", "2"}, body: "busy"}
	ok   = step{status: http.StatusOK, body: "ok"}
)

func TestRetryAfterSecondsThenSuccess(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(busy, busy, ok))
	resp, body, err := h.do(t, context.Background(), http.MethodGet, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "ok", body)
	calls, _ := s.requests()
	assert.Equal(t, 3, calls, "attempts")
	assert.Equal(t, []time.Duration{2 * time.Second, 2 * time.Second}, h.recordedWaits())
	assert.Equal(t, epoch.Add(4*time.Second), h.clock.Now(), "the waits went through the fake clock")
}

func TestRetryAfterHTTPDate(t *testing.T) {
	// The server's Date header is far from the fake clock's time: the
	// HTTP-date is measured against it, not against the client's clock.
	date := time.Date(2015, time.October, 21, 7, 28, 0, 0, time.UTC)
	var s script
	h := newHarness(t, s.handler(
		step{status: http.StatusTooManyRequests, header: []string{
			"Date", date.Format(http.TimeFormat),
			"Retry-After", date.Add(90 * time.Second).Format(http.TimeFormat),
		}},
		ok))
	resp, _, err := h.do(t, context.Background(), http.MethodGet, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []time.Duration{90 * time.Second}, h.recordedWaits())
}

// TestRetryAfterDelaySecondsAnyFirstDigit: a Retry-After whose first
// character is any digit, 0 and 9 included, is read as delay-seconds, which
// need no Date header (an HTTP-date without one is ignored).
func TestRetryAfterDelaySecondsAnyFirstDigit(t *testing.T) {
	for first := 0; first <= 9; first++ {
		value := fmt.Sprintf("%d1", first) // "01", "11", ... "91"
		t.Run(value, func(t *testing.T) {
			var s script
			h := newHarness(t, s.handler(step{status: http.StatusTooManyRequests, header: []string{"Date", "", "Retry-After", value}}, ok))
			resp, _, err := h.do(t, context.Background(), http.MethodGet, nil)
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, []time.Duration{time.Duration(10*first+1) * time.Second}, h.recordedWaits())
		})
	}
}

// TestRetryAfterIgnored covers the hints that are not trusted, and where the
// header does not apply: the Schedule's first wait, 100ms, is used instead.
func TestRetryAfterIgnored(t *testing.T) {
	date := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC).Format(http.TimeFormat)
	tests := []struct {
		name   string
		status int
		header []string
		opts   []backoff.Option
		want   time.Duration
	}{
		{"negative", 503, []string{"Retry-After", "-5"}, nil, 100 * time.Millisecond},
		{"unparsable", 503, []string{"Retry-After", "soon"}, nil, 100 * time.Millisecond},
		{"fraction", 503, []string{"Retry-After", "1.5"}, nil, 100 * time.Millisecond},
		{"absurd", 429, []string{"Retry-After", "99999999999999999999"}, nil, 100 * time.Millisecond},
		{"date without Date header", 503, []string{"Date", "", "Retry-After", date}, nil, 100 * time.Millisecond},
		{"on a 502", 502, []string{"Retry-After", "7"}, nil, 100 * time.Millisecond},
		{"on a 504", 504, []string{"Retry-After", "7"}, nil, 100 * time.Millisecond},
		{"date in the past (no hint: the schedule)", 503, []string{"Date", date, "Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"}, nil, 100 * time.Millisecond},
		{"bounded by WithMaxRetryAfter", 429, []string{"Retry-After", "3600"}, []backoff.Option{backoff.WithMaxRetryAfter(time.Minute)}, time.Minute},
		{"default bound", 429, []string{"Retry-After", "86400"}, nil, backoff.DefaultMaxRetryAfter},
		{"hints off", 503, []string{"Retry-After", "30"}, []backoff.Option{backoff.WithMaxRetryAfter(0)}, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s script
			h := newHarness(t, s.handler(step{status: tt.status, header: tt.header}, ok), tt.opts...)
			resp, _, err := h.do(t, context.Background(), http.MethodGet, nil)
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, []time.Duration{tt.want}, h.recordedWaits())
		})
	}
}

func TestStatusesRetried(t *testing.T) {
	tests := []struct {
		status   int
		on500    bool
		attempts int
	}{
		{http.StatusBadRequest, false, 1},
		{http.StatusNotFound, false, 1},
		{http.StatusConflict, false, 1},
		{http.StatusInternalServerError, false, 1},
		{http.StatusNotImplemented, false, 1},
		{http.StatusInternalServerError, true, 3},
		{http.StatusTooManyRequests, false, 3},
		{http.StatusBadGateway, false, 3},
		{http.StatusServiceUnavailable, false, 3},
		{http.StatusGatewayTimeout, false, 3},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			var s script
			h := newHarness(t, s.handler(step{status: tt.status, body: "failed"}))
			h.rt.RetryInternalServerError = tt.on500
			// Out of attempts or not retried, the last response is
			// returned with a nil error, its body intact.
			resp, body, err := h.do(t, context.Background(), http.MethodGet, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.status, resp.StatusCode)
			assert.Equal(t, "failed", body)
			calls, _ := s.requests()
			assert.Equal(t, tt.attempts, calls, "attempts")
		})
	}
}

func TestIdempotency(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		header     []string
		idempotent func(*http.Request) bool
		attempts   int
	}{
		{"GET", http.MethodGet, nil, nil, 3},
		{"HEAD", http.MethodHead, nil, nil, 3},
		{"OPTIONS", http.MethodOptions, nil, nil, 3},
		{"TRACE", http.MethodTrace, nil, nil, 3},
		{"PUT", http.MethodPut, nil, nil, 3},
		{"DELETE", http.MethodDelete, nil, nil, 3},
		{"POST", http.MethodPost, nil, nil, 1},
		{"PATCH", http.MethodPatch, nil, nil, 1},
		{"POST with Idempotency-Key", http.MethodPost, []string{"Idempotency-Key", "k1"}, nil, 3},
		{"PATCH with X-Idempotency-Key", http.MethodPatch, []string{"X-Idempotency-Key", "k1"}, nil, 3},
		{"POST allowed by the hook", http.MethodPost, nil, func(*http.Request) bool { return true }, 3},
		{"GET refused by the hook", http.MethodGet, nil, func(*http.Request) bool { return false }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s script
			h := newHarness(t, s.handler(busy))
			h.rt.Idempotent = tt.idempotent
			resp, _, err := h.do(t, context.Background(), tt.method, strings.NewReader("payload"), tt.header...)
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			calls, _ := s.requests()
			assert.Equal(t, tt.attempts, calls, "attempts")
		})
	}
}

func TestBodyReplayedOnEveryAttempt(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(busy, busy, ok))
	payload := `{"order": 42, "items": ["a", "b"]}`
	resp, _, err := h.do(t, context.Background(), http.MethodPost, strings.NewReader(payload),
		"Idempotency-Key", "order-42")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	calls, bodies := s.requests()
	assert.Equal(t, 3, calls)
	assert.Equal(t, []string{payload, payload, payload}, bodies)
}

// TestEachAttemptSendsTheWholeBody checks what the Transport hands the
// wrapped RoundTripper on each attempt: a body that yields the whole payload,
// the second attempt included. When the connection is reused, an
// http.Transport given a body already read rewinds it through GetBody by
// itself, so the server's view alone cannot tell; when the server closes the
// connection after its 503, the next attempt dials afresh, and such a body
// would fail that attempt.
func TestEachAttemptSendsTheWholeBody(t *testing.T) {
	payload := "replace the whole record"
	closing := step{status: http.StatusServiceUnavailable, header: []string{"Connection", "close"}}
	for _, tt := range []struct {
		name  string
		first step
		conns int32
	}{
		{"connection reused", busy, 1},
		{"server closes the connection", closing, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s script
			h := newHarness(t, s.handler(tt.first, ok))
			tap := &bodyTap{base: h.meter}
			rt := httpretry.NewTransport(tap, schedule, instant(nil)...)
			req, err := http.NewRequest(http.MethodPut, h.srv.URL, strings.NewReader(payload))
			require.NoError(t, err)
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, []string{payload, payload}, tap.read(),
				"the body each attempt handed the wrapped RoundTripper yielded")
			calls, bodies := s.requests()
			assert.Equal(t, 2, calls, "requests the server answered")
			assert.Equal(t, []string{payload, payload}, bodies)
			assert.Equal(t, tt.conns, h.newConns.Load(), "connections the server accepted")
		})
	}
}

// bodyTap is a RoundTripper that records, per attempt, the bytes the wrapped
// RoundTripper read from the request's body (an http.Transport reads it on a
// goroutine of its own, hence the lock).
type bodyTap struct {
	base  http.RoundTripper
	mu    sync.Mutex
	reads [][]byte
}

func (b *bodyTap) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.reads = append(b.reads, []byte{})
	w := tapWriter{tap: b, attempt: len(b.reads) - 1}
	b.mu.Unlock()
	if req.Body != nil && req.Body != http.NoBody {
		req = req.WithContext(req.Context()) // a shallow copy: req is not ours to change
		req.Body = teeCloser{Reader: io.TeeReader(req.Body, w), Closer: req.Body}
	}
	return b.base.RoundTrip(req)
}

// read returns what was read from each attempt's body so far.
func (b *bodyTap) read() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, len(b.reads))
	for i, r := range b.reads {
		out[i] = string(r)
	}
	return out
}

type tapWriter struct {
	tap     *bodyTap
	attempt int
}

func (w tapWriter) Write(p []byte) (int, error) {
	w.tap.mu.Lock()
	defer w.tap.mu.Unlock()
	w.tap.reads[w.attempt] = append(w.tap.reads[w.attempt], p...)
	return len(p), nil
}

type teeCloser struct {
	io.Reader
	io.Closer
}

// TestBodyWithoutGetBodySentOnce: a stream cannot be replayed, so it is sent
// once, even for an idempotent method, and its body is closed.
func TestBodyWithoutGetBodySentOnce(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(busy, ok))
	body := &closeRecorder{Reader: strings.NewReader("stream")}
	req, err := http.NewRequest(http.MethodPut, h.srv.URL, body)
	require.NoError(t, err)
	require.Nil(t, req.GetBody, "NewRequest sets no GetBody for an unknown reader")
	resp, err := h.rt.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	calls, bodies := s.requests()
	assert.Equal(t, 1, calls)
	assert.Equal(t, []string{"stream"}, bodies)
	assert.True(t, body.closed)
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestGetBodyErrorEndsRetries(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(busy, ok))
	req, err := http.NewRequest(http.MethodPut, h.srv.URL, strings.NewReader("x"))
	require.NoError(t, err)
	errRewind := errors.New("cannot rewind")
	req.GetBody = func() (io.ReadCloser, error) { return nil, errRewind }
	_, err = h.rt.RoundTrip(req)
	assert.ErrorIs(t, err, errRewind)
	calls, _ := s.requests()
	assert.Equal(t, 1, calls)
}

func TestConnectionRefusedIsRetried(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more

	m := &meter{base: &http.Transport{}}
	defer m.base.(*http.Transport).CloseIdleConnections()
	var waits []time.Duration
	rt := httpretry.NewTransport(m, schedule, instant(&waits)...)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	_, err = rt.RoundTrip(req)
	require.Error(t, err)
	assert.Equal(t, int32(3), m.attempts.Load())
	assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "the last error is wrapped: %v", err)
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
	var re *backoff.RetryError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 3, re.Attempts)
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, waits)
}

func TestCertificateErrorNotRetried(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	m := &meter{base: &http.Transport{}} // does not trust the test server's certificate
	defer m.base.(*http.Transport).CloseIdleConnections()
	rt := httpretry.NewTransport(m, schedule, instant(nil)...)
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = rt.RoundTrip(req)
	require.Error(t, err)
	assert.Equal(t, int32(1), m.attempts.Load())
	var re *backoff.RetryError
	assert.False(t, errors.As(err, &re), "returned as the wrapped transport returned it: %v", err)
}

func TestUnsupportedSchemeNotRetried(t *testing.T) {
	m := &meter{base: &http.Transport{}}
	rt := httpretry.NewTransport(m, schedule)
	req, err := http.NewRequest(http.MethodGet, "gopher://example.invalid/", nil)
	require.NoError(t, err)
	_, err = rt.RoundTrip(req)
	require.Error(t, err)
	assert.Equal(t, int32(1), m.attempts.Load())
}

// TestCancelDuringWait cancels the request's context from another goroutine
// while RoundTrip waits out a one-minute Retry-After on the fake clock, which
// is never stepped: RoundTrip returns at once with the context's error.
func TestCancelDuringWait(t *testing.T) {
	var s script
	waiting := make(chan struct{})
	h := newHarness(t, s.handler(step{status: 503, header: []string{"Retry-After", "60"}}))
	h.rt = httpretry.NewTransport(h.meter, schedule, backoff.WithClock(h.clock),
		backoff.WithNotify(func(int, error, time.Duration) { close(waiting) }))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL, nil)
		resp, err := h.rt.RoundTrip(req)
		done <- result{resp, err}
	}()
	<-waiting // WithNotify runs once the wait's timer is set
	require.True(t, h.clock.HasWaiters(), "RoundTrip waits on the fake clock")
	cancel()
	r := <-done
	assert.Nil(t, r.resp)
	assert.ErrorIs(t, r.err, context.Canceled)
	var se *httpretry.StatusError
	require.ErrorAs(t, r.err, &se, "the last attempt's status is in the error")
	assert.Equal(t, 503, se.StatusCode)
	assert.Equal(t, epoch, h.clock.Now(), "no time passed")
	calls, _ := s.requests()
	assert.Equal(t, 1, calls)
	assert.Equal(t, h.meter.opened.Load(), h.meter.closed.Load(), "the discarded response was closed")
}

func TestContextDeadlineBeforeFirstAttempt(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(ok))
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, h.srv.URL, body)
	require.NoError(t, err)
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("x")), nil }
	_, err = h.rt.RoundTrip(req)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, body.closed, "RoundTrip closes the body even when it sends nothing")
	calls, _ := s.requests()
	assert.Equal(t, 0, calls)
}

// TestBodyClosedWhenNothingIsSent: whichever path a request takes (retried,
// sent once because its method is not idempotent, or sent once because its
// body is a stream), a context that ended before the first attempt sends
// nothing and still closes the body.
func TestBodyClosedWhenNothingIsSent(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		getBody      bool
	}{
		{"retried", http.MethodPut, true},
		{"not idempotent", http.MethodPost, true},
		{"stream", http.MethodPut, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s script
			h := newHarness(t, s.handler(ok))
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			body := &closeRecorder{Reader: strings.NewReader("x")}
			req, err := http.NewRequestWithContext(ctx, tc.method, h.srv.URL, body)
			require.NoError(t, err)
			if tc.getBody {
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("x")), nil }
			}
			_, err = h.rt.RoundTrip(req)
			assert.ErrorIs(t, err, context.Canceled)
			assert.True(t, body.closed, "RoundTrip closes the body even when it sends nothing")
			calls, _ := s.requests()
			assert.Zero(t, calls)
		})
	}
}

// TestStreamSentOnceWhateverIdempotentSays: a body without GetBody cannot be
// sent twice, even when the Idempotent field says the request may be
// repeated.
func TestStreamSentOnceWhateverIdempotentSays(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(busy, ok))
	h.rt.Idempotent = func(*http.Request) bool { return true }
	req, err := http.NewRequest(http.MethodPost, h.srv.URL, &closeRecorder{Reader: strings.NewReader("stream")})
	require.NoError(t, err)
	resp, err := h.rt.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	calls, bodies := s.requests()
	assert.Equal(t, 1, calls)
	assert.Equal(t, []string{"stream"}, bodies)
}

// TestClientDeadlineDuringWait: through an http.Client, a context that ends
// during a wait, with context.DeadlineExceeded as its cause, yields an error
// that matches both its error and its cause.
func TestClientDeadlineDuringWait(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(step{status: 503, header: []string{"Retry-After", "60"}}))
	ctx, cancel := context.WithCancelCause(context.Background())
	h.rt = httpretry.NewTransport(h.meter, schedule, backoff.WithClock(h.clock),
		backoff.WithNotify(func(int, error, time.Duration) { cancel(context.DeadlineExceeded) }))
	client := &http.Client{Transport: h.rt}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL, nil)
	require.NoError(t, err)
	_, err = client.Do(req)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the context's cause is kept: %v", err)
}

// TestDiscardedResponsesClosedAndConnectionReused proves that the responses
// given up for a retry are read and closed, so that every attempt travels on
// the same keep-alive connection, and that the final one is left to the
// caller.
func TestDiscardedResponsesClosedAndConnectionReused(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(busy, busy, ok))
	req, err := http.NewRequest(http.MethodGet, h.srv.URL, nil)
	require.NoError(t, err)
	resp, err := h.rt.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, int32(3), h.meter.opened.Load())
	assert.Equal(t, int32(2), h.meter.closed.Load(), "the two 503s were closed, the 200 is the caller's")
	read, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(read), "the final response is unread")
	resp.Body.Close()
	assert.Equal(t, int32(3), h.meter.closed.Load())
	assert.Equal(t, int32(1), h.newConns.Load(), "one connection served all three attempts")
}

// TestRetriedResponseReleasedBeforeTheWait: the body of a response that is
// retried, up to the drain bound included, is read and closed before the
// wait, so that its connection is back in the pool while the request waits,
// and the next attempt reuses it.
func TestRetriedResponseReleasedBeforeTheWait(t *testing.T) {
	for _, size := range []int{len("busy"), httpretry.MaxDrain} {
		t.Run(fmt.Sprintf("%d bytes", size), func(t *testing.T) {
			var s script
			h := newHarness(t, s.handler(step{status: http.StatusServiceUnavailable, body: strings.Repeat("b", size)}, ok))
			clock := testclock.NewFakeClock(epoch)
			var openAtWait []int32 // bodies handed out and not closed, at each wait
			rt := httpretry.NewTransport(h.meter, schedule,
				backoff.WithClock(clock),
				backoff.WithNotify(func(_ int, _ error, next time.Duration) {
					openAtWait = append(openAtWait, h.meter.opened.Load()-h.meter.closed.Load())
					clock.Step(next)
				}))
			req, err := http.NewRequest(http.MethodGet, h.srv.URL, nil)
			require.NoError(t, err)
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, []int32{0}, openAtWait, "response bodies still open when the wait began")
			assert.Equal(t, int32(1), h.newConns.Load(), "connections the server accepted")
		})
	}
}

// TestLongDiscardedBody: a body past the drain bound is not read to its end;
// it is closed, which costs its connection.
func TestLongDiscardedBody(t *testing.T) {
	var s script
	long := step{status: 503, body: strings.Repeat("x", 1<<20)}
	h := newHarness(t, s.handler(long, ok))
	resp, body, err := h.do(t, context.Background(), http.MethodGet, nil)
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, h.meter.opened.Load(), h.meter.closed.Load())
	assert.Equal(t, int32(2), h.newConns.Load(), "the long body's connection was closed, not drained")
}

// TestLastRetryableResponseKeepsLongBody: the response returned when the
// attempts run out holds all of its body, even past the drain bound.
func TestLastRetryableResponseKeepsLongBody(t *testing.T) {
	var s script
	payload := strings.Repeat("y", 100<<10)
	h := newHarness(t, s.handler(step{status: 503, body: payload}))
	resp, body, err := h.do(t, context.Background(), http.MethodGet, nil)
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, payload, body)
	assert.Equal(t, h.meter.opened.Load(), h.meter.closed.Load())
}

func TestMaxElapsedTimeReturnsLastResponse(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(busy), backoff.WithMaxElapsedTime(3*time.Second))
	resp, body, err := h.do(t, context.Background(), http.MethodGet, nil)
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "busy", body)
	calls, _ := s.requests()
	assert.Equal(t, 2, calls, "a third attempt would start after 4s")
}

func TestWithRetryableNarrows(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(busy, ok), backoff.WithRetryable(func(err error) bool {
		var se *httpretry.StatusError
		return !errors.As(err, &se) || se.StatusCode != 503
	}))
	resp, _, err := h.do(t, context.Background(), http.MethodGet, nil)
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	calls, _ := s.requests()
	assert.Equal(t, 1, calls)
}

func TestZeroTransportSendsOnce(t *testing.T) {
	var s script
	srv := httptest.NewServer(s.handler(busy, ok))
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	var rt httpretry.Transport
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
}

func TestNewClient(t *testing.T) {
	var s script
	srv := httptest.NewServer(s.handler(busy, ok))
	defer srv.Close()
	client := httpretry.NewClient(schedule, instant(nil)...)
	defer client.CloseIdleConnections() // through the Transport to http.DefaultTransport
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	calls, _ := s.requests()
	assert.Equal(t, 2, calls)
}

func TestStatusErrorMessage(t *testing.T) {
	assert.Equal(t, "httpretry: 503 Service Unavailable",
		(&httpretry.StatusError{StatusCode: 503, Status: "503 Service Unavailable"}).Error())
	assert.Equal(t, "httpretry: status Too Many Requests", (&httpretry.StatusError{StatusCode: 429}).Error())
}

// TestRetrySkippedForIdempotencyIsReported: a POST without an
// Idempotency-Key goes out once; its 503 is returned as is and reported to
// the notify hook, once, with ErrNotRepeatable and next = 0. An answer
// that would not have been retried is not reported.
func TestRetrySkippedForIdempotencyIsReported(t *testing.T) {
	var s script
	var notes []string
	h := newHarness(t, s.handler(busy, step{status: http.StatusNotFound}), backoff.WithNotify(func(attempt int, err error, next time.Duration) {
		notes = append(notes, fmt.Sprintf("%d %v %v: %v", attempt, next, errors.Is(err, httpretry.ErrNotRepeatable), err))
	}))
	resp, _, err := h.do(t, context.Background(), http.MethodPost, strings.NewReader("order"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, []string{"1 0s true: httpretry: not retried: the request may not be sent twice: httpretry: 503 Service Unavailable"}, notes)
	resp, _, err = h.do(t, context.Background(), http.MethodPost, strings.NewReader("order"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Len(t, notes, 1, "a 404 would not have been retried")
	calls, _ := s.requests()
	assert.Equal(t, 2, calls)
}

// TestStatusErrorIsAnOverloadSignal: 429 and 503 ask the client to slow
// down; 502 and 504 do not.
func TestStatusErrorIsAnOverloadSignal(t *testing.T) {
	for code, want := range map[int]bool{429: true, 503: true, 502: false, 504: false, 500: false} {
		assert.Equal(t, want, errors.Is(&httpretry.StatusError{StatusCode: code}, backoff.ErrOverloaded), "%d", code)
	}
}

// TestTransportWithPacer: an AdaptiveLimiter paces the attempts of
// repeatable and single requests alike, a 503 lowers its limit, and every
// permit comes back.
func TestTransportWithPacer(t *testing.T) {
	var s script
	l := backoff.NewAdaptiveLimiter(backoff.WithClock(testclock.NewFakeClock(epoch)), backoff.WithInitialLimit(10))
	var inflight []int
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		inflight = append(inflight, l.Inflight()) // one request at a time: no race
		s.handler(busy, ok)(w, r)
	}, backoff.WithPacer(l))
	resp, _, err := h.do(t, context.Background(), http.MethodGet, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Less(t, l.Limit(), 10, "the 503 lowered the limit")
	_, _, err = h.do(t, context.Background(), http.MethodPost, strings.NewReader("x"))
	require.NoError(t, err)
	assert.Equal(t, []int{1, 1, 1}, inflight, "each attempt held a permit, the POST's too")
	assert.Zero(t, l.Inflight())
}

// TestConstructorsRefuseWhatRetryRefuses: NewTransport and NewClient apply
// backoff.Retry's rule for a Schedule when they are called, with the same
// words, so that a Schedule Retry refuses fails where the Transport is built
// instead of panicking inside RoundTrip on every request. The Schedules that
// Retry accepts, the zero one and a DefaultRetry stand-in with wild fields
// among them, are accepted.
func TestConstructorsRefuseWhatRetryRefuses(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name string
		s    backoff.Schedule
		bad  bool
	}{
		{"zero", backoff.Schedule{}, false},
		{"DefaultRetry", backoff.DefaultRetry, false},
		{"jitter at the bound", backoff.Schedule{Duration: time.Millisecond, Steps: 3, Jitter: backoff.MaxRetryJitter}, false},
		{"jitter above the bound", backoff.Schedule{Duration: time.Millisecond, Steps: 3, Jitter: 100}, true},
		{"infinite factor without a cap", backoff.Schedule{Duration: time.Millisecond, Steps: 3, Factor: inf}, true},
		{"infinite factor with a cap", backoff.Schedule{Duration: time.Millisecond, Steps: 3, Factor: inf, Cap: time.Second}, false},
		{"no steps, no duration: DefaultRetry, whatever the jitter", backoff.Schedule{Jitter: 100, Factor: inf}, false},
		{"retry for ever", backoff.Schedule{Duration: time.Millisecond, Jitter: 11}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			retryPanic := panicValue(func() {
				ctx, cancel := context.WithCancel(context.Background())
				cancel() // Retry checks s before its first attempt, which never comes
				_ = backoff.Retry(ctx, tt.s, func(context.Context) error { return nil })
			})
			if !tt.bad {
				require.Nil(t, retryPanic, "Retry accepts it")
				assert.NotPanics(t, func() { httpretry.NewTransport(nil, tt.s) })
				assert.NotPanics(t, func() { httpretry.NewClient(tt.s) })
				return
			}
			require.IsType(t, "", retryPanic, "Retry refuses it")
			problem, ok := strings.CutPrefix(retryPanic.(string), "backoff: Retry: ")
			require.True(t, ok, retryPanic)
			assert.PanicsWithValue(t, "httpretry: NewTransport: "+problem, func() { httpretry.NewTransport(nil, tt.s) })
			assert.PanicsWithValue(t, "httpretry: NewClient: "+problem, func() { httpretry.NewClient(tt.s) })
		})
	}
	t.Run("a typed nil base", func(t *testing.T) {
		assert.PanicsWithValue(t,
			"httpretry: NewTransport: base must be nil or a usable RoundTripper, got a nil *http.Transport",
			func() { httpretry.NewTransport((*http.Transport)(nil), backoff.DefaultRetry) })
	})
}

// panicValue returns what f panics with, or nil.
func panicValue(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// TestRoundTripReturnsTheLastResponseBeforeADeadline: 2 s left on the
// request's deadline and a 503 whose Retry-After asks for 10 s. RoundTrip
// returns that 503 at once, as it does when attempts run out, rather than
// sleep into the deadline and return the context's error.
func TestRoundTripReturnsTheLastResponseBeforeADeadline(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(step{status: http.StatusServiceUnavailable, header: []string{"Retry-After", "10"}, body: "busy"}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, body, err := h.do(t, ctx, http.MethodGet, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "busy", body)
	calls, _ := s.requests()
	assert.Equal(t, 1, calls)
	assert.Empty(t, h.recordedWaits(), "no wait was started")
	assert.NoError(t, ctx.Err(), "it returned before the deadline")
}

// stallingServer answers the first request by calling stall(w) and then
// blocking until the request ends, and every later one with 200 "ok". It
// reports each request's arrival on arrived.
func stallingServer(t *testing.T, stall func(w http.ResponseWriter)) (handler http.HandlerFunc, arrived chan int) {
	var mu sync.Mutex
	calls := 0
	arrived = make(chan int, 10)
	return func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		arrived <- n
		if n == 1 {
			stall(w)
			<-r.Context().Done()
			return
		}
		io.WriteString(w, "ok")
	}, arrived
}

// TestAttemptTimeoutBoundsAStalledHeader: a server that never sends the
// response's header is given up on at WithAttemptTimeout, on the
// Transport's clock, and the request is retried.
func TestAttemptTimeoutBoundsAStalledHeader(t *testing.T) {
	handler, arrived := stallingServer(t, func(http.ResponseWriter) {})
	h := newHarness(t, handler, backoff.WithAttemptTimeout(5*time.Second))
	type result struct {
		resp *http.Response
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, body, err := h.do(t, context.Background(), http.MethodGet, nil)
		done <- result{resp, body, err}
	}()
	assert.Equal(t, 1, <-arrived)
	h.clock.Step(5 * time.Second) // the attempt's timeout
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.resp.StatusCode)
	assert.Equal(t, "ok", r.body)
	assert.Equal(t, 2, <-arrived, "retried after the stalled attempt")
	assert.Equal(t, []time.Duration{schedule.Duration}, h.recordedWaits(), "then the schedule's first wait")
}

// TestAttemptTimeoutBoundsAStalledBody: the response returned keeps its
// attempt's timeout while its body is read: a body that stalls fails at
// the timeout instead of blocking forever.
func TestAttemptTimeoutBoundsAStalledBody(t *testing.T) {
	handler, arrived := stallingServer(t, func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
	})
	h := newHarness(t, handler, backoff.WithAttemptTimeout(5*time.Second))
	req, err := http.NewRequest(http.MethodGet, h.srv.URL, nil)
	require.NoError(t, err)
	resp, err := h.rt.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, 1, <-arrived)
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		read <- err
	}()
	h.clock.Step(5 * time.Second)
	err = <-read
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the stalled read ends at the attempt's timeout")
	require.NoError(t, resp.Body.Close())
	assert.False(t, h.clock.HasWaiters(), "closing the body released the attempt's timer")
}

// TestAttemptTimeoutKeepsTheReturnedBodyReadable: the response returned is
// read whole after RoundTrip returns; its attempt's context ends only when
// the body is closed (or at the timeout).
func TestAttemptTimeoutKeepsTheReturnedBodyReadable(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(ok), backoff.WithAttemptTimeout(time.Minute))
	resp, body, err := h.do(t, context.Background(), http.MethodGet, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "ok", body)
	assert.False(t, h.clock.HasWaiters(), "the timer is released with the body")
}
