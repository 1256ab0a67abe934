package backoff_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// The tests below are aimed at how a RetryBudget allows retries from
// parallel goroutines without a shared write per decision: it sets retries
// aside for the goroutines that are retrying (see retrybudget_lease.go). Run
// them under -race.

// holdRetries starts n goroutines that each get one retry from b, so that
// each may hold retries set aside for its next ones, and wait. It returns
// once all have their retry; each then asks for one more retry when release
// is closed and sends the answer on the returned channel.
func holdRetries(t *testing.T, b *backoff.RetryBudget, n int, release <-chan struct{}) <-chan bool {
	t.Helper()
	answers := make(chan bool, n)
	var got sync.WaitGroup
	for range n {
		got.Add(1)
		go func() {
			allowed := b.TryRetry()
			got.Done()
			if !allowed {
				answers <- false // the caller's count of allowed retries fails
				return
			}
			<-release
			answers <- b.TryRetry()
		}()
	}
	got.Wait()
	return answers
}

// TestRetryBudgetRefusesOnlyWhenSpentWhileOthersHoldRetries: with retries set
// aside by idle goroutines, a refusal still comes only when the budget is
// really spent, and the idle goroutines then get nothing more.
func TestRetryBudgetRefusesOnlyWhenSpentWhileOthersHoldRetries(t *testing.T) {
	const holders, floor = 32, 1000
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0, floor/10, 10*time.Second, backoff.WithClock(fc))
	release := make(chan struct{})
	answers := holdRetries(t, b, holders, release)

	allowed := holders
	for b.TryRetry() {
		allowed++
		require.LessOrEqual(t, allowed, floor, "more retries than the floor allows")
	}
	assert.Equal(t, floor, allowed, "refused before the floor was spent")
	assert.Equal(t, backoff.RetryBudgetSnapshot{Retries: floor, Refused: 1, Balance: 0}, b.Snapshot())

	close(release)
	for range holders {
		assert.False(t, <-answers, "a retry beyond the floor, from what was set aside")
	}
	assert.Equal(t, int64(1+holders), b.Snapshot().Refused)
}

// TestRetryBudgetSetAsideRetriesEndWithTheirBucket: retries set aside in one
// bucket are not allowed in a later one, where the requests that paid for
// them have left the window.
func TestRetryBudgetSetAsideRetriesEndWithTheirBucket(t *testing.T) {
	const holders = 16
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, time.Second, backoff.WithClock(fc))
	for range 1000 {
		b.RecordRequest()
	}
	release := make(chan struct{})
	answers := holdRetries(t, b, holders, release)

	fc.Step(time.Second + time.Second/10) // the requests' bucket leaves the window
	close(release)
	for range holders {
		assert.False(t, <-answers, "a retry paid for by requests that left the window")
	}
	assert.Equal(t, backoff.RetryBudgetSnapshot{Refused: holders}, b.Snapshot())
}

// TestRetryBudgetSetAsideRetriesAreNotCountedAsMade: when the window moves
// on, the retries set aside and not used are not counted as retries made, in
// the bucket they were set aside in, while that bucket stays in the window.
func TestRetryBudgetSetAsideRetriesAreNotCountedAsMade(t *testing.T) {
	const holders, requests = 16, 1000
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(1, 0, time.Second, backoff.WithClock(fc))
	for range requests {
		b.RecordRequest()
	}
	release := make(chan struct{})
	answers := holdRetries(t, b, holders, release)

	fc.Step(time.Second / 2) // a later bucket; the requests are still in the window
	allowed := holders
	for b.TryRetry() {
		allowed++
		require.LessOrEqual(t, allowed, requests, "more retries than the requests pay for")
	}
	assert.Equal(t, requests, allowed, "refused before the requests' retries were spent")
	close(release)
	for range holders {
		assert.False(t, <-answers, "a retry beyond the requests' retries, from what was set aside")
	}
	assert.Equal(t, backoff.RetryBudgetSnapshot{Requests: requests, Retries: requests, Refused: 1 + holders},
		b.Snapshot())
}

// TestRetryBudgetParallelDecisionsKeepTheirCounts hammers one budget from
// goroutines that request, retry and read snapshots while the clock moves:
// every retry asked for is allowed or refused exactly once, and once the
// window has passed, nothing set aside is left counted.
func TestRetryBudgetParallelDecisionsKeepTheirCounts(t *testing.T) {
	const goroutines, calls = 8, 3000
	fc := testingclock.NewFakeClock(epoch)
	b := backoff.NewRetryBudget(0.5, 20, time.Second, backoff.WithClock(fc))
	var allowed, asked atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 22))
			for range calls {
				switch r := rng.IntN(100); {
				case r < 40:
					b.RecordRequest()
				case r < 97:
					asked.Add(1)
					if b.TryRetry() {
						allowed.Add(1)
					}
				case r < 99:
					b.Snapshot() // takes back what is set aside, while others use it
				default:
					fc.Step(time.Duration(rng.IntN(50)) * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	s := b.Snapshot()
	assert.Equal(t, asked.Load()-allowed.Load(), s.Refused, "every refusal counted once")
	fc.Step(2 * time.Second)
	s = b.Snapshot()
	assert.Equal(t, int64(0), s.Retries, "retries left counted after the window passed: %+v", s)
	assert.Equal(t, int64(0), s.Requests)
	assert.Equal(t, asked.Load()-allowed.Load(), s.Refused)
}
