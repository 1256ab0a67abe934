package backoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Result is what a handler run by [RunWorkers] asks for, besides its error:
// whether and when to process the item again. The zero Result means done.
// It is controller-runtime's reconcile.Result.
type Result struct {
	// Requeue asks for the item to be processed again after the queue's
	// rate-limited delay (AddRateLimited), as after a failure, but without
	// logging one.
	Requeue bool
	// RequeueAfter, if positive, asks for the item to be processed again
	// after exactly this delay (Forget, then AddAfter), whatever its failure
	// count; it takes precedence over Requeue. Zero or negative means no
	// timed requeue.
	RequeueAfter time.Duration
	// Priority, if not zero, is the priority at which the item is queued
	// again, after Requeue, RequeueAfter or an error (see [AddOptions]);
	// zero keeps the priority the item was handed out with. As a plain int,
	// it cannot ask for priority 0 for an item handed out at another
	// priority (controller-runtime's *int can).
	Priority int
}

// WithItemTimeout makes [RunWorkers] call its handler with a context that
// ends, with context.DeadlineExceeded, d after the item is handed over, or
// when RunWorkers' ctx ends if that comes first. d is measured on the
// queue's clock (see [WithClock]), so stepping a FakeClock past it ends the
// handler's context; on the real clock the context also reports the
// timeout's instant from Deadline (on another clock, ctx's deadline, as
// [WithAttemptTimeout] says). A handler that returns an error because of it takes
// the error path: the item is requeued with AddRateLimited and the failure
// is logged, and pacers count a timeout. It is controller-runtime's
// ReconciliationTimeout for this queue's handlers, with two differences:
// the timeout runs on the queue's clock rather than always the real one,
// and the context's cause is context.DeadlineExceeded itself (controller-
// runtime sets a cause of its own and counts timeouts in a metric of their
// own; here they are failures like others).
//
// Go cannot stop a goroutine: a handler that ignores its context keeps
// running, and keeps its worker, after the timeout, until it returns. The
// worker is not replaced meanwhile, because the item is not Done until the
// handler returns: another worker may not take it, and a second worker
// would run it twice at once. d = 0 means no timeout (the default); a
// negative d panics. Each handled item then costs the allocations of its
// context: the context and the clock's timer.
func WithItemTimeout(d time.Duration) Option {
	mustNotBeNegative("WithItemTimeout", "d", d)
	return durationOption(optionItemTimeout, d)
}

// errHandlerExited is the failure recorded for an item whose handler called
// runtime.Goexit (t.FailNow in a test, say) instead of returning.
var errHandlerExited = errors.New("backoff: handler called runtime.Goexit")

// handlerPanic is the failure recorded for an item whose handler panicked.
type handlerPanic struct {
	value any
	stack []byte
}

func (p *handlerPanic) Error() string { return fmt.Sprintf("backoff: handler panicked: %v", p.value) }

