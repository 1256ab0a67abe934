package redis_test

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

var evalshaCalls = regexp.MustCompile(`cmdstat_evalsha:calls=(\d+)`)

// scriptCalls returns how many EVALSHA the server has run: one per round
// trip of a decision.
func scriptCalls(t *testing.T, c *goredis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	m := evalshaCalls.FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// Decisions that arrive while a round trip is in flight travel together in
// the next one, each decided as if it had gone alone.
func TestConcurrentDecisionsShareARoundTrip(t *testing.T) {
	s := startServer(t)
	c := s.client()
	k := backoffredis.NewKeyedLimiter(c, "co", 1, 3, generous) // one event per second, burst 3
	k.SetKeyLimit("gold", 1, 10)
	ctx := context.Background()
	for _, key := range []string{"d", "e"} {
		res, err := k.AllowN(ctx, key, 3)
		require.NoError(t, err)
		require.True(t, res.Allowed, "draining %s", key)
	}
	queued := make(chan struct{}, 8)
	backoffredis.OnQueued(k, func() { queued <- struct{}{} })
	before := scriptCalls(t, c)

	// With the server stopped, the first call's round trip stays in flight
	// and the five others queue behind it.
	s.stop()
	var wg sync.WaitGroup
	var solo bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		solo = k.Allow(ctx, "a")
	}()
	results := make([]backoffredis.Result, 5)
	var reserved *backoffredis.Reservation
	calls := []func(){
		func() { results[0], _ = k.AllowN(ctx, "b", 2) },
		func() { results[1], _ = k.AllowN(ctx, "c", 4) },
		func() { results[2], _ = k.AllowN(ctx, "gold", 5) },
		func() { reserved, _ = k.ReserveN(ctx, "d", 1) },
		func() { results[4], _ = k.AllowN(ctx, "e", 1) },
	}
	// The first of the six to arrive flies; the queue fills with the rest.
	for _, f := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	for range calls {
		<-queued
	}
	s.cont()
	wg.Wait()

	assert.Equal(t, before+2, scriptCalls(t, c), "one round trip in flight, one for the queue")
	decided := []bool{solo, results[0].Allowed, results[1].Allowed, results[2].Allowed, reserved.OK(), results[4].Allowed}
	assert.Equal(t, []bool{true, true, false, true, true, false}, decided)
	assert.Equal(t, 1, results[0].Remaining, "b: 3 - 2")
	assert.Equal(t, time.Duration(-1), results[1].RetryAfter, "c: 4 exceeds the burst")
	assert.Equal(t, 5, results[2].Remaining, "gold: its own burst of 10, minus 5")
	inRange(t, reserved.Delay(), 0, time.Second)
	assert.Greater(t, results[4].RetryAfter, time.Duration(0))
	st := k.Stats()
	assert.Equal(t, uint64(2+6), st.Shared)
	assert.Zero(t, st.Errors+st.Fallback)
}

// A queued caller whose deadline passes leaves the queue without waiting for
// the round trip in flight, and its decision is not sent.
func TestQueuedCallerLeavesAtItsDeadline(t *testing.T) {
	s := startServer(t)
	c := s.client()
	k := backoffredis.NewKeyedLimiter(c, "co", 10, 10, generous)
	ctx := context.Background()
	require.True(t, k.Allow(ctx, "warm-up"))
	queued := make(chan struct{}, 2)
	backoffredis.OnQueued(k, func() { queued <- struct{}{} })
	before := scriptCalls(t, c)

	// Two calls: one flies into the stopped server, the other queues.
	s.stop()
	done := make(chan bool, 2)
	for _, key := range []string{"a", "x"} {
		go func() { done <- k.Allow(ctx, key) }()
	}
	<-queued
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := k.AllowN(short, "b", 1)
	took := time.Since(start)
	<-queued // b's own queuing
	s.cont()
	assert.True(t, <-done)
	assert.True(t, <-done)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, took, 50*time.Millisecond+loadSlack, "b waited for the round trip in flight, which ends at the limiter's 2 s timeout")
	assert.Equal(t, before+2, scriptCalls(t, c), "the flight and the queue's; b's decision was not sent")
	assert.True(t, k.Stats().Available, "a caller's deadline says nothing about Redis")
}

// Many goroutines on one bucket admit exactly its burst: each decision
// counts once, whichever round trip carries it.
func TestConcurrentCallersAdmitExactlyTheBurst(t *testing.T) {
	s := startServer(t)
	k := backoffredis.NewKeyedLimiter(s.client(), "co", 1e-3, 100, generous)
	ctx := context.Background()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if k.Allow(ctx, "k") {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(100), admitted.Load())
	assert.Equal(t, uint64(400), k.Stats().Shared)
}

// A long queue goes in round trips of at most 128 decisions, since a script
// holds Redis for its whole run.
func TestLongQueueGoesInSeveralRoundTrips(t *testing.T) {
	s := startServer(t)
	c := s.client()
	k := backoffredis.NewKeyedLimiter(c, "co", 1e-3, 150, generous)
	ctx := context.Background()
	require.True(t, k.Allow(ctx, "warm-up"))
	const callers = 201 // one in flight, 200 queued
	queued := make(chan struct{}, callers)
	backoffredis.OnQueued(k, func() { queued <- struct{}{} })
	before := scriptCalls(t, c)

	s.stop()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if k.Allow(ctx, "k") {
				admitted.Add(1)
			}
		}()
	}
	for range callers - 1 {
		<-queued
	}
	s.cont()
	wg.Wait()
	assert.Equal(t, before+1+2, scriptCalls(t, c), "the flight, then 128 and 72")
	assert.Equal(t, int64(150), admitted.Load())
}
