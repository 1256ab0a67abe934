package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"time"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/internal/optionhook"
)

// ErrNotRepeatable is the error that backoff.WithNotify's hook receives,
// wrapped around the attempt's error, when a request that may not be sent
// twice (not idempotent and without an Idempotency-Key, or a stream body;
// see [Transport.Idempotent]) gets an answer that would otherwise have been
// retried: a 503 to a POST, say. The hook is called once, with attempt 1
// and next = 0 (no wait: no retry follows; a hook that steps a fake clock
// by next is not moved), and the answer is returned as is. Without it, such an
// answer would pass without a trace in the hook's log.
var ErrNotRepeatable = errors.New("httpretry: not retried: the request may not be sent twice")

// Transport is an [http.RoundTripper] that sends a request again, waiting
// as a backoff.Schedule says, while the answer is one a later attempt may
// change and the request is safe to repeat; see the package documentation
// for what is retried. Build it with [NewTransport].
//
// A Transport is safe for concurrent use by multiple goroutines, as long as
// its fields are not changed once it is in use, and its wrapped RoundTripper
// is too. Each request retries on its own: its waits are its own, and only
// the request's goroutine waits. The zero Transport sends every request once
// through http.DefaultTransport, without retrying.
type Transport struct {
	// RetryInternalServerError makes the Transport retry a 500 Internal
	// Server Error too. It is off by default: a 500 is as often a bug that
	// fails every time as a passing fault.
	RetryInternalServerError bool

	// Idempotent reports whether req may be sent more than once; when it
	// returns false the request is sent once and its answer returned as is.
	// nil means [IsIdempotent]. It is called once per request, before the
	// first attempt, on the goroutine that calls RoundTrip. Whatever it
	// says, a request with a body and no GetBody is sent once.
	Idempotent func(req *http.Request) bool

	base     http.RoundTripper
	schedule backoff.Schedule
	opts     []backoff.Option
	ready    bool // set by NewTransport; the zero Transport does not retry
	// attemptTimeout is backoff.WithAttemptTimeout's, applied here rather
	// than by Retry (whose opts then carry WithAttemptTimeout(0)): an
	// attempt's context must outlive the attempt when its response is the
	// one returned, until the caller closes the body. attemptContext
	// derives it, on the options' clock.
	attemptTimeout time.Duration
	attemptContext func(context.Context) (context.Context, func())
	// quota is the options' pacer when it is an AdaptiveRate: each answer's
	// rate-limit headers are reported to it (see quotaOf).
	quota *backoff.AdaptiveRate
	// hedged: opts hedge (backoff.WithHedge), and repeatable requests take
	// the hedged path (see hedged.go). onceOpts are opts without hedging,
	// for a request sent once.
	hedged   bool
	onceOpts []backoff.Option
}

// NewTransport returns a Transport that sends requests through base, and
// retries them with backoff.Retry on schedule s and options opts (a clock,
// jitter kind, time budget, notify hook, Retry-After bound...): the waits,
// the number of attempts and the options mean what they mean for Retry. A nil
// base means http.DefaultTransport.
//
// s.Steps is the most attempts per request, the first included. As for
// Retry, a schedule with neither Steps nor Duration (the zero Schedule among
// them) means backoff.DefaultRetry; with s.Steps ≤ 0 and a positive
// s.Duration a request is retried until it succeeds or its context ends, so
// give such requests a deadline. opts are kept as given and passed to every
// Retry call; do not change the slice's elements afterwards. The hooks among
// them (backoff.WithNotify's, backoff.WithRetryable's) run on the goroutine
// of the request they concern (backoff.WithRetryable's on a hedge's too), so
// with concurrent requests, or hedges, they may run concurrently. With backoff.WithHedge, a request that may be repeated is
// hedged: see the package documentation.
//
// With backoff.WithAttemptTimeout(d), each attempt is sent under a context
// that ends d after it starts, on the options' clock: a server that stalls
// before the response's header is given up on and the request retried. The
// response returned keeps its attempt's context until its body is closed,
// so reading a stalled body fails at the same timeout; close the body to
// release the attempt's timer earlier. Each attempt then allocates its
// context and timer.
//
// NewTransport panics on a Schedule that backoff.Retry refuses (an infinite
// s.Factor without s.Cap, an s.Jitter above backoff.MaxRetryJitter), so that
// the mistake shows when the Transport is built rather than on every
// request, and on a base that is a typed nil (a nil *http.Transport, say),
// which would crash the first request; an untyped nil base is
// http.DefaultTransport. The options were checked when they were made: each
// backoff.With... function panics on an argument outside its domain.
func NewTransport(base http.RoundTripper, s backoff.Schedule, opts ...backoff.Option) *Transport {
	return newTransport("NewTransport", base, s, opts)
}