// RunWorkers runs workers goroutines that take items from q and pass them to
// handle, until ctx is done or q is shut down, and returns once every worker
// has returned. Each worker treats what handle returns as controller-runtime
// treats what a Reconciler returns:
//
//   - an error: AddRateLimited(item), and the error is logged;
//   - an error marked with [Permanent]: Forget(item), not requeued, logged;
//   - no error and a positive Result.RequeueAfter: Forget(item), then
//     AddAfter(item, RequeueAfter);
//   - no error and Result.Requeue: AddRateLimited(item);
//   - no error otherwise: Forget(item);
//
// and then always Done(item). Requeues keep the priority the item was handed
// out with ([Queue.GetWithPriority]), unless Result.Priority sets one. A panic in handle, or a runtime.Goexit, is an
// error for that item: it is logged with its stack and the item is requeued
// with AddRateLimited. The worker survives, so the pool keeps its size. An
// error returned because ctx ended (context.Canceled, DeadlineExceeded) is
// not logged. Logs go to the queue's logger ([WithLogger], default
// slog.Default()), with the queue's name ([WithName]). With
// [WithRetryBudget], a requeue that the budget refused says so: its line
// reads "retry budget exhausted" and carries retry_budget_refused=true and
// the delay the budget set (a Result.Requeue, which logs nothing when
// allowed, logs it at warning level), and [DelayMetrics] counts it.
//
// handle receives ctx. Items of q are processed one at a time, never by two
// workers at once (the queue guarantees it); different items concurrently.
//
// When ctx ends, RunWorkers shuts q down. Each worker finishes the item it
// holds and takes no other; RunWorkers returns when all have. Items still
// queued stay in q, and Get hands them out; items waiting for a delay are
// returned by TakeWaiting. If instead q is shut down by someone else,
// workers process every queued item first (ShutDownWithDrain waits for
// exactly that), then RunWorkers returns.
//
// RunWorkers registers no clock waiter of its own: idle workers block in
// GetContext. The waiters on q's clock are the queue's (at most one, while
// items wait for a delay; see [WithClock]).
//
// With [WithPacer], each worker asks the pacer before it takes an item,
// and tells it how handle ended: with an [AdaptiveLimiter], the number of
// items processed at once follows the limiter's limit (at most workers),
// and the items wait in the queue, not in goroutines; an error that
// carries a [RetryAfter] hint or wraps [ErrOverloaded] lowers the limit.
// An item that a [Throttler] or a [Breaker] rejects is not handed to
// handle: it fails with [ErrThrottled] or [ErrBreakerOpen] and is requeued
// with the queue's backoff.
//
// [WithItemTimeout] gives each call of handle a context that ends d after
// the item is handed over, on q's clock, and [WithRequeueJitter] spreads
// the Result.RequeueAfter requeues. RunWorkers reads no other option.
//
// RunWorkers panics, on the caller's goroutine before it starts a worker,
// if ctx, q or handle is nil, or if workers < 1.
func RunWorkers[T comparable](ctx context.Context, q *RateLimitingQueue[T], workers int, handle func(ctx context.Context, item T) (Result, error), opts ...Option) {
	const where = "RunWorkers"
	mustNotBeNil(where, "ctx", ctx == nil)
	mustNotBeNil(where, "q", q == nil)
	mustNotBeNil(where, "handle", handle == nil)
	if workers < 1 {
		badArgument(where, "workers must be at least 1", workers)
	}
	var cfg config
	cfg.apply(opts)
	p := &workerPool[T]{ctx: ctx, q: q, handle: handle, pacer: cfg.retry.pacer, allDone: make(chan struct{}),
		itemTimeout: cfg.queue.itemTimeout, requeueJitter: cfg.limiter.jitter}
	p.live.Store(int64(workers))
	for i := 0; i < workers; i++ {
		go p.run()
	}
	select {
	case <-ctx.Done():
	case <-p.allDone:
	}
	// ctx may have ended with the workers already gone (they saw it first,
	// before this goroutine came to the select, which then picks either
	// case): q is shut down either way.
	if ctx.Err() != nil {
		q.ShutDown()
	}
	<-p.allDone
}

// workerPool is the state that the workers of one RunWorkers call share.
type workerPool[T comparable] struct {
	ctx    context.Context
	q      *RateLimitingQueue[T]
	handle func(ctx context.Context, item T) (Result, error)
	pacer  Pacer // WithPacer's, or nil
	// itemTimeout bounds each call of handle (0: none); requeueJitter
	// stretches a RequeueAfter by up to this factor (0: none).
	itemTimeout   time.Duration
	requeueJitter float64
	live          atomic.Int64  // workers that have not returned
	allDone       chan struct{} // closed by the last worker to return
}

// run is one worker: it processes items until GetContext fails.
func (p *workerPool[T]) run() {
	returned := false
	defer func() {
		if !returned {
			// handle called runtime.Goexit, which cannot be stopped: this
			// goroutine ends, so start its replacement.
			go p.run()
			return
		}
		if p.live.Add(-1) == 0 {
			close(p.allDone)
		}
	}()
	for {
		// The pacer first: an item waits in the queue, not in a worker.
		var pc pacing
		var refused error // a Throttler's rejection
		if p.pacer != nil {
			if pc, refused = p.pacer.startAttempt(p.ctx); refused != nil && p.ctx.Err() != nil {
				returned = true
				return
			}
		}
		item, prio, err := p.q.GetContextWithPriority(p.ctx)
		if err != nil {
			pc.finish(outcomeNeutral, 0)
			returned = true
			return
		}
		if refused != nil {
			p.settle(item, prio, Result{}, refused)
			continue
		}
		p.process(item, prio, &pc)
	}
}

// process runs handle on item, handed out at priority prio, tells pc (the
// pacing of this run, empty without a pacer) how it ended, and settles the
// outcome, however handle ends.
func (p *workerPool[T]) process(item T, prio int, pc *pacing) {
	var res Result
	var err error
	returned := false
	hctx := p.ctx // handle's context
	var timeout *clockTimeoutContext
	if p.itemTimeout > 0 {
		timeout = withAttemptTimeout(p.ctx, p.q.clock, p.itemTimeout)
		hctx = timeout
	}
	defer func() {
		if timeout != nil {
			timeout.release()
		}
		if !returned {
			if v := recover(); v != nil {
				err = &handlerPanic{value: v, stack: debug.Stack()}
			} else {
				err = errHandlerExited
			}
			pc.finish(outcomeNeutral, 0)
		} else {
			pc.finish(classifyOutcome(p.ctx, err))
		}
		p.settle(item, prio, res, err)
	}()
	res, err = p.handle(hctx, item)
	returned = true
}

