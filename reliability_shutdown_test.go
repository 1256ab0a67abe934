package backoff_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

// relAdd is one Add recorded by the shutdown race: seq before and after the
// call.
type relAdd struct {
	item          int
	before, after int64
}

// TestReliabilityShutdownRacesProducers: unlike TestQueueStress, whose drain
// begins after the producers have stopped, here the shutdown lands in the
// middle of the traffic. 4 producers × 2000 operations (Add, AddAfter,
// AddRateLimited, Forget) and 4 workers (Get or GetContext, then Add,
// AddRateLimited or Forget now and then, then Done) run while a goroutine
// steps the clock and another samples Len; when producer 0 is halfway,
// the queue is shut down: with ShutDownWithDrain, with ShutDownWithDrain cut
// short by a racing ShutDown, or with ShutDown alone. Then:
//   - nothing deadlocks (the test has a deadline), Len is never negative;
//   - no item is ever held by two workers at once;
//   - every Add that returned before the shutdown began is followed by a
//     processing start of its item (Get hands out what is queued after a
//     shutdown, and Done requeues an item added while it was processed);
//   - when ShutDownWithDrain returns uncut, nothing is queued or processed;
//   - at the end the workers have seen the shutdown and Len is 0.
func TestReliabilityShutdownRacesProducers(t *testing.T) {
	const (
		items     = 32
		producers = 4
		opsEach   = 2000
		workers   = 4
		steps     = 2000
	)
	for _, mode := range []string{"ShutDownWithDrain", "ShutDownWithDrain+ShutDown", "ShutDown"} {
		t.Run(mode, func(t *testing.T) {
			fc := newQueueClock()
			limiter := newQLimiter[int](func(n int) time.Duration { return time.Duration(n%3) * time.Millisecond })
			q := backoff.NewRateLimitingQueue[int](limiter, backoff.WithClock(fc))

			var (
				seq        atomic.Int64
				lastStart  [items]atomic.Int64
				holders    [items]atomic.Int32
				overlaps   atomic.Int32
				negative   atomic.Int32
				processed  atomic.Int64
				adds       = make([][]relAdd, producers+workers)
				drainStart atomic.Int64
				halfway    = make(chan struct{})
				stopSample atomic.Bool
			)
			drainStart.Store(1 << 62)
			record := func(slot, item int, add func()) {
				before := seq.Add(1)
				add()
				adds[slot] = append(adds[slot], relAdd{item, before, seq.Add(1)})
			}

			finished := make(chan struct{})
			go func() {
				defer close(finished)
				var wg sync.WaitGroup
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(w), 11))
						for {
							var item int
							if w%2 == 0 {
								it, shutdown := q.Get()
								if shutdown {
									return
								}
								item = it
							} else {
								it, err := q.GetContext(context.Background())
								if err != nil {
									if !errors.Is(err, backoff.ErrQueueShutDown) {
										t.Errorf("GetContext: %v", err)
									}
									return
								}
								item = it
							}
							if holders[item].Add(1) != 1 {
								overlaps.Add(1)
							}
							storeMax(&lastStart[item], seq.Add(1))
							processed.Add(1)
							runtime.Gosched()
							switch rng.IntN(8) {
							case 0:
								record(producers+w, item, func() { q.Add(item) })
							case 1:
								q.AddRateLimited(item)
							case 2:
								q.Forget(item)
							}
							holders[item].Add(-1)
							q.Done(item)
						}
					}()
				}

				var traffic sync.WaitGroup
				for p := 0; p < producers; p++ {
					traffic.Add(1)
					go func() {
						defer traffic.Done()
						rng := rand.New(rand.NewPCG(uint64(p), 12))
						for i := 0; i < opsEach; i++ {
							if p == 0 && i == opsEach/2 {
								close(halfway)
							}
							item := rng.IntN(items)
							switch rng.IntN(4) {
							case 0, 1:
								record(p, item, func() { q.Add(item) })
							case 2:
								q.AddAfter(item, time.Duration(rng.IntN(4000)-1000)*time.Microsecond)
							case 3:
								q.AddRateLimited(item)
							}
							if rng.IntN(10) == 0 {
								q.Forget(item)
							}
							runtime.Gosched() // let the workers interleave
						}
					}()
				}
				traffic.Add(2)
				go func() { // the clock
					defer traffic.Done()
					for i := 0; i < steps; i++ {
						fc.Step(250 * time.Microsecond)
						runtime.Gosched()
					}
				}()
				go func() { // Len is never negative
					defer traffic.Done()
					for !stopSample.Load() {
						if q.Len() < 0 {
							negative.Add(1)
						}
						runtime.Gosched()
					}
				}()

				<-halfway
				drainStart.Store(seq.Add(1))
				switch mode {
				case "ShutDownWithDrain":
					q.ShutDownWithDrain()
					assert.Zero(t, q.Len(), "ShutDownWithDrain returned with items queued")
				case "ShutDownWithDrain+ShutDown":
					cut := wtGo(func() {
						runtime.Gosched()
						q.ShutDown()
					})
					q.ShutDownWithDrain()
					<-cut
				case "ShutDown":
					q.ShutDown()
				}
				assert.True(t, q.ShuttingDown())
				wg.Wait() // the workers saw the shutdown
				stopSample.Store(true)
				traffic.Wait()
			}()
			waitFor(t, "the shutdown to complete: the workers and the traffic to stop", finished, fc)

			assert.Zero(t, overlaps.Load(), "an item was held by two workers at once")
			assert.Zero(t, negative.Load(), "Len was negative")
			assert.Zero(t, q.Len())
			start := drainStart.Load()
			checked := 0
			for _, slot := range adds {
				for _, a := range slot {
					if a.after < start {
						checked++
						require.Greater(t, lastStart[a.item].Load(), a.before,
							"item %d added before the shutdown was not processed after that add", a.item)
					}
				}
			}
			assert.Positive(t, checked)
			t.Logf("%s: %d adds checked, %d items processed", mode, checked, processed.Load())
		})
	}
}
