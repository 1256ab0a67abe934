// Package httpretry retries HTTP requests in the standard [http.RoundTripper]
// shape, on the schedules, clock and options of package
// github.com/retrykit/backoff.
//
// A [Transport] wraps another RoundTripper (http.DefaultTransport by
// default) and sends each request again, waiting between attempts as a
// backoff.Schedule says, when the answer is one that a later attempt may
// change:
//
//   - a connection error or a timeout that is not the end of the request's
//     own context (a refused or reset connection, a server that closed the
//     connection mid-answer, a response header that took too long);
//   - a status of 429 Too Many Requests, 502 Bad Gateway, 503 Service
//     Unavailable or 504 Gateway Timeout, and 500 Internal Server Error when
//     [Transport.RetryInternalServerError] is set.
//
// and only when the request is safe to send twice: an idempotent method (GET,
// HEAD, OPTIONS, TRACE, PUT, DELETE) or a request that carries an
// Idempotency-Key (or X-Idempotency-Key) header (RFC 9110 §9.2.2); [Transport.Idempotent] decides
// otherwise. Everything else (a 4xx, a certificate the server's name does not
// match, an unsupported scheme) is returned after one attempt, as the wrapped
// RoundTripper returned it.
//
// [NewClient] builds an [http.Client] around a Transport in one call, for
// the common case:
//
//	client := httpretry.NewClient(backoff.Schedule{
//		Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 4, Cap: 5 * time.Second,
//	})
//	resp, err := client.Get(url)
//
// # Waits and Retry-After
//
// Between attempts the Transport waits as backoff.Retry does with the same
// Schedule and options: backoff.WithClock, backoff.WithJitterKind,
// backoff.WithMaxElapsedTime, backoff.WithNotify and backoff.WithRetryable
// apply, and so will any later option of backoff.Retry, since the Transport
// hands the caller's options to it unchanged. A 429 or 503 that carries a
// Retry-After header replaces the next wait with the server's, in either form
// (delay-seconds or an HTTP-date), bounded by backoff.WithMaxRetryAfter
// (backoff.DefaultMaxRetryAfter by default; 0 ignores the header). A value
// that is negative, unparsable or absurd (more than a year away) is ignored,
// not trusted: the Schedule's wait applies. An HTTP-date is measured against
// the response's own Date header, the server's clock, so that a client whose
// clock is off still waits what the server meant; a response with a
// date-form Retry-After and no usable Date header has its hint ignored.
//
// The request's context ends the retries at once, during an attempt or a
// wait: RoundTrip then returns an error that errors.Is matches with the
// context's error.
//
// # Bodies and connections
//
// A request body is sent again through [http.Request.GetBody], which
// [http.NewRequest] sets for the usual in-memory bodies. A request with a
// body and no GetBody (a stream) cannot be replayed, and is sent once.
//
// The body of a response that is discarded for a retry is read (up to 64 KiB)
// and closed as soon as it arrives, so that its connection returns to the
// pool during the wait and is reused by the next attempt. The response
// finally returned is the wrapped RoundTripper's, unread, and as with any
// RoundTripper the caller must close its body. When the attempts run out on a
// retryable status, that last response is returned with a nil error, as
// http.Client returns any status; its body still reads as the server sent
// it, from memory for the part read already.
//
// # Hedging
//
// With backoff.WithHedge(delay), a request that the Transport may repeat
// (one it would retry: idempotent, and with a body only if it has GetBody)
// is hedged: when an attempt has had no response after delay, the request
// is sent again beside it, up to backoff.WithMaxHedges copies at once, and
// the first answer that is not retried wins. Each hedge sends a clone of the
// request, with a body of its own from GetBody, under a context of its own;
// the losers' contexts are cancelled, and a loser's response that arrives
// anyway is drained and closed before RoundTrip returns (the Transport sets
// backoff.WithHedgeRelease itself). The response returned keeps its
// attempt's context until its body is closed. Hedges are charged to
// backoff.WithRetryBudget's budget and paced by backoff.WithPacer's pacer
// as retries are, and a refusal of either only suppresses the hedge. A
// request that may not be repeated is sent once and never hedged. A hedged
// attempt costs a request clone, a context and a goroutine that watches it,
// beside what a plain attempt costs.
//
// # Pacing
//
// backoff.WithPacer paces every attempt, the first included, with one of the
// package's pacers. Each answers one kind of failure, and does little
// against the others:
//
//   - 429 Too Many Requests (or 503) with a Retry-After, from a quota of
//     requests per second that the client cannot see, such as a cloud API's
//     shared with other clients: a backoff.AdaptiveRate, which learns the
//     rate from those answers and waits for it before each attempt. When
//     answers carry the quota (the IETF RateLimit field, RateLimit-Remaining
//     and -Reset, X-RateLimit-Remaining and -Reset, OpenAI's
//     x-ratelimit-remaining-requests and -reset-requests), the Transport
//     reports it to the AdaptiveRate (backoff.AdaptiveRate.Quota), which
//     then paces at it from the first answer, before any 429. Without
//     headers it starts at 5 requests a second and doubles about every
//     second: give backoff.WithInitialRate when the quota is known roughly.
//   - Latency that grows, then timeouts and 503s, when more requests are in
//     flight than the downstream can serve at once: a
//     backoff.AdaptiveLimiter, which learns how many may be in flight. It
//     bounds concurrency, not the rate: against a quota of requests per
//     second, answered quickly, it changes next to nothing.
//   - A rate the client knows (the API documents 100 requests a second): a
//     backoff.Limiter.
//   - A downstream that refuses most requests, in an outage: a
//     backoff.Throttler, which stops sending most of them from the client.
//   - A downstream that is down, or times out, for seconds to minutes: a
//     backoff.Breaker, which stops sending at all while it is open, and
//     lets a few probes through to learn when it is back. A request it
//     refuses is not sent; RoundTrip waits for the breaker's next probe,
//     as for a Retry-After, while the Schedule's attempts and the request's
//     context allow.
//   - Retries that multiply the load in an outage (a retry storm):
//     backoff.WithRetryBudget, not a pacer, which allows retries only while
//     they stay within a share of the requests.
//
// A Transport has one pacer for every request it sends, whatever the host,
// and so one backoff.Breaker: a host that fails opens it for all of them.
// Give each dependency a Transport of its own, or route each host to a
// Transport with a breaker of its own (see the Transport's breakerPerHost
// Example). The Transport does not keep a breaker per host itself: which
// requests share a fate (a host, a port, a service behind several names) is
// the caller's knowledge, and a map that grows with the hosts needs an
// eviction rule that only the caller can choose.
//
// For the common case of an API with a quota:
//
//	rate := backoff.NewAdaptiveRate()
//	client := &http.Client{Transport: httpretry.NewTransport(nil, schedule, backoff.WithPacer(rate))}
//
// A 429 or 503 is an overload signal ([StatusError] matches
// backoff.ErrOverloaded, and a Retry-After rides along), a connection error
// or a timeout is a drop, any other answer a success. Requests that are
// sent once (not idempotent) are paced too.
//
// A request that may not be sent twice and gets an answer that would have
// been retried (a POST's 503) is reported to backoff.WithNotify's hook with
// [ErrNotRepeatable].
package httpretry
