package httpretry

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// quotaOf reads the quota that a response's headers report: the requests
// that may still be sent, and the time until the quota resets. It reads the
// first of these families that h carries:
//
//   - RateLimit, the structured field of the IETF's RateLimit header fields
//     (draft-ietf-httpapi-ratelimit-headers): one item per policy,
//     `"default";r=50;t=30`, r requests left for t seconds; with several,
//     the one that allows the lowest rate, r/t;
//   - RateLimit-Remaining and RateLimit-Reset, of the draft's earlier
//     versions: seconds until the reset;
//   - X-RateLimit-Remaining and X-RateLimit-Reset (GitHub and many others):
//     seconds until the reset or, above 10⁹, the reset's Unix time, read on
//     the server's clock (its Date header) when it sends one;
//   - x-ratelimit-remaining-requests and x-ratelimit-reset-requests (OpenAI
//     and others): the reset as a duration, "1s", "6m0s", "20ms".
//
// A family whose values do not parse, or give a negative count or a reset
// that is not ahead, is skipped. It never panics (see FuzzQuotaOf).
func quotaOf(h http.Header, now time.Time) (remaining float64, reset time.Duration, ok bool) {
	if v := h.Get("RateLimit"); v != "" {
		if remaining, reset, ok = structuredQuota(v); ok {
			return remaining, reset, true
		}
	}
	if remaining, reset, ok = pairQuota(h, "RateLimit-Remaining", "RateLimit-Reset", secondsReset); ok {
		return remaining, reset, true
	}
	if remaining, reset, ok = pairQuota(h, "X-RateLimit-Remaining", "X-RateLimit-Reset", func(v string) (time.Duration, bool) {
		return secondsOrUnixReset(v, h, now)
	}); ok {
		return remaining, reset, true
	}
	return pairQuota(h, "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", durationReset)
}

// pairQuota reads a count header and a reset header, the latter with
// readReset.
func pairQuota(h http.Header, countKey, resetKey string, readReset func(string) (time.Duration, bool)) (float64, time.Duration, bool) {
	count, resetValue := h.Get(countKey), h.Get(resetKey)
	if count == "" || resetValue == "" {
		return 0, 0, false
	}
	remaining, ok := quotaCount(count)
	if !ok {
		return 0, 0, false
	}
	reset, ok := readReset(strings.TrimSpace(resetValue))
	if !ok {
		return 0, 0, false
	}
	return remaining, reset, true
}

// structuredQuota reads the items of a RateLimit field and returns the one
// that allows the lowest rate.
func structuredQuota(field string) (remaining float64, reset time.Duration, ok bool) {
	for _, item := range strings.Split(field, ",") {
		var r float64
		var t time.Duration
		var haveR, haveT bool
		params := strings.Split(item, ";")
		for _, p := range params[1:] {
			key, value, found := strings.Cut(strings.TrimSpace(p), "=")
			if !found {
				continue
			}
			switch strings.TrimSpace(key) {
			case "r":
				r, haveR = quotaCount(value)
			case "t":
				t, haveT = secondsReset(strings.TrimSpace(value))
			}
		}
		if !haveR || !haveT {
			continue
		}
		if !ok || r/t.Seconds() < remaining/reset.Seconds() {
			remaining, reset, ok = r, t, true
		}
	}
	return remaining, reset, ok
}

// quotaCount reads a count of requests: a non-negative number.
func quotaCount(v string) (float64, bool) {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(n >= 0) || math.IsInf(n, 1) {
		return 0, false
	}
	return n, true
}

// maxQuotaReset bounds a reset read from a header: a day, longer than any
// quota window in use, so that no reading overflows a Duration.
const maxQuotaReset = 24 * time.Hour

// secondsReset reads a reset in seconds from now, which must be ahead.
func secondsReset(v string) (time.Duration, bool) {
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || !(s > 0) {
		return 0, false
	}
	d := time.Duration(min(s, maxQuotaReset.Seconds()) * float64(time.Second))
	return d, d > 0 // below a nanosecond is no time at all
}

// secondsOrUnixReset reads X-RateLimit-Reset: seconds from now, or a Unix
// time when above 10⁹ (GitHub's), measured from the Date header when the
// response has a valid one, so that the client's clock skew does not count.
func secondsOrUnixReset(v string, h http.Header, now time.Time) (time.Duration, bool) {
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || !(s > 0) || math.IsInf(s, 1) {
		return 0, false
	}
	if s < 1e9 {
		return secondsReset(v)
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	at := time.Unix(int64(min(s, 1e15)), 0)
	if !at.After(now) {
		return 0, false
	}
	return min(at.Sub(now), maxQuotaReset), true
}

// durationReset reads a reset written as a duration: "1s", "6m0s", "20ms".
func durationReset(v string) (time.Duration, bool) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, false
	}
	return min(d, maxQuotaReset), true
}
