// Program backoff is the release rehearsal's user of the module
// github.com/retrykit/backoff: a Retry that succeeds at its third attempt, and
// an httpretry client that gets past one 503.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
)

func main() {
	s := backoff.Schedule{Duration: time.Millisecond, Factor: 2, Steps: 5}
	attempts := 0
	err := backoff.Retry(context.Background(), s, func(context.Context) error {
		attempts++
		if attempts < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || attempts != 3 {
		fail("Retry: %d attempts, error %v; want 3 attempts and no error", attempts, err)
	}
	fmt.Printf("backoff.Retry: succeeded at attempt %d\n", attempts)

	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		if requests == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	resp, err := httpretry.NewClient(s).Get(srv.URL)
	if err != nil {
		fail("httpretry: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" || requests != 2 {
		fail("httpretry: %s %q after %d requests; want 200 \"ok\" after 2", resp.Status, body, requests)
	}
	fmt.Printf("httpretry.NewClient: %s after %d requests\n", resp.Status, requests)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "backoff: "+format+"\n", args...)
	os.Exit(1)
}
