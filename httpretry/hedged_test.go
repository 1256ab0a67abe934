package httpretry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
)

// hedgeDelay is the hedge delay of these tests, on their fake clock.
const hedgeDelay = 10 * time.Millisecond

// slowFirst is a test server whose first request gets no answer until the
// client gives up on it, and whose later ones are answered by next. It
// records each request's method and body.
type slowFirst struct {
	srv      *httptest.Server
	arrived  chan struct{} // receives when the first request has arrived
	gaveUp   chan struct{} // closed when the client gave up on the first request
	mu       sync.Mutex
	requests []string // method and body of each request, in order of arrival
}

func newSlowFirst(t *testing.T, next http.HandlerFunc) *slowFirst {
	t.Helper()
	s := &slowFirst{arrived: make(chan struct{}, 1), gaveUp: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.requests)
		s.requests = append(s.requests, r.Method+" "+string(body))
		s.mu.Unlock()
		if n > 0 {
			next(w, r)
			return
		}
		s.arrived <- struct{}{}
		<-r.Context().Done()
		close(s.gaveUp)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *slowFirst) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// roundTripAsync sends req through rt on a goroutine of its own.
func roundTripAsync(rt http.RoundTripper, req *http.Request) <-chan result {
	out := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		out <- result{resp, err}
	}()
	return out
}

type result struct {
	resp *http.Response
	err  error
}

// TestHedgeWinsOverASlowFirstAttempt: a first attempt that gets no answer
// within the hedge delay gets a hedge, whose response is returned; the first
// attempt's request is cancelled (the server sees its context end), and the
// winner's body stays readable after RoundTrip returned, until it is closed.
func TestHedgeWinsOverASlowFirstAttempt(t *testing.T) {
	more := make(chan struct{})
	s := newSlowFirst(t, func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "hedge ")
		w.(http.Flusher).Flush() // the header and a first part now, the rest later
		<-more
		io.WriteString(w, "wins")
	})
	clk := testclock.NewFakeClock(epoch)
	m := &meter{base: s.srv.Client().Transport}
	tr := httpretry.NewTransport(m, backoff.Schedule{Steps: 3}, backoff.WithClock(clk), backoff.WithHedge(hedgeDelay))
	req, err := http.NewRequest(http.MethodGet, s.srv.URL, nil)
	require.NoError(t, err)

	out := roundTripAsync(tr, req)
	<-s.arrived
	clk.Step(hedgeDelay)
	r := <-out
	require.NoError(t, r.err)
	<-s.gaveUp // the loser was cancelled
	close(more)
	body, err := io.ReadAll(r.resp.Body)
	require.NoError(t, err, "the winner's context outlives RoundTrip")
	assert.Equal(t, "hedge wins", string(body))
	require.NoError(t, r.resp.Body.Close())
	assert.Equal(t, []string{"GET ", "GET "}, s.received())
	assert.EqualValues(t, 2, m.attempts.Load())
	assert.EqualValues(t, 1, m.opened.Load(), "the loser got no response")
	assert.EqualValues(t, 1, m.closed.Load())
}

// lateFirst is a RoundTripper whose first request is sent only once a
// later one has been answered, and whatever its context says: the first
// attempt gets a response after a hedge has won.
type lateFirst struct {
	base     http.RoundTripper
	mu       sync.Mutex
	calls    int
	sending  chan struct{} // closed when the first request reaches RoundTrip
	answered chan struct{} // closed when the second request has its response
}

func (l *lateFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.calls++
	n := l.calls
	l.mu.Unlock()
	if n > 1 {
		resp, err := l.base.RoundTrip(req)
		if n == 2 {
			close(l.answered)
		}
		return resp, err
	}
	close(l.sending)
	<-l.answered
	return l.base.RoundTrip(req.WithContext(context.WithoutCancel(req.Context())))
}

// TestLateLoserResponseIsClosed: a first attempt whose response arrives
// after its hedge won has that response drained and closed before
// RoundTrip returns; the winner's is the caller's to close.
func TestLateLoserResponseIsClosed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	clk := testclock.NewFakeClock(epoch)
	m := &meter{base: srv.Client().Transport}
	base := &lateFirst{base: m, sending: make(chan struct{}), answered: make(chan struct{})}
	tr := httpretry.NewTransport(base, backoff.Schedule{Steps: 3}, backoff.WithClock(clk), backoff.WithHedge(hedgeDelay))
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)

	out := roundTripAsync(tr, req)
	<-base.sending // the first attempt's hedge timer is armed before it reaches base
	clk.Step(hedgeDelay)
	r := <-out
	require.NoError(t, r.err)
	assert.EqualValues(t, 2, m.opened.Load(), "both attempts got a response")
	assert.EqualValues(t, 1, m.closed.Load(), "the loser's was closed before RoundTrip returned")
	body, err := io.ReadAll(r.resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(body))
	require.NoError(t, r.resp.Body.Close())
	assert.EqualValues(t, 2, m.closed.Load())
}

