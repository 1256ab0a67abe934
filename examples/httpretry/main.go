// Command httpretry fetches a URL through an httpretry.Transport from a local
// server that answers 503 Service Unavailable with a Retry-After header
// twice, then 500 Internal Server Error, before 200 OK, and prints each
// attempt.
//
//	go run ./examples/httpretry
//
// It shows what the Transport does that a hand-written retry loop around
// http.Client has to get right: the server's Retry-After hint replaces the
// scheduled wait (bounded, so that a hostile hint cannot park the client),
// a status that retrying cannot fix (4xx) is returned at once, every
// response given up for a retry is drained and closed so its connection is
// reused, and the request's context ends both the request and the waits.
// It runs for about 3 seconds, the waits the server asks for.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
)

func main() {
	srv := httptest.NewServer(flakyServer())
	defer srv.Close()
	err := fetch(context.Background(), os.Stdout, srv.Client().Transport, srv.URL, clock.RealClock{}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpretry:", err)
		srv.Close()
		os.Exit(1)
	}
}

// schedule is the client's own pacing, used when the server gives no hint:
// 200ms, doubling, at most 5s apart, at most 6 attempts.
var schedule = backoff.Schedule{Duration: 200 * time.Millisecond, Factor: 2, Steps: 6, Cap: 5 * time.Second}

// fetch GETs url through an httpretry.Transport over base, waiting on clk,
// and reports each attempt to w. After reporting a wait it calls waited, if
// set; the test uses it to step a fake clock.
func fetch(ctx context.Context, w io.Writer, base http.RoundTripper, url string, clk clock.WithDelayedExecution, waited func(time.Duration)) error {
	start := clk.Now()
	// Report each attempt as it reaches the network, on a line that the
	// notify hook or the end of the fetch completes.
	lineOpen := false
	logged := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		fmt.Fprintf(w, "attempt at %v: ", clk.Since(start).Round(time.Millisecond))
		lineOpen = true
		resp, err := base.RoundTrip(req)
		switch {
		case err != nil:
			fmt.Fprint(w, err)
		case resp.Header.Get("Retry-After") != "":
			fmt.Fprintf(w, "%s, Retry-After: %s", resp.Status, resp.Header.Get("Retry-After"))
		default:
			fmt.Fprint(w, resp.Status)
		}
		return resp, err
	})
	transport := httpretry.NewTransport(logged, schedule,
		backoff.WithClock(clk),
		backoff.WithMaxRetryAfter(10*time.Second), // trust a server's hint up to 10s
		backoff.WithNotify(func(_ int, _ error, next time.Duration) {
			fmt.Fprintf(w, "; next attempt in %v\n", next)
			lineOpen = false
			if waited != nil {
				waited(next)
			}
		}),
	)
	transport.RetryInternalServerError = true // this server's 500s pass
	client := &http.Client{Transport: transport}
	defer client.CloseIdleConnections()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if lineOpen {
		fmt.Fprintln(w)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status + ": " + strings.TrimSpace(string(body)))
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

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