// NewClient returns an [http.Client] whose Transport is
// NewTransport(nil, s, opts...): http.DefaultTransport with retries. The
// client has no Timeout; bound a call with its request's context, whose end
// also ends the retries. It panics on the Schedules that NewTransport
// refuses.
func NewClient(s backoff.Schedule, opts ...backoff.Option) *http.Client {
	return &http.Client{Transport: newTransport("NewClient", nil, s, opts)}
}

// newTransport is NewTransport, whose bad-input panics name where.
func newTransport(where string, base http.RoundTripper, s backoff.Schedule, opts []backoff.Option) *Transport {
	if problem := optionhook.ScheduleProblem(s); problem != "" {
		badArgument(where, problem)
	}
	if base != nil {
		if v := reflect.ValueOf(base); (v.Kind() == reflect.Pointer || v.Kind() == reflect.Func) && v.IsNil() {
			badArgument(where, fmt.Sprintf("base must be nil or a usable RoundTripper, got a nil %T", base))
		}
	}
	t := &Transport{base: base, schedule: s, opts: opts, ready: true}
	t.quota, _ = optionhook.Pacer(opts).(*backoff.AdaptiveRate)
	if t.attemptTimeout, t.attemptContext = optionhook.AttemptTimeout(opts); t.attemptTimeout > 0 {
		t.opts = append(slices.Clip(opts), backoff.WithAttemptTimeout(0))
	}
	// A request sent once is never hedged: its single attempt goes through
	// Retry with hedging turned off.
	t.onceOpts = t.opts
	if t.hedged = optionhook.Hedged(t.opts); t.hedged {
		t.onceOpts = append(slices.Clip(t.opts), backoff.WithHedge(0))
		// A loser's response that arrives anyway is drained and closed.
		t.opts = append(slices.Clip(t.opts), backoff.WithHedgeRelease(discardValue))
	}
	return t
}

// badArgument panics with the package's message for an argument outside its
// domain, in the shape of package backoff's: "httpretry: where: problem".
func badArgument(where, problem string) {
	panic("httpretry: " + where + ": " + problem)
}

// RoundTrip sends req through the wrapped RoundTripper, and again while the
// answer is retryable, as the package documentation says. It blocks for the
// attempts and the waits between them, and returns at once when req's context
// ends, with an error that errors.Is matches with the context's error.
//
// It returns the first answer that is not retried, as the wrapped
// RoundTripper returned it: a response (of any status) with a nil error, or
// an error. When the attempts or the time budget run out, or the next
// attempt could not start before req's deadline (backoff.Retry's
// backoff.ErrDeadlineWouldPass: it does not sleep into the deadline), it
// returns the last response, with a nil error, if the last attempt got one, and
// otherwise a *backoff.RetryError that says why it stopped and wraps the
// last attempt's error. As any RoundTripper, it closes req's body, even on
// errors, and does not modify req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.ready {
		return t.roundTripper().RoundTrip(req)
	}
	a := attempts{t: t, req: req}
	if !t.mayRepeat(req) {
		return a.once()
	}
	if t.hedged {
		return t.roundTripHedged(req)
	}
	err := backoff.Retry(req.Context(), t.schedule, a.try, t.opts...)
	return a.result(err)
}

// once sends a request that may not be repeated: one attempt, paced as
// every attempt is (backoff.WithPacer), whose answer is returned as the
// wrapped RoundTripper returned it. An answer that would have been retried
// is reported to backoff.WithNotify's hook, with an error that wraps
// ErrNotRepeatable and the attempt's, and next = 0: no retry follows.
func (a *attempts) once() (*http.Response, error) {
	err := backoff.Retry(a.req.Context(), backoff.Schedule{Steps: 1}, a.try, a.t.onceOpts...)
	if a.sent == 0 {
		if hasBody(a.req) {
			a.req.Body.Close() // the RoundTripper contract: the body is closed even on errors
		}
		return nil, err // the pacer's wait ended with the request's context
	}
	if err != nil && a.retryable != nil && a.req.Context().Err() == nil {
		optionhook.Notify(a.t.onceOpts, 1, fmt.Errorf("%w: %w", ErrNotRepeatable, a.retryable), 0)
	}
	if a.last != nil {
		return a.last, nil
	}
	return nil, a.lastErr
}

