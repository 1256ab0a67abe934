package backoff_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

// TestRateLimitingQueueSeed003DefaultController: with
// DefaultControllerRateLimiter, an item that fails every time becomes ready
// 5 ms, 10 ms, 20 ms … 655.36 s, then 1000 s after each AddRateLimited,
// exactly to the nanosecond (seed 003); Forget starts the series again.
func TestRateLimitingQueueSeed003DefaultController(t *testing.T) {
	fc := newQueueClock()
	q := backoff.NewRateLimitingQueue[string](backoff.DefaultControllerRateLimiter[string](backoff.WithClock(fc)),
		backoff.WithClock(fc))
	defer q.ShutDown()
	want := func(n int) time.Duration { return min(5*time.Millisecond<<min(n, 30), 1000*time.Second) }
	q.Add("default/cluster")
	for n := 0; n < 25; n++ {
		if n == 22 {
			q.Forget("default/cluster")
		}
		item, _ := get(t, q.Get, fc)
		q.AddRateLimited(item)
		q.Done(item)
		d := want(n)
		if n >= 22 {
			d = want(n - 22)
		}
		require.Equal(t, min(n%22+1, 22), q.NumRequeues(item), "failure %d", n+1)
		fc.Step(d - 1)
		require.Equal(t, 0, q.Len(), "failure %d: ready 1ns early", n+1)
		fc.Step(1)
		require.Equal(t, 1, q.Len(), "failure %d: not ready after %v", n+1, d)
	}
}