// TestHedgeReplaysTheBody: a hedged PUT sends its body whole on each
// attempt, the hedge's through GetBody.
func TestHedgeReplaysTheBody(t *testing.T) {
	s := newSlowFirst(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "stored") })
	clk := testclock.NewFakeClock(epoch)
	tr := httpretry.NewTransport(s.srv.Client().Transport, backoff.Schedule{Steps: 3},
		backoff.WithClock(clk), backoff.WithHedge(hedgeDelay))
	req, err := http.NewRequest(http.MethodPut, s.srv.URL, strings.NewReader("payload-123"))
	require.NoError(t, err)

	out := roundTripAsync(tr, req)
	<-s.arrived
	clk.Step(hedgeDelay)
	r := <-out
	require.NoError(t, r.err)
	body, err := io.ReadAll(r.resp.Body)
	require.NoError(t, err)
	r.resp.Body.Close()
	assert.Equal(t, "stored", string(body))
	<-s.gaveUp
	assert.Equal(t, []string{"PUT payload-123", "PUT payload-123"}, s.received())
}

// TestRequestsSentOnceAreNotHedged: a request that may not be repeated (a
// POST, a body without GetBody) is not hedged, however long its answer
// takes: its hedge timer is never armed.
func TestRequestsSentOnceAreNotHedged(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  func(url string) *http.Request
	}{
		{"POST", func(url string) *http.Request {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
			return req
		}},
		{"GET with a stream body", func(url string) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, url, io.NopCloser(strings.NewReader("x")))
			req.GetBody = nil
			return req
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := make(chan struct{})
			arrived := make(chan struct{}, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				arrived <- struct{}{}
				<-answer
				io.WriteString(w, "ok")
			}))
			t.Cleanup(srv.Close)
			clk := testclock.NewFakeClock(epoch)
			m := &meter{base: srv.Client().Transport}
			tr := httpretry.NewTransport(m, backoff.Schedule{Steps: 3}, backoff.WithClock(clk), backoff.WithHedge(hedgeDelay))

			out := roundTripAsync(tr, tc.req(srv.URL))
			<-arrived
			assert.False(t, clk.HasWaiters(), "no hedge timer")
			clk.Step(hedgeDelay)
			close(answer)
			r := <-out
			require.NoError(t, r.err)
			r.resp.Body.Close()
			assert.EqualValues(t, 1, m.attempts.Load())
		})
	}
}

// TestHedgedRequestRetriesAfterEveryAttemptFailed: with hedging on, a
// 503 to every attempt of a round is retried after the Schedule's wait,
// and when attempts run out the last 503 is returned, the earlier ones
// closed.
func TestHedgedRequestRetriesAfterEveryAttemptFailed(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(step{status: http.StatusServiceUnavailable, body: "busy"}), backoff.WithHedge(time.Hour))
	resp, body, err := h.do(t, context.Background(), http.MethodGet, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "busy", body)
	calls, _ := s.requests()
	assert.Equal(t, 3, calls)
	assert.Equal(t, h.meter.opened.Load(), h.meter.closed.Load(), "every response closed")
}

// TestHedgedAttemptTimeoutOutlivesTheCall: with backoff.WithAttemptTimeout,
// a hedged request's response keeps its attempt's timer until its body is
// closed, and reads until then; closing the body releases it.
func TestHedgedAttemptTimeoutOutlivesTheCall(t *testing.T) {
	var s script
	h := newHarness(t, s.handler(ok), backoff.WithHedge(time.Hour), backoff.WithAttemptTimeout(time.Minute))
	req, err := http.NewRequest(http.MethodGet, h.srv.URL, nil)
	require.NoError(t, err)
	resp, err := h.rt.RoundTrip(req)
	require.NoError(t, err)
	assert.True(t, h.clock.HasWaiters(), "the attempt's timer runs while the body is open")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(body))
	require.NoError(t, resp.Body.Close())
	assert.False(t, h.clock.HasWaiters(), "closing the body released the timer")
}

// TestHedgedRoundOfFailuresIsRetried: a hedge that fires and fails as its
// attempt does leads to a retry after the Schedule's wait; the answer is the
// retry's, and every response of the failed round is closed.
func TestHedgedRoundOfFailuresIsRetried(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n <= 2 { // the first round: the attempt and its hedge, answered together
			arrived <- struct{}{}
			<-release
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy")
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	clk := testclock.NewFakeClock(epoch)
	m := &meter{base: srv.Client().Transport}
	var waits []time.Duration
	tr := httpretry.NewTransport(m, backoff.Schedule{Duration: time.Second, Steps: 3}, backoff.WithClock(clk),
		backoff.WithHedge(hedgeDelay), backoff.WithNotify(func(_ int, _ error, next time.Duration) {
			waits = append(waits, next) // on the request's goroutine
			clk.Step(next)
		}))
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)

	out := roundTripAsync(tr, req)
	<-arrived
	clk.Step(hedgeDelay)
	<-arrived
	close(release)
	r := <-out
	require.NoError(t, r.err)
	body, err := io.ReadAll(r.resp.Body)
	require.NoError(t, err)
	require.NoError(t, r.resp.Body.Close())
	assert.Equal(t, "ok", string(body))
	assert.Equal(t, []time.Duration{time.Second}, waits)
	assert.EqualValues(t, 3, m.attempts.Load())
	assert.Equal(t, m.opened.Load(), m.closed.Load(), "every response closed")
}
