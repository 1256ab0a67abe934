package httpretry

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/retrykit/backoff"
)

// roundTripHedged is RoundTrip for a request that may be repeated, with
// options that hedge (backoff.WithHedge): backoff.RetryValue runs the
// attempts, up to its hedges at once, each with a request and a body of its
// own, and returns the winner's response; a loser's response that arrives
// anyway is drained and closed.
func (t *Transport) roundTripHedged(req *http.Request) (*http.Response, error) {
	h := &hedgedAttempts{t: t, req: req}
	resp, err := backoff.RetryValue(req.Context(), t.schedule, h.try, t.opts...)
	return h.result(resp, err)
}

// discardValue is WithHedgeRelease's function: it disposes of the response
// of an attempt that succeeded after another had won.
func discardValue(v any) {
	if resp, ok := v.(*http.Response); ok && resp != nil {
		discard(resp)
	}
}

// hedgedAttempts is the state of one hedged RoundTrip call across its
// attempts, which may run concurrently: mu guards it.
type hedgedAttempts struct {
	t   *Transport
	req *http.Request

	mu    sync.Mutex
	sent  int            // attempts started; the first sends req.Body, the others GetBody's
	cause error          // the error of the first attempt that ended the retries at once
	last  *http.Response // the latest retryable response, drained (see release)
}

// try is one attempt, the fn of backoff.RetryValue, safe for concurrent
// use. It sends a clone of the request under a context of its own, which
// ends with ctx while the attempt runs, or when it loses, but outlives ctx
// when the attempt returns a response: the response's body keeps it until
// it is closed, since net/http reads a body under its request's context.
func (h *hedgedAttempts) try(ctx context.Context) (*http.Response, error) {
	h.mu.Lock()
	first := h.sent == 0
	h.sent++
	h.mu.Unlock()

	base, cancel := context.WithCancel(h.req.Context())
	stop := context.AfterFunc(ctx, cancel)
	actx, releaseTimeout := context.Context(base), func() {}
	if h.t.attemptTimeout > 0 {
		actx, releaseTimeout = h.t.attemptContext(base)
	}
	releaseAttempt := func() {
		stop()
		releaseTimeout()
		cancel()
	}
	req := h.req.Clone(actx) // the headers too: attempts run at once
	if !first && hasBody(req) {
		body, err := h.req.GetBody()
		if err != nil {
			releaseAttempt()
			h.setCause(err)
			return nil, backoff.Permanent(err)
		}
		req.Body = body
	}
	resp, err := h.t.roundTripper().RoundTrip(req)
	if err != nil {
		releaseAttempt()
		// As in attempts.try: an error caused by the end of ctx (the
		// caller's, or this attempt's as a loser) or of the attempt's
		// timeout is retryable, so that Retry reports why it stopped.
		if ctx.Err() == nil && actx.Err() == nil && !retryableError(err) {
			h.setCause(err)
			return nil, backoff.Permanent(err)
		}
		return nil, err
	}
	// The response's body holds the attempt's context from here on: ctx's
	// end no longer ends it (RetryValue ends ctx when the attempt returns).
	// If ctx ended first, this attempt lost, and its response is discarded.
	stop()
	resp.Body = &attemptBody{ReadCloser: resp.Body, release: func() {
		releaseTimeout()
		cancel()
	}}
	if h.t.quota != nil {
		if remaining, reset, ok := quotaOf(resp.Header, time.Now()); ok {
			h.t.quota.Quota(remaining, reset)
		}
	}
	if !h.t.retryableStatus(resp.StatusCode) {
		return resp, nil
	}
	wait, hinted := retryAfter(resp)
	release(resp)
	h.mu.Lock()
	prev := h.last
	h.last = resp
	h.mu.Unlock()
	if prev != nil {
		discard(prev)
	}
	err = &StatusError{StatusCode: resp.StatusCode, Status: resp.Status}
	if hinted {
		return nil, backoff.RetryAfter(wait, err)
	}
	return nil, err
}

func (h *hedgedAttempts) setCause(err error) {
	h.mu.Lock()
	if h.cause == nil {
		h.cause = err
	}
	h.mu.Unlock()
}

// result turns what backoff.RetryValue returned into RoundTrip's results,
// as attempts.result does. Every attempt has returned: h is no longer
// shared.
func (h *hedgedAttempts) result(resp *http.Response, err error) (*http.Response, error) {
	last := h.last
	if err == nil {
		if last != nil {
			discard(last)
		}
		return resp, nil
	}
	if h.sent == 0 && hasBody(h.req) {
		h.req.Body.Close() // the RoundTripper contract: the body is closed even on errors
	}
	if last != nil {
		if !endedByContext(err) {
			return last, nil
		}
		discard(last)
	}
	if h.cause != nil {
		return nil, h.cause
	}
	return nil, err
}
