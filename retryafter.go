package backoff

import (
	"strings"
	"time"
)

// DefaultMaxRetryAfter is the longest wait a [RetryAfter] hint can impose on
// [Retry] unless [WithMaxRetryAfter] says otherwise: a longer hint waits this
// long. Servers send Retry-After in seconds, typically a few; the bound keeps
// a hostile or mistaken hint (a day, say) from parking the caller.
const DefaultMaxRetryAfter = 5 * time.Minute

// RetryAfter marks err with a server's hint that the next attempt should wait
// d, such as an HTTP Retry-After header: when fn returns it, [Retry] waits d
// before the next attempt instead of what its Schedule says (without
// jitter: the server chose the time). A d ≤ 0 is no hint: Retry waits what
// its Schedule says, so a parser that returns 0 for a missing header cannot
// make Retry retry at once. A d above the bound of [WithMaxRetryAfter]
// ([DefaultMaxRetryAfter] by default) waits the bound.
//
// RetryAfter(d, nil) is nil, so that return backoff.RetryAfter(d, err) is
// safe whether or not err is set. The hint survives wrapping with
// fmt.Errorf("...: %w", err) and errors.Join, and errors.Is and errors.As see
// through it to err. Its message is err's.
//
// Retry reads the hint from the first error in err's chain (in the order
// errors.As walks it, As methods included) whose method RetryAfter()
// time.Duration returns more than 0, so an
// error type of your own can carry a hint by defining that method;
// [*RetryAfterError] is the one RetryAfter makes. The hint does not make an
// error retryable: a [Permanent] error still ends Retry.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &RetryAfterError{Delay: d, Err: err}
}

// RetryAfterError is the error [RetryAfter] returns: Err, with the hint that
// the next attempt should wait Delay. Match it with errors.As. It is a plain
// value, safe to read from any goroutine; its Err must not be nil.
type RetryAfterError struct {
	Delay time.Duration // the wait the server asked for
	Err   error         // the error that carries the hint
}

// Error returns the message of the wrapped error, unchanged.
func (e *RetryAfterError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error, for errors.Is and errors.As.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter returns Delay. It is the method [Retry] looks for.
func (e *RetryAfterError) RetryAfter() time.Duration { return e.Delay }

// WithMaxRetryAfter bounds the wait a [RetryAfter] hint can impose on
// [Retry]: a longer hint waits d. The default is [DefaultMaxRetryAfter].
// d = 0 makes Retry ignore hints and follow its Schedule alone; a negative d
// makes it panic.
func WithMaxRetryAfter(d time.Duration) Option {
	mustNotBeNegative("WithMaxRetryAfter", "d", d)
	return durationOption(optionMaxRetryAfter, d)
}

// hintLimit returns the bound on Retry-After hints.
func (rc *retryConfig) hintLimit() time.Duration {
	if rc.maxRetryAfter > 0 {
		return rc.maxRetryAfter
	}
	return DefaultMaxRetryAfter
}

// retryAfterHint is what an error implements to carry a Retry-After hint. It
// is an alias, so that an As method of a user's error can fill a target of
// type *interface{ RetryAfter() time.Duration }.
type retryAfterHint = interface{ RetryAfter() time.Duration }

// inspectError walks err's chain once, in errors.As's order (depth first
// through Unwrap() []error), and reports whether it holds a *PermanentError
// and the first Retry-After hint above 0. It is the one classification of
// errors that [Retry], [IsPermanent] and the worker loop share. It is
// errors.As without the allocation errors.As costs per call (its target
// escapes), so that Retry allocates nothing per attempt; like errors.As it
// consults an error's As method, which is where it may allocate, only for
// the errors of the chain that have one.
func inspectError(err error) (permanent bool, hint time.Duration, hinted bool) {
	for err != nil {
		if _, ok := err.(*PermanentError); ok {
			return true, hint, hinted
		}
		if h, ok := err.(retryAfterHint); ok && !hinted {
			hint, hinted = positiveHint(h)
		}
		if a, ok := err.(interface{ As(any) bool }); ok {
			if asPermanent(a) {
				return true, hint, hinted
			}
			if !hinted {
				hint, hinted = asHint(a)
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				p, h, ok := inspectError(e)
				if p {
					return true, hint, hinted
				}
				if ok && !hinted {
					hint, hinted = h, true
				}
			}
			return false, hint, hinted
		default:
			return false, hint, hinted
		}
	}
	return false, hint, hinted
}

// positiveHint returns h's hint, and whether it is one: a hint ≤ 0 is no
// hint, so that a parser's 0 for "no header" does not make Retry retry at
// once.
func positiveHint(h retryAfterHint) (time.Duration, bool) {
	if d := h.RetryAfter(); d > 0 {
		return d, true
	}
	return 0, false
}

// asPermanent reports whether a's As method yields a *PermanentError, as
// errors.As would find it.
func asPermanent(a interface{ As(any) bool }) bool {
	var p *PermanentError
	return a.As(&p)
}

// asHint returns the hint of the error a's As method yields, as errors.As
// would find it: a *RetryAfterError, or any carrier of a hint.
func asHint(a interface{ As(any) bool }) (time.Duration, bool) {
	var ra *RetryAfterError
	if a.As(&ra) && ra != nil {
		return positiveHint(ra)
	}
	var h retryAfterHint
	if a.As(&h) && h != nil {
		return positiveHint(h)
	}
	return 0, false
}

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
