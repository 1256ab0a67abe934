// Package grpcbackoff retries gRPC calls with github.com/retrykit/backoff:
// grpc-go client interceptors built on backoff.Retry, so that every option of
// Retry applies to a gRPC call as it does to any function (the Schedule, a
// retry budget, the pacers, a per-attempt timeout, the caller's deadline),
// with no cap on the attempts beyond the Schedule's own, and tests that run
// on a fake clock instead of sleeping.
//
// A [Retrier] holds the Schedule, the backoff options and which status codes
// are retried. Its [Retrier.UnaryClientInterceptor] retries unary calls; its
// [Retrier.StreamClientInterceptor] retries server-streaming calls until
// their first message (gRFC A6's commit point) and, with a [Resume] call
// option, reconnects a stream that breaks after it and continues where it
// left off. Install both with grpc.WithChainUnaryInterceptor and
// grpc.WithChainStreamInterceptor, and turn grpc-go's own retry off
// (grpc.WithDisableRetry) so that a call is not retried twice over.
//
// # What is retried
//
// By default an attempt that ends with UNAVAILABLE is retried, and one that
// ends with RESOURCE_EXHAUSTED only when the server sent a valid pushback
// (the trailer grpc-retry-pushback-ms, a non-negative integer), which then
// replaces the Schedule's wait, as a backoff.RetryAfter hint does. A
// pushback that is negative or not an integer stops the retries, as gRFC A6
// says. An attempt that its own timeout (backoff.WithAttemptTimeout) ended
// is retried whatever its code. Every other code is returned at once. Every
// attempt after the first carries the metadata grpc-previous-rpc-attempts,
// the number of attempts sent before it.
//
// # Outcomes
//
// The pacers of backoff.WithPacer read an attempt's outcome from its error
// ([Classify]): UNAVAILABLE and RESOURCE_EXHAUSTED are an overload signal
// (backoff.ErrOverloaded), DEADLINE_EXCEEDED a timeout, and an attempt cut
// short because the caller's context ended (CANCELED, or the caller's own
// deadline) says nothing about the server.
//
// An attempt that a pacer refuses (a backoff.Breaker that is open, a
// backoff.Throttler) is not sent. A Breaker's refusal carries the time
// until its next probe, which the call waits before its next attempt, as
// for a pushback; a call whose attempts run out on refusals fails with
// UNAVAILABLE, and errors.Is matches its error with backoff.ErrBreakerOpen.
// With backoff.WithHedge, the unary interceptor sends a hedge beside an
// attempt that has not answered after the delay, and cancels the losers.
//
// # Errors
//
// A call returns what grpc-go returns, a status error: the answer of the
// last attempt when it was not retried, and otherwise an error whose
// status (status.FromError, status.Code) has the last attempt's code, or
// CANCELED or DEADLINE_EXCEEDED when the caller's context ended or its
// deadline would pass before the next attempt, and whose chain (errors.As)
// holds the *backoff.RetryError that says how many attempts were made and
// why the retries stopped.
package grpcbackoff
