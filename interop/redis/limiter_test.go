package redis_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

func TestLimiterAdmitsBurstThenRefuses(t *testing.T) {
	s := startServer(t)
	c := s.client()
	// One event per second: the test's calls fit well within the second
	// that refills one, however loaded the machine.
	l := backoffredis.NewLimiter(c, "api", 1, 5, generous)
	ctx := context.Background()
	span := openSpan(t, c)

	for i := range 5 {
		r, err := l.AllowN(ctx, 1)
		require.NoError(t, err)
		assert.True(t, r.Allowed, "event %d", i)
		assert.True(t, r.Shared)
		assert.Equal(t, 4-i, r.Remaining, "event %d", i)
	}
	r, err := l.AllowN(ctx, 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	// The first event's slot comes back a second after it was admitted.
	within(t, r.RetryAfter, time.Second-span.elapsed(), time.Second)
	assert.False(t, l.Allow(ctx))

	// n above the burst is never admitted.
	r, err = l.AllowN(ctx, 6)
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	assert.Equal(t, time.Duration(-1), r.RetryAfter)

	// The key is where the doc says, and expires when the bucket is full
	// again: 5 s after the first event.
	assert.Equal(t, "backoff:{api}", l.Key())
	ttl, err := c.PTTL(ctx, l.Key()).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl)
	assert.LessOrEqual(t, ttl, 5*time.Second)

	st := l.Stats()
	assert.Equal(t, uint64(8), st.Shared)
	assert.Zero(t, st.Fallback+st.Errors+st.Outages)
	assert.True(t, st.Available)
	assert.Equal(t, 1.0, l.Limit())
	assert.Equal(t, 5, l.Burst())
}

func TestLimiterZeroEventsAlwaysAllowed(t *testing.T) {
	// No round trip is made, so no server is needed.
	l := backoffredis.NewLimiter(deadClient(t), "api", 1, 1)
	r, err := l.AllowN(context.Background(), 0)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
}

func TestKeyedLimiterKeysAreIndependentAndShareOneHashTag(t *testing.T) {
	s := startServer(t)
	c := s.client()
	k := backoffredis.NewKeyedLimiter(c, "tenants", 1, 2, backoffredis.WithPrefix("app1:"), generous)
	ctx := context.Background()

	assert.True(t, k.Allow(ctx, "a"))
	assert.True(t, k.Allow(ctx, "a"))
	assert.False(t, k.Allow(ctx, "a"))
	assert.True(t, k.Allow(ctx, "b"))

	for _, key := range []string{"a", "b", "{x}"} {
		full := k.Key(key)
		assert.True(t, strings.HasPrefix(full, "app1:{tenants}:"), full)
		// Cluster hashes the text between the first '{' and the next '}'.
		open := strings.IndexByte(full, '{')
		end := strings.IndexByte(full[open:], '}')
		assert.Equal(t, "tenants", full[open+1:open+end], full)
	}
	n, err := c.Exists(ctx, k.Key("a"), k.Key("b")).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
}

func TestAllowBatchDecidesEachKeyInOrder(t *testing.T) {
	s := startServer(t)
	c := s.client()
	k := backoffredis.NewKeyedLimiter(c, "batch", 1, 2, generous)
	ctx := context.Background()

	rs, err := k.AllowBatch(ctx, []string{"a", "a", "a", "b", "c", "b"})
	require.NoError(t, err)
	got := make([]bool, len(rs))
	for i, r := range rs {
		got[i] = r.Allowed
		assert.True(t, r.Shared)
	}
	assert.Equal(t, []bool{true, true, false, true, true, true}, got)
	assert.False(t, k.Allow(ctx, "b"), "b has used its burst of 2 in the batch")
	assert.True(t, k.Allow(ctx, "c"))
	assert.Equal(t, uint64(3), k.Stats().Shared, "one round trip for the batch")

	rs, err = k.AllowBatch(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rs)
}

func TestKeysExpireWhenTheirBucketIsFull(t *testing.T) {
	s := startServer(t)
	c := s.client()
	// 100/s, burst 3: a key used once is full again after 10 ms, a key
	// emptied after 30 ms; its expiry must not be later.
	k := backoffredis.NewKeyedLimiter(c, "ttl", 100, 3, generous)
	ctx := context.Background()
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = strings.Repeat("k", 1+i%7) + string(rune('a'+i%26)) + time.Duration(i).String()
	}
	_, err := k.AllowBatch(ctx, keys)
	require.NoError(t, err)
	for _, key := range keys[:3] {
		require.True(t, k.Allow(ctx, key))
		require.True(t, k.Allow(ctx, key))
	}
	for i, key := range keys {
		ttl, err := c.PTTL(ctx, k.Key(key)).Result()
		require.NoError(t, err)
		limit := 10 * time.Millisecond
		if i < 3 {
			limit = 30 * time.Millisecond
		}
		// -2: already expired; 0: expiring now; -1 (no expiry) would be a leak.
		assert.True(t, ttl == -2 || (ttl >= 0 && ttl <= limit), "%s: PTTL %v", key, ttl)
	}
}

