package httpretry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
)

// epoch is where every fake clock of these tests starts.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// schedule is the tests' pacing without hints: 100ms, 200ms; 3 attempts.
var schedule = backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Steps: 3}

// harness is a test server behind a retrying Transport on a fake clock.
// Each wait the Transport announces is recorded and stepped at once, so a
// request with retries completes without sleeping.
type harness struct {
	srv   *httptest.Server
	clock *testclock.FakeClock
	rt    *httpretry.Transport
	meter *meter

	mu       sync.Mutex
	waits    []time.Duration // each wait announced through WithNotify
	newConns atomic.Int32    // connections the server accepted
}

// newHarness starts handler on a test server and returns a Transport to it
// that retries on schedule with opts added.
func newHarness(t *testing.T, handler http.HandlerFunc, opts ...backoff.Option) *harness {
	t.Helper()
	h := &harness{clock: testclock.NewFakeClock(epoch)}
	h.srv = httptest.NewUnstartedServer(handler)
	h.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			h.newConns.Add(1)
		}
	}
	h.srv.Start()
	t.Cleanup(h.srv.Close) // also closes the idle connections of srv.Client()

	h.meter = &meter{base: h.srv.Client().Transport}
	opts = append([]backoff.Option{
		backoff.WithClock(h.clock),
		backoff.WithNotify(func(_ int, _ error, next time.Duration) {
			h.mu.Lock()
			h.waits = append(h.waits, next)
			h.mu.Unlock()
			h.clock.Step(next)
		}),
	}, opts...)
	h.rt = httpretry.NewTransport(h.meter, schedule, opts...)
	return h
}

// do sends a request for method with body (nil for none) and headers given as
// name, value pairs, and returns the response, its body read and closed.
func (h *harness) do(t *testing.T, ctx context.Context, method string, body io.Reader, header ...string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, h.srv.URL, body)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	read, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(read), nil
}

func (h *harness) recordedWaits() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.waits...)
}

// meter is a RoundTripper that counts the attempts that reach it and the
// response bodies it hands out and that are closed.
type meter struct {
	base                     http.RoundTripper
	attempts, opened, closed atomic.Int32
}

func (m *meter) RoundTrip(req *http.Request) (*http.Response, error) {
	m.attempts.Add(1)
	resp, err := m.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	m.opened.Add(1)
	resp.Body = &meteredBody{ReadCloser: resp.Body, closed: &m.closed}
	return resp, nil
}

type meteredBody struct {
	io.ReadCloser
	once   sync.Once
	closed *atomic.Int32
}

func (b *meteredBody) Close() error {
	b.once.Do(func() { b.closed.Add(1) })
	return b.ReadCloser.Close()
}

// script answers the i-th request (from 0) with steps[i], and the last step
// for ever after. It records each request's body.
type script struct {
	mu     sync.Mutex
	calls  int
	bodies []string
}

// step is one scripted answer: a status, headers as name, value pairs, and a
// body.
type step struct {
	status int
	header []string
	body   string
}

func (s *script) handler(steps ...step) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		read, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		st := steps[min(s.calls, len(steps)-1)]
		s.calls++
		s.bodies = append(s.bodies, string(read))
		s.mu.Unlock()
		for i := 0; i+1 < len(st.header); i += 2 {
			if st.header[i+1] == "" {
				w.Header()[st.header[i]] = nil // suppress, as for Date
			} else {
				w.Header().Set(st.header[i], st.header[i+1])
			}
		}
		w.WriteHeader(st.status)
		io.WriteString(w, st.body)
	}
}

func (s *script) requests() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, append([]string(nil), s.bodies...)
}

// instant returns options that run a Transport's waits on a fake clock,
// stepped by each wait as it is announced, and append the waits to *waits
// unless waits is nil.
func instant(waits *[]time.Duration) []backoff.Option {
	clock := testclock.NewFakeClock(epoch)
	return []backoff.Option{
		backoff.WithClock(clock),
		backoff.WithNotify(func(_ int, _ error, next time.Duration) {
			if waits != nil {
				*waits = append(*waits, next)
			}
			clock.Step(next)
		}),
	}
}
