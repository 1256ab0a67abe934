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
//   - To run something periodically until stopped: [Until], [JitterUntil],
//     [BackoffUntil], [Forever] and their context forms; to wait for a
//     condition: [PollUntilContextTimeout], [PollUntilContextCancel],
//     [ExponentialBackoffWithContext].
//
// The Examples show each of these on a fake clock.
//
// # The clock
//
// Every constructor and helper that reads time or waits takes [WithClock].
// The default is the real clock. In tests, pass a FakeClock from
// k8s.io/utils/clock/testing and step it: nothing in this package calls
// time.Now, time.Sleep or the time package's timers directly, so a FakeClock
// controls every delay, and tests run in microseconds without flaking.
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
