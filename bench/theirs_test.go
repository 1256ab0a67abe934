package bench

import (
	"context"
	"errors"
	"sync"
	"time"

	cenkalti "github.com/cenkalti/backoff/v5"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// The configurations below are each library's defaults for a controller, with
// metrics off everywhere (client-go and controller-runtime skip metrics for an
// unnamed queue; ours has a no-op default), so that no implementation pays for
// instrumentation the others skip.
func init() {
	queueImpls = append(queueImpls,
		impl[func() queue]{"clientgo", func() queue {
			return workqueue.NewTypedRateLimitingQueue[int](workqueue.DefaultTypedControllerRateLimiter[int]())
		}},
		impl[func() queue]{"priorityqueue", func() queue {
			// An empty name turns its metrics off, like client-go's.
			return priorityqueue.New[int]("")
		}},
	)
	latenessImplsOnly = append(latenessImplsOnly,
		impl[func() queue]{"timer", func() queue { return newTimerQueue() }},
		impl[func() queue]{"rearmed", func() queue { return newRearmedTimerQueue() }},
	)
	backoffImpls = append(backoffImpls,
		impl[func() perKeyBackoff]{"clientgo", func() perKeyBackoff {
			return flowcontrol.NewBackOff(backoffInitial, backoffMax)
		}},
	)
	itemExpImpls = append(itemExpImpls,
		impl[func() limiter]{"clientgo", func() limiter {
			return workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second)
		}},
	)
	controllerImpls = append(controllerImpls,
		impl[func() limiter]{"clientgo", func() limiter {
			return workqueue.DefaultTypedControllerRateLimiter[string]()
		}},
	)
	bucketImpls = append(bucketImpls,
		// client-go's bucket limiter is exactly rate.Limiter.Reserve().Delay().
		impl[func() limiter]{"xrate", func() limiter {
			return &workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)}
		}},
	)
	retryImpls = append(retryImpls,
		impl[retryFunc]{"cenkalti", func(attempts int, delay time.Duration, fn func() error) error {
			_, err := cenkalti.Retry(context.Background(), func() (struct{}, error) {
				return struct{}{}, fn()
			}, cenkalti.WithBackOff(cenkalti.NewConstantBackOff(delay)), cenkalti.WithMaxTries(uint(attempts)))
			return err
		}},
		impl[retryFunc]{"apimachinery", func(attempts int, delay time.Duration, fn func() error) error {
			// A condition reports failure as (false, nil): an error would end
			// the loop at once.
			return wait.ExponentialBackoffWithContext(context.Background(),
				wait.Backoff{Duration: delay, Factor: 1, Steps: attempts},
				func(context.Context) (bool, error) { return fn() == nil, nil })
		}},
	)
}

// backoffInitial and backoffMax parameterise every per-key Backoff.
const (
	backoffInitial = time.Second
	backoffMax     = 300 * time.Second
)

// timerQueue is the floor for delivery lateness: AddAfter arms a bare runtime
// timer (time.AfterFunc) whose callback hands the item to the goroutine
// blocked in Get over a channel — the least any queue must do to deliver a
// delayed item to a worker goroutine. Only the lateness benchmark uses it.
type timerQueue struct {
	ready chan int
}

func newTimerQueue() *timerQueue { return &timerQueue{ready: make(chan int, 1<<16)} }

func (q *timerQueue) Add(item int) { q.ready <- item }
func (q *timerQueue) AddAfter(item int, d time.Duration) {
	time.AfterFunc(d, func() { q.ready <- item })
}
func (q *timerQueue) Get() (int, bool) { return <-q.ready, false }
func (q *timerQueue) Done(int)         {}
func (q *timerQueue) Len() int         { return len(q.ready) }
func (q *timerQueue) ShutDown()        {}

// rearmedTimerQueue is the lateness floor of a queue that, like ours, keeps
// one runtime timer for all its waiting items: AddAfter appends the item to a
// FIFO (in the lateness benchmark every item has the same delay, so ready
// times arrive in order and a FIFO stands in for a heap) and arms the timer
// if it was idle; the callback hands every due item to the worker over a
// channel and re-arms the timer for the next one. Set against impl=timer, it
// shows what re-arming one timer from its own callback costs, apart from any
// queue's bookkeeping.
type rearmedTimerQueue struct {
	mu      sync.Mutex
	waiting []rearmedItem // in ready-time order
	timer   *time.Timer   // armed while waiting is not empty
	ready   chan int
}

type rearmedItem struct {
	at   time.Time
	item int
}

func newRearmedTimerQueue() *rearmedTimerQueue {
	return &rearmedTimerQueue{ready: make(chan int, 1<<16)}
}

func (q *rearmedTimerQueue) Add(item int) { q.ready <- item }
func (q *rearmedTimerQueue) AddAfter(item int, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting = append(q.waiting, rearmedItem{time.Now().Add(d), item})
	if len(q.waiting) == 1 {
		q.armLocked()
	}
}

// armLocked arms the timer for the earliest waiting item.
func (q *rearmedTimerQueue) armLocked() {
	d := time.Until(q.waiting[0].at)
	if q.timer == nil {
		q.timer = time.AfterFunc(d, q.fire)
	} else {
		q.timer.Reset(d)
	}
}

func (q *rearmedTimerQueue) fire() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	for len(q.waiting) > 0 && !q.waiting[0].at.After(now) {
		q.ready <- q.waiting[0].item
		q.waiting = q.waiting[1:]
	}
	if len(q.waiting) > 0 {
		q.armLocked()
	}
}

func (q *rearmedTimerQueue) Get() (int, bool) { return <-q.ready, false }
func (q *rearmedTimerQueue) Done(int)         {}
func (q *rearmedTimerQueue) Len() int         { return len(q.ready) }
func (q *rearmedTimerQueue) ShutDown()        {}

var errAttempt = errors.New("attempt failed")
