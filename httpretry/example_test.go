package httpretry_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
)

// fakeServer is a RoundTripper that answers from a script instead of the
// network: one response per call, the last one for ever after.
type fakeServer []*http.Response

func (s *fakeServer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp := (*s)[0]
	if len(*s) > 1 {
		*s = (*s)[1:]
	}
	copied := *resp
	copied.Request = req
	copied.Body = io.NopCloser(strings.NewReader(http.StatusText(resp.StatusCode)))
	return &copied, nil
}

func answer(code int, header ...string) *http.Response {
	resp := &http.Response{StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), Header: http.Header{}}
	for i := 0; i+1 < len(header); i += 2 {
		resp.Header.Set(header[i], header[i+1])
	}
	return resp
}

// A client that retries: the server's Retry-After replaces the Schedule's
// wait after the 503, the Schedule paces the rest. The waits run on a fake
// clock, stepped from the notify hook, so the Example is instant.
func Example() {
	server := &fakeServer{
		answer(http.StatusServiceUnavailable, "Retry-After", "2"),
		answer(http.StatusBadGateway),
		answer(http.StatusOK),
	}
	clock := testclock.NewFakeClock(time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC))
	start := clock.Now()

	client := &http.Client{Transport: httpretry.NewTransport(server,
		backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Steps: 4, Cap: 5 * time.Second},
		backoff.WithClock(clock),
		backoff.WithNotify(func(attempt int, err error, next time.Duration) {
			fmt.Printf("attempt %d: %v; next in %v\n", attempt, err, next)
			clock.Step(next)
		}),
	)}

	resp, err := client.Get("http://api.example/items")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Printf("%s after %v\n", resp.Status, clock.Since(start))
	// Output:
	// attempt 1: httpretry: 503 Service Unavailable; next in 2s
	// attempt 2: httpretry: 502 Bad Gateway; next in 200ms
	// 200 OK after 2.2s
}

// When the attempts run out on a retryable status, the last response is
// returned with a nil error, as http.Client returns any status, body
// included. A POST is retried only because it carries an Idempotency-Key.
func Example_exhausted() {
	server := &fakeServer{answer(http.StatusTooManyRequests, "Retry-After", "1")}
	clock := testclock.NewFakeClock(time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC))
	var attempts int
	client := &http.Client{Transport: httpretry.NewTransport(server,
		backoff.Schedule{Duration: time.Second, Steps: 3},
		backoff.WithClock(clock),
		backoff.WithNotify(func(attempt int, _ error, next time.Duration) {
			attempts = attempt + 1
			clock.Step(next)
		}),
	)}

	req, _ := http.NewRequest(http.MethodPost, "http://api.example/orders", strings.NewReader(`{"item": 7}`))
	req.Header.Set("Idempotency-Key", "order-7")
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d attempts: %s (%s)\n", attempts, resp.Status, body)
	// Output:
	// 3 attempts: 429 Too Many Requests (Too Many Requests)
}

// A Transport retries only requests that are safe to send twice. Its
// Idempotent hook widens (or narrows) the default rule.
func ExampleTransport_Idempotent() {
	t := httpretry.NewTransport(nil, backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Steps: 3})
	t.Idempotent = func(req *http.Request) bool {
		// This API's search endpoint takes its query in a POST body and
		// changes nothing.
		return httpretry.IsIdempotent(req) || (req.Method == http.MethodPost && req.URL.Path == "/search")
	}
	for _, target := range []string{"/search", "/orders"} {
		req, _ := http.NewRequest(http.MethodPost, "http://api.example"+target, nil)
		fmt.Println("POST", target, "retried:", t.Idempotent(req))
	}
	// Output:
	// POST /search retried: true
	// POST /orders retried: false
}

// A Transport paced by an AdaptiveRate, for an API whose quota answers 429
// with a Retry-After: the 429 cuts the rate that later requests are sent at,
// and the retry waits for the server's Retry-After.
func ExampleNewTransport_quota() {
	server := &fakeServer{answer(http.StatusTooManyRequests, "Retry-After", "2"), {StatusCode: http.StatusOK}}
	clock := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rate := backoff.NewAdaptiveRate(backoff.WithClock(clock), backoff.WithInitialRate(10))
	client := &http.Client{Transport: httpretry.NewTransport(server, backoff.Schedule{Steps: 3, Duration: time.Second},
		backoff.WithClock(clock), backoff.WithPacer(rate),
		backoff.WithNotify(func(_ int, _ error, next time.Duration) { clock.Step(next) }))}
	resp, err := client.Get("http://api.example/items")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Printf("%d after a wait of %v; rate cut from 10 to %.0f requests/s\n", resp.StatusCode, clock.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), rate.Rate())
	// Output: 200 after a wait of 2s; rate cut from 10 to 8 requests/s
}

