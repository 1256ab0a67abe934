package backoff

import (
	"strings"
	"time"
)

// MaxParsedRetryAfter is the longest wait [ParseRetryAfter] accepts: a
// Retry-After value further away than this (a year) is taken for a mistake
// and reported as absent. A shorter but still long value is accepted here and
// bounded where it is used ([WithMaxRetryAfter]).
const MaxParsedRetryAfter = 365 * 24 * time.Hour

// The three date formats RFC 9110 §5.6.7 requires a recipient to accept, in
// the order of preference: IMF-fixdate, then the obsolete RFC 850 and asctime
// forms. Parsed here rather than with net/http's ParseTime so that the package
// does not link net/http for one function.
var httpDateLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",
	"Monday, 02-Jan-06 15:04:05 GMT",
	"Mon Jan _2 15:04:05 2006",
}

// ParseRetryAfter reads the value of an HTTP Retry-After header (RFC 9110
// §10.2.3) and returns how long to wait from now, and whether the value was
// usable. Both forms are accepted: delay-seconds ("120") and an HTTP-date
// ("Wed, 21 Oct 2015 07:28:00 GMT", or the obsolete RFC 850 and asctime
// forms), with surrounding spaces ignored.
//
// ok is false, and the duration 0, when the value is empty, unparsable,
// negative ("-5" is not delay-seconds), a fraction, or further away than
// [MaxParsedRetryAfter]: such a value is absent, not a reason to wait. A date
// at or before now is usable and means "no need to wait longer": it returns
// 0, true, and [RetryAfter] with 0 leaves the Schedule's own wait in place.
//
// The usual use keeps the server's hint only when there is one:
//
//	if d, ok := backoff.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
//		err = backoff.RetryAfter(d, err)
//	}
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if isDigit(value[0]) {
		return parseDelaySeconds(value)
	}
	for _, layout := range httpDateLayouts {
		at, err := time.Parse(layout, value)
		if err != nil {
			continue
		}
		d := at.Sub(now)
		switch {
		case d <= 0:
			return 0, true
		case d > MaxParsedRetryAfter:
			return 0, false
		}
		return d, true
	}
	return 0, false
}

// parseDelaySeconds reads delay-seconds, 1*DIGIT. It stops accumulating once
// the value passes MaxParsedRetryAfter, so no number of digits can overflow.
func parseDelaySeconds(value string) (time.Duration, bool) {
	const maxSeconds = int64(MaxParsedRetryAfter / time.Second)
	var seconds int64
	for i := 0; i < len(value); i++ {
		c := value[i]
		if !isDigit(c) {
			return 0, false
		}
		if seconds <= maxSeconds {
			seconds = seconds*10 + int64(c-'0')
		}
	}
	if seconds > maxSeconds {
		return 0, false
	}
	return time.Duration(seconds) * time.Second, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