// settle applies the requeue rules to the outcome of one run of item,
// handed out at priority prio, then calls Done.
func (p *workerPool[T]) settle(item T, prio int, res Result, err error) {
	q := p.q
	defer q.Done(item)
	var hp *handlerPanic
	switch {
	case errors.As(err, &hp):
		r := q.addRateLimitedAt(item, prio)
		p.logFailure(r.message("backoff: handler panicked; item requeued with backoff"), item, err,
			append(r.attrs(q.NumRequeues(item)), slog.String("stack", string(hp.stack)))...)
	case IsPermanent(err):
		q.Forget(item)
		p.logFailure("backoff: item failed permanently; not requeued", item, err)
	case err != nil:
		r := q.addRateLimitedAt(item, res.priorityOr(prio))
		if p.ctx.Err() == nil || !(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			p.logFailure(r.message("backoff: item failed; requeued with backoff"), item, err, r.attrs(q.NumRequeues(item))...)
		}
	case res.RequeueAfter > 0:
		q.Forget(item)
		q.addAfterAt(item, Jitter(res.RequeueAfter, p.requeueJitter), res.priorityOr(prio))
	case res.Requeue:
		if r := q.addRateLimitedAt(item, res.priorityOr(prio)); r.refused {
			p.log(slog.LevelWarn, budgetRefusedRequeue, item, nil, r.attrs(q.NumRequeues(item))...)
		}
	default:
		q.Forget(item)
	}
}

// logFailure logs the failure of item at error level.
func (p *workerPool[T]) logFailure(msg string, item T, err error, attrs ...slog.Attr) {
	p.log(slog.LevelError, msg, item, err, attrs...)
}

// log logs msg about item, with err if not nil, at level.
func (p *workerPool[T]) log(level slog.Level, msg string, item T, err error, attrs ...slog.Attr) {
	l := p.q.logger
	if l == nil {
		l = slog.Default()
	}
	all := make([]slog.Attr, 0, 3+len(attrs))
	if p.q.name != "" {
		all = append(all, slog.String("queue", p.q.name))
	}
	all = append(all, slog.Any("item", item))
	if err != nil {
		all = append(all, slog.Any("error", err))
	}
	l.LogAttrs(p.ctx, level, msg, append(all, attrs...)...)
}

// budgetRefusedRequeue is the log message of a requeue (Result.Requeue)
// that the retry budget refused; a failure's message says it after its own.
const budgetRefusedRequeue = "backoff: retry budget exhausted; item waits for the budget, not its backoff"

// message returns msg, the log message of a failure requeued with backoff,
// or the message that says the retry budget refused the requeue.
func (r requeue) message(msg string) string {
	if r.refused {
		return "backoff: item failed; retry budget exhausted, item waits for the budget, not its backoff"
	}
	return msg
}

// attrs returns the log attributes of a requeue: the failure count, and,
// when the budget refused it, that and the delay it set.
func (r requeue) attrs(requeues int) []slog.Attr {
	a := []slog.Attr{slog.Int("requeues", requeues)}
	if r.refused {
		a = append(a, slog.Bool("retry_budget_refused", true), slog.Duration("delay", r.delay))
	}
	return a
}

// priorityOr returns the priority r asks for, or prio if r asks for none.
func (r Result) priorityOr(prio int) int {
	if r.Priority != 0 {
		return r.Priority
	}
	return prio
}

// addRateLimitedAt is AddRateLimited at priority prio, for the workers.
func (q *RateLimitingQueue[T]) addRateLimitedAt(item T, prio int) requeue {
	if prio == 0 {
		return q.addRateLimited(item)
	}
	return q.addWithOptions(AddOptions{RateLimited: true, Priority: prio}, q.limiter, q.budget, []T{item})
}

// addAfterAt is AddAfter at priority prio, for the workers.
func (q *RateLimitingQueue[T]) addAfterAt(item T, d time.Duration, prio int) {
	if prio == 0 {
		q.AddAfter(item, d)
		return
	}
	q.AddWithOptions(AddOptions{After: d, Priority: prio}, item)
}
