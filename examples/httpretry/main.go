// Command httpretry retries an HTTP GET with backoff.Retry against a local
// server that answers 503 Service Unavailable with a Retry-After header, then
// 500 Internal Server Error, before 200 OK, and prints each attempt.
//
//	go run ./examples/httpretry
//
// It shows the three things a real HTTP client needs from a retry loop: a
// server's Retry-After hint replaces the scheduled wait (bounded, so that a
// hostile hint cannot park the client), errors that retrying cannot fix
// (4xx) end the loop at once through backoff.Permanent, and the request
// carries the caller's context, so cancelling it ends both the request and
// the waits. It runs for about 3 seconds, the waits the server asks for.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/retrykit/backoff"
)

func main() {
	if err := run(context.Background(), os.Stdout, clock.RealClock{}, nil); err != nil {
		fmt.Fprintln(os.Stderr, "httpretry:", err)
		os.Exit(1)
	}
}

// schedule is the client's own pacing, used when the server gives no hint:
// 200ms, doubling, at most 5s apart, at most 6 attempts.
var schedule = backoff.Schedule{Duration: 200 * time.Millisecond, Factor: 2, Steps: 6, Cap: 5 * time.Second}

// run starts the flaky server, fetches from it with backoff.Retry on clk,
// and reports each attempt to w. After reporting a wait it calls waited, if
// set; the test uses it to step a fake clock.
func run(ctx context.Context, w io.Writer, clk clock.WithDelayedExecution, waited func(time.Duration)) error {
	srv := httptest.NewServer(flakyServer())
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()

	start := clk.Now()
	body, err := backoff.RetryValue(ctx, schedule, func(ctx context.Context) (string, error) {
		fmt.Fprintf(w, "attempt at %v: ", clk.Since(start).Round(time.Millisecond))
		body, err := get(ctx, client, srv.URL, clk.Now())
		if err == nil {
			fmt.Fprintln(w, "200 OK")
		}
		return body, err
	},
		backoff.WithClock(clk),
		backoff.WithMaxRetryAfter(10*time.Second), // trust a server's hint up to 10s
		backoff.WithNotify(func(_ int, err error, next time.Duration) {
			fmt.Fprintf(w, "%v; next attempt in %v\n", err, next)
			if waited != nil {
				waited(next)
			}
		}),
	)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "body: %s\n", body)
	return nil
}

// flakyServer answers 503 with "Retry-After: 1" twice, then 500 without a
// hint, then 200 OK.
func flakyServer() http.Handler {
	var calls atomic.Int32
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch calls.Add(1) {
		case 1, 2:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case 3:
			http.Error(w, "oops", http.StatusInternalServerError)
		default:
			fmt.Fprint(w, "hello")
		}
	})
}

// statusError is an HTTP response that is not 200 OK.
type statusError struct{ status string }

func (e *statusError) Error() string { return e.status }

// get fetches url once. It returns the body on 200 OK; otherwise an error
// that tells Retry what to do: a 429 or 5xx is retried, with the server's
// Retry-After hint if it sent one; any other status is permanent; a network
// error is retried.
func get(ctx context.Context, client *http.Client, url string, now time.Time) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", backoff.Permanent(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode == http.StatusOK {
		return string(body), nil
	}
	err = &statusError{status: resp.Status}
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
		return "", backoff.Permanent(err)
	}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
		return "", backoff.RetryAfter(d, fmt.Errorf("%w, Retry-After %v", err, d))
	}
	return "", err
}

// parseRetryAfter reads a Retry-After header: a number of seconds, or an
// HTTP date (then the wait is measured from now). A date in the past means
// no wait.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		// Saturate: a hint of more than 292 years is still "a very long
		// time", which WithMaxRetryAfter bounds.
		if secs > int64(time.Duration(1<<63-1)/time.Second) {
			return time.Duration(1<<63 - 1), true
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
