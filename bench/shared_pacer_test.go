package bench

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
)

// TestSharedAdaptiveRateRealTime is the root package's
// TestAdaptiveRateSharedByGoroutines (httpretry, on a synctest clock) in
// real time, over real HTTP: 10 goroutines × 50 GETs through one
// httpretry client against a server allowing 20 requests/s (a token bucket
// of 20), which answers 429 with Retry-After: 1 beyond that; plain retries
// against WithPacer(NewAdaptiveRate()). The quota's minimum is 24 s, so the
// two runs take about a minute: it is skipped with -short (CI), and run by
// hand with
//
//	cd bench && go test -run TestSharedAdaptiveRateRealTime -v .
func TestSharedAdaptiveRateRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of real time")
	}
	type result struct {
		elapsed   time.Duration
		throttled int
	}
	results := map[bool]result{}
	for _, paced := range []bool{false, true} {
		var mu sync.Mutex
		tokens, last, throttled := 20.0, time.Now(), 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			now := time.Now()
			tokens = min(20, tokens+now.Sub(last).Seconds()*20)
			last = now
			ok := tokens >= 1
			if ok {
				tokens--
			} else {
				throttled++
			}
			mu.Unlock()
			if !ok {
				w.Header().Set("Retry-After", strconv.Itoa(1))
				w.WriteHeader(http.StatusTooManyRequests)
			}
		}))
		var opts []backoff.Option
		if paced {
			opts = append(opts, backoff.WithPacer(backoff.NewAdaptiveRate()))
		}
		client := httpretry.NewClient(backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Jitter: 0.1}, opts...)
		start := time.Now()
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					resp, err := client.Get(srv.URL)
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		client.CloseIdleConnections()
		srv.Close()
		name := "plain retries"
		if paced {
			name = "AdaptiveRate"
		}
		t.Logf("%s: %v, %.2f× the quota's minimum (24 s), %d 429s", name, elapsed.Round(time.Millisecond), elapsed.Seconds()/24, throttled)
		results[paced] = result{elapsed, throttled}
	}
	// Real time on a shared machine: the bounds are looser than the
	// synctest run's 1.05× (measured here: 1.05×, 3 429s against 207).
	if r := results[true]; r.elapsed > 27*time.Second || r.throttled > results[false].throttled/10 {
		t.Errorf("AdaptiveRate: %v and %d 429s, want ≤ 27 s and ≤ a tenth of plain retries' %d", r.elapsed, r.throttled, results[false].throttled)
	}
}
