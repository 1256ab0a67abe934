package backoff_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/retrykit/backoff"
)

// TestQueueStress runs producers (Add, AddAfter, AddRateLimited), a clock
// stepper and RunWorkers (whose handler fails, panics and asks for requeues
// now and then) for a fixed number of operations, then ShutDownWithDrain. It
// checks that no item is ever held by two workers at once, and that every
// item is processed at least once after its last add. Run it with -race.
func TestQueueStress(t *testing.T) { queueStress(t, false) }

// TestQueueStressWithPriorities is TestQueueStress with priorities (adds
// with options, handlers that set Result.Priority), fairness across three
// keys and a starvation bound.
func TestQueueStressWithPriorities(t *testing.T) {
	queueStress(t, true, backoff.WithFairness(func(i int) string { return [...]string{"a", "b", "c"}[i%3] }),
		backoff.WithMaxReadyWait(time.Millisecond))
}

func queueStress(t *testing.T, priorities bool, opts ...backoff.Option) {
	const (
		items     = 64
		producers = 4
		opsEach   = 5000
		workers   = 4
		maxDelay  = 20 * time.Millisecond
	)
	fc := newQueueClock()
	limiter := newQLimiter[int](func(n int) time.Duration { return time.Duration(n%3) * time.Millisecond })
	q := backoff.NewRateLimitingQueue[int](limiter, append([]backoff.Option{backoff.WithClock(fc),
		backoff.WithLogger(slog.New(slog.NewTextHandler(&syncBuffer{}, nil)))}, opts...)...)
	prio := func(r int) int {
		if !priorities {
			return 0
		}
		return [...]int{-100, 0, 0, 10}[r%4]
	}

	var (
		seq       atomic.Int64        // orders adds and processing starts
		lastAdd   [items]atomic.Int64 // seq taken just before the last add of each item
		lastStart [items]atomic.Int64 // seq taken when a worker last started the item
		holders   [items]atomic.Int32 // workers holding each item right now
		overlaps  atomic.Int32        // times an item was held twice
	)

	var final time.Time // the clock when the drain began
	var addMu sync.RWMutex
	producing := true // guarded by addMu: handlers add items only while true
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		workersDone := make(chan struct{})
		go func() {
			defer close(workersDone)
			backoff.RunWorkers(ctx, q, workers, func(_ context.Context, item int) (backoff.Result, error) {
				if holders[item].Add(1) != 1 {
					overlaps.Add(1)
				}
				defer holders[item].Add(-1)
				lastStart[item].Store(seq.Add(1))
				runtime.Gosched()
				if rand.IntN(8) == 0 { // an event for the item while it is processed
					addMu.RLock()
					if producing {
						storeMax(&lastAdd[item], seq.Add(1))
						q.AddWithOptions(backoff.AddOptions{Priority: prio(rand.IntN(4))}, item)
					}
					addMu.RUnlock()
				}
				switch r := rand.IntN(20); r {
				case 0:
					return backoff.Result{}, errors.New("transient")
				case 1:
					panic("boom")
				case 2:
					return backoff.Result{RequeueAfter: time.Duration(rand.IntN(5)+1) * time.Millisecond}, nil
				case 3:
					return backoff.Result{Requeue: true, Priority: prio(rand.IntN(4))}, nil
				}
				return backoff.Result{}, nil
			})
		}()

		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(p), 7))
				for range opsEach {
					item := rng.IntN(items)
					storeMax(&lastAdd[item], seq.Add(1))
					switch rng.IntN(4) {
					case 3:
						q.AddWithOptions(backoff.AddOptions{Priority: prio(rng.IntN(4)), RateLimited: rng.IntN(2) == 0,
							After: time.Duration(rng.IntN(int(maxDelay)+1)) - time.Millisecond}, item)
					case 0:
						q.Add(item)
					case 1:
						q.AddAfter(item, time.Duration(rng.IntN(int(maxDelay)+1))-time.Millisecond)
					case 2:
						q.AddRateLimited(item)
					}
					if rng.IntN(10) == 0 {
						q.Forget(item)
					}
				}
			}()
		}
		wg.Add(1)
		go func() { // the clock
			defer wg.Done()
			for range producers * opsEach / 10 {
				fc.Step(time.Millisecond / 4)
				runtime.Gosched()
			}
		}()
		wg.Wait()
		addMu.Lock() // no handler is adding now, and none will
		producing = false
		addMu.Unlock()
		// Every delay requested so far has passed; ShutDownWithDrain queues
		// the due items and waits until the workers have processed all.
		fc.Step(maxDelay + time.Millisecond)
		final = fc.Now()
		q.ShutDownWithDrain()
		<-workersDone
	}()
	waitFor(t, "the stress run to finish: ShutDownWithDrain and the workers", finished, fc)

	assert.Zero(t, overlaps.Load(), "an item was held by two workers at once")
	for item := range items {
		if add := lastAdd[item].Load(); add > 0 {
			assert.Greater(t, lastStart[item].Load(), add, "item %d was not processed after its last add", item)
		}
	}
	for _, w := range q.TakeWaiting() {
		// Due items were queued by the shutdown: only requeues asked for by
		// handlers just before it may remain.
		assert.True(t, w.ReadyAt.After(final), "item %d ready at %v, before the drain", w.Item, w.ReadyAt)
	}
}

// storeMax stores v in a unless a holds more.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}
