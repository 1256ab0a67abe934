package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
	backoffredis "github.com/retrykit/backoff/interop/redis"
)

func TestRequeueBackoffSurvivesFailover(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()

	// Client A (one process) fails the item 6 times, then is discarded.
	clientA := s.client()
	a := backoffredis.NewItemExponentialFailureRateLimiter[string](clientA, "controller", 5*time.Millisecond, 1000*time.Second, generous)
	want := []time.Duration{5, 10, 20, 40, 80, 160}
	for i, ms := range want {
		assert.Equal(t, ms*time.Millisecond, a.When("ns/pod"), "failure %d", i+1)
	}
	assert.Equal(t, 6, a.NumRequeues("ns/pod"))
	require.NoError(t, clientA.Close())

	// Client B (the new leader) continues the backoff.
	b := backoffredis.NewItemExponentialFailureRateLimiter[string](s.client(), "controller", 5*time.Millisecond, 1000*time.Second, generous)
	assert.Equal(t, 6, b.NumRequeues("ns/pod"))
	assert.Equal(t, 320*time.Millisecond, b.When("ns/pod"))

	// The count expires after the TTL (default: 2×maxDelay here).
	ttl, err := s.client().PTTL(ctx, b.Key("ns/pod")).Result()
	require.NoError(t, err)
	assert.InDelta(t, float64(2000*time.Second), float64(ttl), float64(time.Second))

	// Forget deletes the key.
	b.Forget("ns/pod")
	n, err := s.client().Exists(ctx, b.Key("ns/pod")).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, 0, b.NumRequeues("ns/pod"))
	assert.Equal(t, 5*time.Millisecond, b.When("ns/pod"))
}

func TestRequeueDelaysSaturateAtMaxDelay(t *testing.T) {
	s := startServer(t)
	l := backoffredis.NewItemExponentialFailureRateLimiter[int](s.client(), "cap", time.Second, 10*time.Second, generous,
		backoffredis.WithFailureTTL(time.Minute))
	got := make([]time.Duration, 0, 70)
	for range 70 {
		got = append(got, l.When(7))
	}
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second}, got[:5])
	for _, d := range got[4:] {
		assert.Equal(t, 10*time.Second, d)
	}
}

type podKey struct{ ns, name string }

func (k podKey) String() string { return k.ns + "/" + k.name }

func TestRequeueLimiterPlugsIntoQueuesAndMaxOf(t *testing.T) {
	s := startServer(t)
	shared := backoffredis.NewItemExponentialFailureRateLimiter[podKey](s.client(), "queue", 5*time.Millisecond, time.Second, generous)
	assert.Equal(t, "backoff:{queue}:ns/a", shared.Key(podKey{"ns", "a"}), "items print with String")

	// Max-of composition, as DefaultControllerRateLimiter composes.
	composed := backoff.NewMaxOfRateLimiter[podKey](shared, backoff.NewItemExponentialFailureRateLimiter[podKey](time.Millisecond, time.Second))
	assert.Equal(t, 5*time.Millisecond, composed.When(podKey{"ns", "a"}))
	assert.Equal(t, 10*time.Millisecond, composed.When(podKey{"ns", "a"}))

	q := backoff.NewRateLimitingQueue[podKey](composed)
	defer q.ShutDown()
	item := podKey{"ns", "b"}
	q.AddRateLimited(item)
	assert.Equal(t, 1, q.NumRequeues(item))
	got, shutdown := q.Get()
	require.False(t, shutdown)
	assert.Equal(t, item, got)
	q.Forget(item)
	q.Done(got)
	assert.Equal(t, 0, shared.NumRequeues(item), "the queue's Forget reached Redis")
}

func TestRequeueFallsBackAndFailsClosed(t *testing.T) {
	c := deadClient(t)
	open := backoffredis.NewItemExponentialFailureRateLimiter[string](c, "down", 5*time.Millisecond, time.Second,
		backoffredis.WithTimeout(testTimeout), backoffredis.WithLogger(nil))
	timed(t, "When", func() { assert.Equal(t, 5*time.Millisecond, open.When("x")) })
	timed(t, "When", func() { assert.Equal(t, 10*time.Millisecond, open.When("x")) })
	assert.Equal(t, 2, open.NumRequeues("x"))
	open.Forget("x")
	assert.Equal(t, 0, open.NumRequeues("x"))
	st := open.Stats()
	assert.False(t, st.Available)
	assert.Equal(t, uint64(2), st.Fallback)

	closed := backoffredis.NewItemExponentialFailureRateLimiter[string](c, "down", 5*time.Millisecond, time.Second,
		backoffredis.WithTimeout(testTimeout), backoffredis.WithLogger(nil), backoffredis.WithFailClosed())
	timed(t, "When", func() { assert.Equal(t, time.Second, closed.When("x")) })
	assert.Equal(t, uint64(1), closed.Stats().Refused)
}