func TestReserveAndCancel(t *testing.T) {
	s := startServer(t)
	c := s.client()
	// On a fake local clock, Delay is the delay the server computed, which
	// its own clock bounds: each reservation's slot is 100 ms after the
	// previous one, less the server time since the first.
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	l := backoffredis.NewLimiter(c, "reserve", 10, 1, generous, backoffredis.WithClock(clk)) // one event per 100 ms
	ctx := context.Background()
	span := openSpan(t, c)

	r1 := l.Reserve(ctx)
	require.True(t, r1.OK())
	assert.Zero(t, r1.Delay())
	r2 := l.Reserve(ctx)
	require.True(t, r2.OK())
	r3 := l.Reserve(ctx)
	require.True(t, r3.OK())
	took := span.elapsed()
	within(t, r2.Delay(), 100*time.Millisecond-took, 100*time.Millisecond)
	within(t, r3.Delay(), 200*time.Millisecond-took, 200*time.Millisecond)

	// Cancelling the last reservation gives its slot to the next caller.
	r3.Cancel()
	r3.Cancel() // a second Cancel does nothing
	r4 := l.Reserve(ctx)
	d4 := r4.Delay()
	within(t, d4, 200*time.Millisecond-span.elapsed(), 200*time.Millisecond) // 300 ms without the Cancel

	// Delay counts down on the local clock from the decision's arrival.
	clk.Step(30 * time.Millisecond)
	assert.Equal(t, d4-30*time.Millisecond, r4.Delay())
	clk.Step(time.Second)
	assert.Zero(t, r4.Delay())

	bad, err := l.ReserveN(ctx, 2)
	require.NoError(t, err)
	assert.False(t, bad.OK())
	assert.Equal(t, backoffredis.InfDuration, bad.Delay())
	bad.Cancel()
}

func TestWaitRefusesAWaitPastTheDeadline(t *testing.T) {
	s := startServer(t)
	c := s.client()
	// Wait's deadline and timer are on a fake local clock, the delays on
	// the server's: one event per second leaves the test's calls a second
	// of server time, however loaded the machine, before a slot comes back.
	// The fake clock runs an hour ahead of the real one, so that go-redis,
	// which reads a deadline on the real clock, sees it far off.
	clk := armedClock{clocktesting.NewFakeClock(time.Now().Add(time.Hour)), make(chan time.Duration, 1)}
	l := backoffredis.NewLimiter(c, "wait", 1, 1, generous, backoffredis.WithClock(clk))
	ctx := context.Background()
	span := openSpan(t, c)
	require.NoError(t, l.Wait(ctx)) // the burst: no wait

	// The next event is a second away: a deadline 20 ms away cannot cover
	// it, Wait returns without arming a timer, and nothing is reserved.
	short := fakeDeadline{ctx, clk.Now().Add(20 * time.Millisecond)}
	assert.ErrorIs(t, l.Wait(short), backoffredis.ErrWouldExceedDeadline)
	select {
	case d := <-clk.armed:
		t.Fatalf("the refused Wait armed a timer of %v", d)
	default:
	}
	r := l.Reserve(ctx)
	within(t, r.Delay(), time.Second-span.elapsed(), time.Second) // 2 s had the refused Wait reserved

	assert.ErrorIs(t, l.WaitN(ctx, 2), backoffredis.ErrExceedsBurst)

	// Wait that can wait arms a timer of its reserved delay (2 s, less the
	// server time since the first event) and returns when it fires.
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	d := <-clk.armed
	within(t, d, 2*time.Second-span.elapsed(), 2*time.Second)
	clk.Step(d - time.Nanosecond)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before its time", err)
	default:
	}
	clk.Step(time.Nanosecond)
	require.NoError(t, <-done)

	// A context cancelled while Wait waits (the next slot is a second
	// away) ends the wait with its cause.
	cctx, cancelCause := context.WithCancelCause(ctx)
	cause := errors.New("shutting down")
	go func() { done <- l.Wait(cctx) }()
	<-clk.armed
	cancelCause(cause)
	assert.ErrorIs(t, <-done, cause)
}

func TestConstructorsRejectBadArguments(t *testing.T) {
	c := deadClient(t)
	cases := map[string]func(){
		"nil client":   func() { backoffredis.NewLimiter(nil, "x", 1, 1) },
		"empty name":   func() { backoffredis.NewLimiter(c, "", 1, 1) },
		"brace name":   func() { backoffredis.NewKeyedLimiter(c, "a{b", 1, 1) },
		"zero rate":    func() { backoffredis.NewLimiter(c, "x", 0, 1) },
		"zero burst":   func() { backoffredis.NewLimiter(c, "x", 1, 0) },
		"brace prefix": func() { backoffredis.WithPrefix("a}") },
		"zero timeout": func() { backoffredis.WithTimeout(0) },
		"replicas":     func() { backoffredis.WithExpectedReplicas(0) },
		"zero base delay": func() {
			// A base of 0 would requeue a failing item in a hot loop; the
			// library's rule, which this constructor applies.
			backoffredis.NewItemExponentialFailureRateLimiter[string](c, "x", 0, time.Second)
		},
		"delays": func() {
			backoffredis.NewItemExponentialFailureRateLimiter[string](c, "x", time.Second, time.Millisecond)
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) { assert.Panics(t, f) })
	}
}

// inRange checks lo < d ≤ hi: delays shrink by the real time that passes
// between the decision and the check, which a loaded machine stretches.
func inRange(t *testing.T, d, lo, hi time.Duration) {
	t.Helper()
	assert.Greater(t, d, lo)
	assert.LessOrEqual(t, d, hi)
}

// within checks lo ≤ d ≤ hi, for a delay whose bounds the test derived from
// the server's clock (see serverSpan).
func within(t *testing.T, d, lo, hi time.Duration) {
	t.Helper()
	assert.GreaterOrEqual(t, d, lo)
	assert.LessOrEqual(t, d, hi)
}

func TestInfiniteRateAdmitsEverything(t *testing.T) {
	s := startServer(t)
	l := backoffredis.NewLimiter(s.client(), "inf", math.Inf(1), 3, generous)
	for range 10 {
		r, err := l.AllowN(context.Background(), 5)
		require.NoError(t, err)
		assert.True(t, r.Allowed)
		assert.Equal(t, 3, r.Remaining)
	}
}
