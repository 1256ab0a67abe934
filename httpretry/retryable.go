package httpretry

import (
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/retrykit/backoff"
)

// StatusError is the error an attempt counts as when the Transport retries
// its response's status. Options of backoff.Retry see it: the err of
// backoff.WithNotify's hook and of backoff.WithRetryable's predicate. RoundTrip
// returns it, inside a *backoff.RetryError, only when the request's context
// ends during the wait after such a response; when the attempts run out, the
// response itself is returned instead.
type StatusError struct {
	StatusCode int    // as in http.Response, such as 503
	Status     string // as in http.Response, such as "503 Service Unavailable"
}

// Error returns the status, prefixed with the package's name.
func (e *StatusError) Error() string {
	if e.Status == "" {
		return "httpretry: status " + http.StatusText(e.StatusCode)
	}
	return "httpretry: " + e.Status
}

// Is reports whether target is backoff.ErrOverloaded and the status is 429
// Too Many Requests or 503 Service Unavailable: the server asked the client
// to slow down, which a backoff.Pacer (backoff.WithPacer) reads as an
// overload signal. Connection errors and timeouts reach the pacer as the
// network errors they are.
func (e *StatusError) Is(target error) bool {
	return target == backoff.ErrOverloaded &&
		(e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusServiceUnavailable)
}

// retryableStatus reports whether a response with this status is retried.
func (t *Transport) retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusInternalServerError:
		return t.RetryInternalServerError
	}
	return false
}

// retryableError reports whether a RoundTrip error may go away on another
// attempt: a network error (refused, reset, unreachable, a timeout) or a
// connection the server closed mid-answer. A certificate that failed
// verification fails again, and anything else (an unsupported scheme, a
// malformed request) is the request's fault.
func retryableError(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		wrongHost        x509.HostnameError
		invalid          x509.CertificateInvalidError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &wrongHost) || errors.As(err, &invalid) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// retryAfter reads the Retry-After header of a 429 or 503 response: the wait
// the server asks for, and whether it gave a usable one (see the package
// documentation).
func retryAfter(resp *http.Response) (wait time.Duration, ok bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	value := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if value == "" {
		return 0, false
	}
	var now time.Time
	if !isDigit(value[0]) {
		// An HTTP-date: measured on the server's clock, which also wrote
		// the Date header, rather than ours, which may be off.
		date, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			return 0, false
		}
		now = date
	}
	return backoff.ParseRetryAfter(value, now)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
