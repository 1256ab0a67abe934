//go:build go1.25

package httpretry_test

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/retrykit/backoff"
)

// windowServer allows limit requests per fixed window, answers 429 with
// Retry-After beyond it, and reports what is left in one family of
// rate-limit headers.
type windowServer struct {
	limit  int
	window time.Duration
	family string // "ietf", "x", "openai"
	start  time.Time

	mu               sync.Mutex
	windowAt         time.Time
	used             int
	served, rejected int
}

func (s *windowServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	now := time.Now()
	if s.windowAt.IsZero() || now.Sub(s.windowAt) >= s.window {
		s.windowAt = now.Truncate(s.window)
		if s.windowAt.Before(s.start) {
			s.windowAt = s.start
		}
		s.used = 0
	}
	ok := s.used < s.limit
	if ok {
		s.used++
		s.served++
	} else {
		s.rejected++
	}
	left := s.limit - s.used
	reset := s.windowAt.Add(s.window).Sub(now)
	s.mu.Unlock()

	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: req}
	secs := strconv.Itoa(int(math.Ceil(reset.Seconds())))
	switch s.family {
	case "ietf":
		resp.Header.Set("RateLimit", `"default";r=`+strconv.Itoa(left)+";t="+secs)
	case "x":
		resp.Header.Set("X-RateLimit-Remaining", strconv.Itoa(left))
		resp.Header.Set("X-RateLimit-Reset", secs)
	case "openai":
		resp.Header.Set("x-ratelimit-remaining-requests", strconv.Itoa(left))
		resp.Header.Set("x-ratelimit-reset-requests", reset.String())
	}
	if !ok {
		resp.StatusCode = http.StatusTooManyRequests
		resp.Header.Set("Retry-After", secs)
	}
	return resp, nil
}

// TestAdaptiveRateLearnsTheQuotaFromHeaders: 10 goroutines send 2,000 GETs
// through one Transport paced by an AdaptiveRate, against a quota of 100
// requests per 10 s window that reports what is left in each of the three
// header families. The pacer learns the quota from the first answer: at
// most one 429 per 1,000 requests, with at least 95% of the quota used.
func TestAdaptiveRateLearnsTheQuotaFromHeaders(t *testing.T) {
	for _, family := range []string{"ietf", "x", "openai"} {
		synctest.Test(t, func(t *testing.T) {
			srv := &windowServer{limit: 100, window: 10 * time.Second, family: family, start: time.Now()}
			const goroutines, each = 10, 200
			getConcurrently(t, srv, []backoff.Option{backoff.WithPacer(backoff.NewAdaptiveRate())}, goroutines, each)
			elapsed := time.Since(srv.start)
			windows := elapsed.Seconds() / srv.window.Seconds()
			used := float64(srv.served) / (windows * float64(srv.limit))
			t.Logf("%s: %d requests in %v, %d 429s, %.1f%% of the quota used", family, srv.served, elapsed, srv.rejected, 100*used)
			assert.LessOrEqual(t, srv.rejected, goroutines*each/1000, "%s: 429s", family)
			assert.GreaterOrEqual(t, used, 0.95, "%s: quota used", family)
		})
	}
}
