package backoff_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// Pacing calls to an API that allows 10 requests per second with bursts of
// 5: the first five go at once, then one every 100 ms. Reserve says how long
// each call must wait; a real caller would sleep that long, or call Wait,
// which does both. The fake clock stands in for the passing time.
func ExampleLimiter() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	api := backoff.NewLimiter(10, 5, backoff.WithClock(clk))
	for call := 1; call <= 8; call++ {
		r := api.Reserve()
		clk.Step(r.Delay()) // in production: time.Sleep(r.Delay()), or api.Wait(ctx)
		fmt.Printf("call %d at %v\n", call, clk.Since(start))
	}
	fmt.Println("allowed at once now:", api.Allow())
	// Output:
	// call 1 at 0s
	// call 2 at 0s
	// call 3 at 0s
	// call 4 at 0s
	// call 5 at 0s
	// call 6 at 100ms
	// call 7 at 200ms
	// call 8 at 300ms
	// allowed at once now: false
}

// Per-client limits in an HTTP handler: each client gets 1 request per
// second with bursts of 2, and a client over its limit gets 429 while the
// others are served. The handler is called in-process.
func ExampleKeyedLimiter() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	perClient := backoff.NewKeyedLimiter[string](1, 2, backoff.WithClock(clk), backoff.WithMaxKeys(100_000))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !perClient.Allow(r.Header.Get("X-Client-ID")) {
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	get := func(client string) int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-Client-ID", client)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code
	}
	fmt.Println("alice:", get("alice"), get("alice"), get("alice"))
	fmt.Println("bob:", get("bob"))
	clk.Step(time.Second)
	fmt.Println("alice a second later:", get("alice"), get("alice"))
	// Output:
	// alice: 200 200 429
	// bob: 200
	// alice a second later: 200 429
}
