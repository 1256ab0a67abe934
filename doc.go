// Package backoff is Kubernetes' retry machinery as one small, dependency-light
// package: per-key exponential backoff, requeue rate limiters, loop and retry
// helpers, and a delaying, rate-limited workqueue, all driven by an
// injectable clock so that every behaviour can be tested without sleeping.
//
// Code that used k8s.io/client-go's flowcontrol and workqueue packages, or
// k8s.io/apimachinery's wait package, keeps its calls: the names, leading
// parameters and semantics are the same, the types gain a type parameter, and
// every time-dependent function gains trailing [Option]s. Where Kubernetes has
// a known flaw, this package fixes it and says so in the doc comment.
//
// # Which piece to use
//
//   - To retry one operation in application code (an HTTP call, a database
//     transaction): [Retry] or [RetryValue], with a [Schedule] that says how
//     long to wait between attempts, [Permanent] to stop early, [RetryAfter]
//     to honour a server's hint, and [WithJitterKind] to choose how waits are
//     spread. Most callers want this. [OnError] serves callers of client-go's
//     util/retry.
//   - To feed and drain a controller's work: a queue from [NewRateLimitingQueue]
//     with [DefaultControllerRateLimiter], drained by [RunWorkers]. Items are
//     de-duplicated, never handed to two workers at once, and requeued with
//     per-item exponential backoff. [NewQueue] and [NewDelayingQueue] give
//     the simpler queues; [Queue.GetContext] is a Get that can be cancelled,
//     and [DelayingQueue.TakeWaiting] returns what still waits at shutdown.
//   - To gate repeated work per key, as kubelet gates container restarts
//     (CrashLoopBackOff): [Backoff], from [NewBackOff]. It reclaims expired
//     entries by itself and counts [Backoff.Attempts].
//   - To decide requeue delays yourself: the [RateLimiter] implementations,
//     [NewItemExponentialFailureRateLimiter], [NewItemFastSlowRateLimiter],
//     [NewBucketRateLimiter], [NewMaxOfRateLimiter] and
//     [NewWithMaxWaitRateLimiter], with [WithRequeueJitter] and
//     [WithMaxTrackedItems].
//   - To pace calls in application code (an API's rate limit, a client's
//     share): [Limiter], from [NewLimiter], golang.org/x/time/rate's token
//     bucket on the injected clock; per client or tenant, [KeyedLimiter].
//   - To run something periodically until stopped: [Until], [JitterUntil],
//     [BackoffUntil], [Forever] and their context forms; to wait for a
//     condition: [PollUntilContextTimeout], [PollUntilContextCancel],
//     [ExponentialBackoffWithContext].
//   - To keep retries from multiplying the load on a dependency during an
//     outage: a [RetryBudget], shared by every Retry and queue that calls it,
//     through [WithRetryBudget].
//
// The Examples show each of these on a fake clock.
//
// # Four kinds of "backoff"
//
// Four names in this package speak of backoff, after the Kubernetes names
// they keep; they are different things:
//
//   - [Backoff] (from [NewBackOff]) is state: a table of ids, each with its
//     current delay, that answers "must this id still hold off?". It is
//     client-go's flowcontrol.Backoff, for gating repeated work per key.
//   - [Schedule] is a value: the series of waits between attempts (first
//     wait, factor, jitter, number of steps, cap), read by [Retry],
//     [ExponentialBackoff] and [OnError]. It is apimachinery's wait.Backoff,
//     renamed because Backoff is taken; it holds no state beyond its fields.
//   - [BackoffManager] is an interface: it hands a loop the timer to wait on
//     before its next run, and paces [BackoffUntil]. It is apimachinery's
//     wait.BackoffManager; [NewExponentialBackoffManager] and
//     [NewJitteredBackoffManager] make one.
//   - [ExponentialBackoff] is a function: it checks a condition with the
//     waits of a Schedule. It is apimachinery's wait.ExponentialBackoff, with
//     its quirks; new code wants [Retry].
//
// # Errors
//
// Every error a caller may branch on can be tested with errors.Is or
// errors.As, through any wrapping:
//
//   - Sentinels: [ErrAttemptsExhausted] and [ErrMaxElapsedTime] (why [Retry]
//     gave up), [ErrWaitTimeout] (a condition that was never met), and
//     [ErrQueueShutDown] ([Queue.GetContext] on a queue that is shut down).
//   - [*RetryError]: what Retry returns when it gives up. It says how many
//     attempts were made, and errors.Is reaches both the last error of fn
//     and the reason (a sentinel above, or the context's error).
//   - [*PermanentError], made by [Permanent] and recognised by [IsPermanent]:
//     an error that ends Retry at once, returned as fn returned it.
//     [*RetryAfterError], made by [RetryAfter], carries a server's hint.
//   - The context's error: a function that stops because its ctx ended
//     returns context.Canceled or context.DeadlineExceeded, or an error that
//     errors.Is matches with it; [Queue.GetContext] returns the cause given
//     to context.WithCancelCause or WithTimeoutCause, and a [*RetryError]
//     matches that cause too. [Interrupted] tells such an end, or
//     ErrWaitTimeout, from a condition that failed.
//
// An error that fn or a condition returns is never replaced by one of this
// package: it is returned as it is or, when Retry gives up, inside a
// *RetryError that errors.Is and errors.As see through.
//
// # Which function reads which option
//
// One [Option] type serves the whole package, so that a caller can build one
// []Option (a clock, say) and hand it to everything. The price is that an
// option passed to a function that does not read it is silently ignored: no
// panic, no error. Misplaced options are thus no-ops, not mistakes the
// package reports; this table says where each one has an effect.
//
//	Option                read by
//	WithClock             NewBackOff, NewBackOffWithJitter, NewBucketRateLimiter,
//	                      DefaultControllerRateLimiter, NewQueue, NewDelayingQueue,
//	                      NewRateLimitingQueue, NewExponentialBackoffManager,
//	                      NewJitteredBackoffManager, PollUntilContextTimeout,
//	                      PollUntilContextCancel, ExponentialBackoff(WithContext),
//	                      OnError, Retry, RetryValue, and the loop helpers except
//	                      BackoffUntil(WithContext), which wait on the manager's
//	                      timers
//	WithExpiry            NewBackOff, NewBackOffWithJitter
//	WithRequeueJitter,    NewItemExponentialFailureRateLimiter,
//	WithMaxTrackedItems   NewItemFastSlowRateLimiter, DefaultControllerRateLimiter
//	WithPanicHandler      Forever, Until, NonSlidingUntil, JitterUntil,
//	                      BackoffUntil, and the WithContext forms of the last four
//	WithJitterKind,       Retry, RetryValue (not OnError, whose waits are
//	WithMaxElapsedTime,   ExponentialBackoff's)
//	WithMaxRetryAfter,
//	WithNotify,
//	WithRetryable
//	WithMetrics,          NewQueue, NewDelayingQueue, NewRateLimitingQueue; the name
//	WithName,             and the logger are used by RunWorkers' logs
//	WithLogger
//
// [Jitter], [NewMaxOfRateLimiter], [NewWithMaxWaitRateLimiter] and
// [RunWorkers] take no options.
//
// # The clock
//
// Every constructor and helper that reads time or waits takes [WithClock].
// The default is the real clock. In tests, pass a FakeClock from
// k8s.io/utils/clock/testing and step it: nothing in this package calls
// time.Now, time.Sleep or the time package's timers directly, so a FakeClock
// controls every delay, and tests run in microseconds without flaking.
//
// Code that keeps the real clock can be tested instead inside a
// testing/synctest bubble (Go 1.25 and later), where the real clock's time is
// virtual: every wait of this package blocks durably there, so the bubble's
// time advances to it at once, [Forever] and loops given [NeverStop]
// included. The README says what a module needs for synctest.
//
// # Concurrency
//
// Every type in this package is safe for concurrent use by multiple
// goroutines unless its documentation says otherwise. Callbacks (the f of a
// loop helper, the fn of Retry, a worker's handler) are never called with a
// lock of this package held, so they may call back into the package. The one
// exception is the expiry rule given to [WithExpiry], which must be fast and
// must not call the Backoff it belongs to.
//
// # Bad input
//
// One rule for the whole package: constructors and Option functions panic on
// an argument outside its domain (a negative duration, a NaN, infinite or
// negative factor, a zero burst), with a message that names the function and
// the parameter, such as
//
//	backoff: NewBackOff: initial must be positive, got -1s
//
// So does every helper given a nil function or context, at the call and on
// the caller's goroutine (backoff: Retry: fn must not be nil, got <nil>).
//
// A panic at construction surfaces a programming error where it is cheap to
// fix: at start-up, with a stack. Values that arrive at call time instead,
// such as a delay passed to AddAfter, the fields of a [Schedule] literal, a
// period passed to Until or a server's Retry-After hint, often come from data;
// they are never rejected (but for the two Schedules whose waits would be
// centuries, which [Retry] refuses), but clamped as documented where they are read
// (a negative delay counts as zero, for example). Whatever the input, no
// function returns a negative delay or a delay above its cap, and no
// computation overflows: delays saturate instead.
package backoff
