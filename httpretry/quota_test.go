package httpretry_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/retrykit/backoff/httpretry"
)

// TestQuotaOfReadsEachHeaderFamily: each family gives the requests left and
// the time to the reset; a malformed one is skipped for the next.
func TestQuotaOfReadsEachHeaderFamily(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		headers   map[string]string
		remaining float64
		reset     time.Duration
		ok        bool
	}{
		{"IETF structured field", map[string]string{"RateLimit": `"default";r=50;t=30`}, 50, 30 * time.Second, true},
		{"IETF, the most restrictive policy", map[string]string{"RateLimit": `"burst";r=90;t=1, "day";r=100;t=86400`}, 100, 24 * time.Hour, true},
		{"IETF, item without t skipped", map[string]string{"RateLimit": `"a";r=5, "b";r=7;t=2`}, 7, 2 * time.Second, true},
		{"earlier draft", map[string]string{"RateLimit-Remaining": "12", "RateLimit-Reset": "3"}, 12, 3 * time.Second, true},
		{"X-RateLimit, seconds", map[string]string{"X-RateLimit-Remaining": "4", "X-RateLimit-Reset": "60"}, 4, time.Minute, true},
		{"X-RateLimit, Unix time on the server's clock", map[string]string{
			"X-RateLimit-Remaining": "4999", "X-RateLimit-Reset": "1767229200", // 2026-01-01 01:00 UTC
			"Date": "Thu, 01 Jan 2026 00:30:00 GMT"}, 4999, 30 * time.Minute, true},
		{"X-RateLimit, Unix time past", map[string]string{"X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "1767225000"}, 0, 0, false},
		{"OpenAI durations", map[string]string{"x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "1m0.5s"}, 59, time.Minute + 500*time.Millisecond, true},
		{"malformed IETF falls back to X-RateLimit", map[string]string{"RateLimit": `"x";r=abc;t=1`, "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "5"}, 2, 5 * time.Second, true},
		{"negative count", map[string]string{"X-RateLimit-Remaining": "-1", "X-RateLimit-Reset": "5"}, 0, 0, false},
		{"zero reset", map[string]string{"RateLimit-Remaining": "1", "RateLimit-Reset": "0"}, 0, 0, false},
		{"a reset of years is bounded", map[string]string{"RateLimit-Remaining": "1", "RateLimit-Reset": "1e300"}, 1, 24 * time.Hour, true},
		{"none", map[string]string{"Retry-After": "1"}, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			remaining, reset, ok := httpretry.QuotaOf(h, now)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.remaining, remaining)
			assert.Equal(t, tc.reset, reset)
		})
	}
}

// FuzzQuotaOf: no header value makes quotaOf panic, and what it reports is
// usable: a non-negative count and a reset in (0, 24h].
func FuzzQuotaOf(f *testing.F) {
	f.Add(`"default";r=50;t=30`, "12", "3", "1767229200", "1m0s")
	f.Add(`;;r=;t=,,"`, "-0", "NaN", "+Inf", "-1s")
	f.Add(`"a";r=1e308;t=1e-300`, "1e309", "9e18", "99999999999999999999", "2562047h")
	f.Fuzz(func(t *testing.T, structured, remaining, reset, unix, duration string) {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for _, h := range []http.Header{
			{"Ratelimit": {structured}},
			{"Ratelimit-Remaining": {remaining}, "Ratelimit-Reset": {reset}},
			{"X-Ratelimit-Remaining": {remaining}, "X-Ratelimit-Reset": {unix}, "Date": {duration}},
			{"X-Ratelimit-Remaining-Requests": {remaining}, "X-Ratelimit-Reset-Requests": {duration}},
		} {
			left, d, ok := httpretry.QuotaOf(h, now)
			if !ok {
				continue
			}
			if !(left >= 0) || d <= 0 || d > 24*time.Hour {
				t.Fatalf("quotaOf(%v) = %v, %v", h, left, d)
			}
		}
	})
}
