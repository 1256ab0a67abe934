// Package backoff is Kubernetes' retry machinery as one small package on an
// injectable clock: retry loops, per-key backoff, requeue rate limiters,
// token-bucket limiters, retry budgets, and a delaying, rate-limited
// workqueue, all testable without sleeping. Code that used client-go's
// flowcontrol and workqueue or apimachinery's wait keeps its calls: names,
// leading parameters and semantics are Kubernetes', types gain a type
// parameter, and time-dependent functions gain trailing [Option]s. Where
// Kubernetes has a known flaw, the doc comment says what we do instead.
//
// Most callers want [Retry]:
//
//	err := backoff.Retry(ctx, backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 5},
//		func(ctx context.Context) error { return call(ctx) })
//
// For HTTP clients, package github.com/retrykit/backoff/httpretry wraps an
// http.RoundTripper in Retry; for tests, package
// github.com/retrykit/backoff/backofftest has a clock that steps itself. A
// controller's work goes through [NewRateLimitingQueue] and [RunWorkers];
// pacing through [Limiter] and [KeyedLimiter]; load shedding through
// [RetryBudget]; slow tails through hedged attempts ([WithHedge]). The
// Examples show each on a fake clock.
//
// A [Breaker] stops calls to a downstream that keeps failing, and lets a
// few probes through to learn when it has recovered. Passed with
// [WithPacer] to Retry, [RunWorkers] or httpretry, it refuses attempts while
// open, and Retry waits until the next probe may go through instead of
// spending its attempts.
//
// # Four kinds of "backoff"
//
// Four things here speak of backoff, after the Kubernetes names they keep:
//
//   - [Backoff] (client-go's flowcontrol.Backoff) is state per key: a table
//     of ids with their current delay, answering "must this id still hold
//     off?", as kubelet gates container restarts.
//   - [Schedule] (apimachinery's wait.Backoff) is a value, the series of
//     waits between attempts, read by [Retry], [OnError] and
//     [ExponentialBackoff] for one operation at a time.
//   - The [RateLimiter]s ([DefaultControllerRateLimiter] and the others)
//     choose how long a failed queue item waits before it is requeued,
//     counting failures per item.
//   - [BackoffManager] hands the loop helpers ([BackoffUntil], and [Until]
//     and its kin through their period) the timer to wait on between runs.
//
// # Options and the clock
//
// One [Option] type serves the whole package: build one []Option and pass it
// to everything; an option a function does not read is ignored, and the
// table in Option's doc says who reads which. [WithClock] takes a
// k8s.io/utils/clock; nothing here calls time.Now, time.Sleep or the time
// package's timers directly, so a FakeClock controls every delay. Every type
// is safe for concurrent use unless its doc says otherwise, and callbacks
// are never called with a lock of this package held, but for [WithExpiry]'s.
//
// # Errors
//
// Errors a caller may branch on are values that errors.Is and errors.As
// find through any wrapping: sentinels ([ErrAttemptsExhausted],
// [ErrMaxElapsedTime], [ErrRetryBudgetExhausted], [ErrWaitTimeout],
// [ErrQueueShutDown]), [*RetryError] when Retry gives up (it reaches the
// last error of fn and the reason), [*PermanentError] and
// [*RetryAfterError], and the context's error and cause. An error that fn
// returns is never replaced: it is returned as is, or inside a *RetryError.
//
// # Bad input
//
// Constructors and Option functions panic on an argument outside its
// domain, on the caller's goroutine, with a message that names the function
// and the parameter:
//
//	backoff: NewBackOff: initial must be positive, got -1s
//
// Outside the domain are: a nil function, context, interface or pointer (a
// typed nil included); a negative duration, and a zero one for a first delay
// or a window; a NaN, infinite or negative number (a factor, a ratio, a
// rate), a limiter's rate of 0, and a breaker's failure ratio of 0 or above
// 1; a negative count, and one below 1 for a burst, a concurrency limit, a
// number of workers or of probes, or a minimum of requests; and a maximum
// below its minimum.
// The helpers that take a function ([Retry], [Until] and the other loop
// helpers, the poll functions, [ExponentialBackoff], [OnError],
// [RunWorkers]) panic at the call, before anything runs, on a nil function,
// context, manager or queue (and RunWorkers on fewer than 1 worker), whatever
// [WithPanicHandler] says.
//
// The exceptions keep the meaning that the API they mirror gives a value:
//
//   - [NewLimiter] and [NewKeyedLimiter] accept what x/time/rate's NewLimiter
//     does: a rate of 0 (the burst, then nothing), a burst of 0 (nothing at
//     all, unless the rate is +Inf) and a rate of +Inf (everything).
//   - A rate of +Inf means no limit to [NewBucketRateLimiter] and
//     [WithInitialRate] too.
//   - [OnError]'s nil retriable retries every error, as client-go's does, and
//     httpretry.NewTransport's nil base is http.DefaultTransport.
//
// Values that arrive at call time, often from data (a delay passed to
// AddAfter, a Schedule's fields, a loop's period, a poll interval, a
// Retry-After hint), are never rejected but clamped as documented where they
// are read: a negative delay counts as zero. Retry refuses only the two
// Schedules whose waits would be centuries (an infinite Factor without a
// Cap, a Jitter above [MaxRetryJitter]), and httpretry's constructors refuse
// them too. No function returns a negative delay or one above its cap, and
// no computation overflows: delays saturate.
package backoff