// A Transport paced by an AdaptiveLimiter, for a downstream that slows down
// and answers 503 when too many requests are in flight: each attempt holds a
// permit, and the 503 lowers the limit.
func ExampleNewTransport_overload() {
	server := &fakeServer{{StatusCode: http.StatusServiceUnavailable}, {StatusCode: http.StatusOK}}
	clock := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	limiter := backoff.NewAdaptiveLimiter(backoff.WithClock(clock), backoff.WithInitialLimit(20))
	client := &http.Client{Transport: httpretry.NewTransport(server, backoff.Schedule{Steps: 3, Duration: time.Second},
		backoff.WithClock(clock), backoff.WithPacer(limiter),
		backoff.WithNotify(func(_ int, _ error, next time.Duration) { clock.Step(next) }))}
	resp, err := client.Get("http://api.example/items")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "limit lowered:", limiter.Limit() < 20, "in flight:", limiter.Inflight())
	// Output: 200 limit lowered: true in flight: 0
}

// byHost is a RoundTripper that sends each request through the Transport
// of its host, made on first use with a Breaker of its own: a host that is
// down opens its breaker and no other's.
type byHost struct {
	newTransport func() *httpretry.Transport
	mu           sync.Mutex
	transports   map[string]*httpretry.Transport
}

func (b *byHost) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	t, ok := b.transports[req.URL.Host]
	if !ok {
		t = b.newTransport()
		b.transports[req.URL.Host] = t
	}
	b.mu.Unlock()
	return t.RoundTrip(req)
}

// hosts answers 503 for down.example and 200 for every other host.
type hosts struct{}

func (hosts) RoundTrip(req *http.Request) (*http.Response, error) {
	code := http.StatusOK
	if req.URL.Host == "down.example" {
		code = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Request: req,
		Body: io.NopCloser(strings.NewReader(""))}, nil
}

// A Transport paced by a Breaker shares it across every host it sends to,
// as it shares any pacer. To give each host its own breaker, route each
// host to a Transport of its own.
func ExampleTransport_breakerPerHost() {
	clock := testclock.NewFakeClock(time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC))
	client := &http.Client{Transport: &byHost{
		transports: map[string]*httpretry.Transport{},
		newTransport: func() *httpretry.Transport {
			breaker := backoff.NewBreaker(backoff.WithClock(clock), backoff.WithBreakerConsecutiveFailures(3))
			return httpretry.NewTransport(hosts{}, backoff.Schedule{Steps: 1}, backoff.WithClock(clock), backoff.WithPacer(breaker))
		},
	}}
	for _, url := range []string{
		"http://down.example/", "http://down.example/", "http://down.example/", "http://down.example/",
		"http://up.example/",
	} {
		resp, err := client.Get(url)
		if errors.Is(err, backoff.ErrBreakerOpen) {
			fmt.Println(url, "refused: breaker open")
			continue
		}
		if err != nil {
			fmt.Println(url, err)
			continue
		}
		resp.Body.Close()
		fmt.Println(url, resp.StatusCode)
	}
	// Output:
	// http://down.example/ 503
	// http://down.example/ 503
	// http://down.example/ 503
	// http://down.example/ refused: breaker open
	// http://up.example/ 200
}

// slowReplica answers its first request only by giving up when the request
// is cancelled, and every later one at once.
type slowReplica struct {
	arrived chan struct{} // closed when the first request arrives
	calls   atomic.Int32
}

func (s *slowReplica) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.calls.Add(1) == 1 {
		close(s.arrived)
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Request: req,
		Body: io.NopCloser(strings.NewReader("from the hedge"))}, nil
}

// A GET that has no answer after 50 ms is sent again beside the first; the
// first answer wins and the slow request is cancelled. The 50 ms pass on a
// fake clock here.
func ExampleTransport_hedge() {
	clock := testclock.NewFakeClock(time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC))
	replica := &slowReplica{arrived: make(chan struct{})}
	client := &http.Client{Transport: httpretry.NewTransport(replica, backoff.Schedule{Steps: 3},
		backoff.WithClock(clock), backoff.WithHedge(50*time.Millisecond))}
	go func() {
		<-replica.arrived
		clock.Step(50 * time.Millisecond)
	}()
	resp, err := client.Get("http://replica.example/")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", replica.calls.Load(), "requests")
	// Output: 200 from the hedge after 2 requests
}