// CloseIdleConnections closes the idle connections of the wrapped
// RoundTripper, if it has such a method, as http.Client.CloseIdleConnections
// expects of its Transport.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.roundTripper().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *Transport) roundTripper() http.RoundTripper {
	if t.base == nil {
		return http.DefaultTransport
	}
	return t.base
}

// mayRepeat reports whether req may be sent more than once.
func (t *Transport) mayRepeat(req *http.Request) bool {
	if hasBody(req) && req.GetBody == nil {
		return false // a stream cannot be sent twice
	}
	if t.Idempotent != nil {
		return t.Idempotent(req)
	}
	return IsIdempotent(req)
}

// attempts is the state of one RoundTrip call across the attempts of
// backoff.Retry.
type attempts struct {
	t     *Transport
	req   *http.Request
	sent  int            // attempts made so far
	cause error          // the error of the attempt that ended the retries at once, if any
	last  *http.Response // the latest response, nil after an error
	// lastErr is the latest attempt's error from the wrapped RoundTripper,
	// and retryable the latest error that a repeatable request would have
	// been retried after (a network error or a StatusError).
	lastErr, retryable error
}

// try is one attempt, the fn of backoff.Retry. It returns nil when the answer
// is final, a retryable error for backoff.Retry to wait on, or a
// backoff.Permanent error that ends the retries at once.
func (a *attempts) try(ctx context.Context) error {
	if a.last != nil {
		discard(a.last)
		a.last = nil
	}
	req := a.req
	actx, releaseAttempt := ctx, func() {}
	if a.t.attemptTimeout > 0 {
		actx, releaseAttempt = a.t.attemptContext(ctx)
	}
	if a.sent > 0 && hasBody(req) {
		body, err := req.GetBody()
		if err != nil {
			releaseAttempt()
			a.cause = err
			return backoff.Permanent(err)
		}
		req = req.WithContext(actx) // a shallow copy: RoundTrip must not modify a.req
		req.Body = body
	} else if actx != ctx {
		req = req.WithContext(actx)
	}
	a.sent++
	resp, err := a.t.roundTripper().RoundTrip(req)
	a.lastErr, a.retryable = err, nil
	if err != nil {
		releaseAttempt()
		// An error caused by ctx's end is retryable here, so that
		// backoff.Retry reports the context as the reason it stopped; so
		// is one caused by the attempt's own timeout (a stalled server).
		if ctx.Err() == nil && actx.Err() == nil && !retryableError(err) {
			a.cause = err
			return backoff.Permanent(err)
		}
		a.retryable = err
		return err
	}
	if actx != ctx {
		// The attempt's context bounds the body's reading too, and ends
		// when the body is closed (by the caller, for the response
		// returned).
		resp.Body = &attemptBody{ReadCloser: resp.Body, release: releaseAttempt}
	}
	a.last = resp
	if a.t.quota != nil {
		if remaining, reset, ok := quotaOf(resp.Header, time.Now()); ok {
			a.t.quota.Quota(remaining, reset)
		}
	}
	if !a.t.retryableStatus(resp.StatusCode) {
		return nil
	}
	wait, hinted := retryAfter(resp)
	release(resp)
	err = &StatusError{StatusCode: resp.StatusCode, Status: resp.Status}
	a.retryable = err
	if hinted {
		return backoff.RetryAfter(wait, err)
	}
	return err
}

// result turns what backoff.Retry returned into RoundTrip's results.
func (a *attempts) result(err error) (*http.Response, error) {
	if err == nil {
		return a.last, nil
	}
	if a.sent == 0 && hasBody(a.req) {
		a.req.Body.Close() // the RoundTripper contract: the body is closed even on errors
	}
	if a.last != nil {
		if !endedByContext(err) {
			return a.last, nil // out of attempts, or WithRetryable said stop
		}
		discard(a.last)
	}
	if a.cause != nil {
		return nil, a.cause // not retryable: as the wrapped RoundTripper returned it
	}
	return nil, err
}

// endedByContext reports whether backoff.Retry stopped because its context
// ended; not when it stopped before a wait that the context's deadline
// would have cut (backoff.ErrDeadlineWouldPass): the last response is then
// the answer, as when attempts run out.
func endedByContext(err error) bool {
	var re *backoff.RetryError
	return errors.As(err, &re) && re.Reason != backoff.ErrDeadlineWouldPass &&
		(errors.Is(re.Reason, context.Canceled) || errors.Is(re.Reason, context.DeadlineExceeded))
}

// attemptBody is the body of a response received under an attempt timeout:
// closing it releases the attempt's context and timer.
type attemptBody struct {
	io.ReadCloser
	release func()
}

func (b *attemptBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody
}
