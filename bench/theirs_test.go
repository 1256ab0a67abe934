package bench

import (
	"context"
	"errors"
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

var errAttempt = errors.New("attempt failed")
