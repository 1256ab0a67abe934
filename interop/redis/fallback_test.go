package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	backoffredis "github.com/retrykit/backoff/interop/redis"
)

// fallbackOptions make a limiter on a dead server decide locally on clk,
// without probing Redis again during the test.
func fallbackOptions(clk *clocktesting.FakeClock, more ...backoffredis.Option) []backoffredis.Option {
	return append([]backoffredis.Option{
		backoffredis.WithTimeout(testTimeout),
		backoffredis.WithProbeInterval(time.Hour),
		backoffredis.WithClock(clk),
		backoffredis.WithLogger(nil),
	}, more...)
}

// The fallback decides as the library's Limiter with this process's share
// of the limit: the same answers, step by step, on the same clock.
func TestFallbackDecidesAsTheLibrarysLimiterWithTheReplicaShare(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	l := backoffredis.NewLimiter(deadClient(t), "api", 10, 5, fallbackOptions(clk, backoffredis.WithExpectedReplicas(2))...)
	want := backoff.NewLimiter(5, 2, backoff.WithClock(clk)) // 10/2 per second, burst 5/2
	ctx := context.Background()

	steps := []struct {
		step time.Duration
		n    int
	}{{0, 1}, {0, 1}, {0, 1}, {100 * time.Millisecond, 1}, {100 * time.Millisecond, 1}, {0, 1},
		{time.Second, 2}, {0, 1}, {time.Second, 3}, {time.Second, 2}}
	for i, s := range steps {
		clk.Step(s.step)
		r, err := l.AllowN(ctx, s.n)
		require.NoError(t, err)
		assert.False(t, r.Shared, "step %d", i)
		assert.Equal(t, want.AllowN(s.n), r.Allowed, "step %d: AllowN(%d)", i, s.n)
		assert.Equal(t, int(max(0, want.Tokens())), r.Remaining, "step %d", i)
	}
	st := l.Stats()
	assert.Equal(t, uint64(len(steps)), st.Fallback)
	assert.Equal(t, uint64(1), st.Outages)
	assert.Zero(t, st.Shared)

	// SetLimit and SetBurst reach the fallback, divided as well.
	l.SetLimit(40)
	l.SetBurst(8)
	want.SetLimit(20)
	want.SetBurst(4)
	clk.Step(time.Second)
	for i := range 6 {
		assert.Equal(t, want.Allow(), l.Allow(ctx), "event %d after SetLimit/SetBurst", i)
	}

	// The fallback refuses what exceeds its share of the burst: it can never
	// admit it, though Redis could.
	r, err := l.AllowN(ctx, 5)
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	assert.Equal(t, time.Duration(-1), r.RetryAfter)
}

func TestFallbackReservesWaitsAndCancels(t *testing.T) {
	clk := armedClock{clocktesting.NewFakeClock(time.Unix(1000, 0)), make(chan time.Duration, 1)}
	l := backoffredis.NewKeyedLimiter(deadClient(t), "api", 10, 2, fallbackOptions(clk.FakeClock, backoffredis.WithClock(clk))...) // 100 ms per event
	ctx := context.Background()

	require.True(t, l.Allow(ctx, "k"))
	r1 := l.Reserve(ctx, "k")
	require.True(t, r1.OK())
	assert.False(t, r1.Shared())
	assert.Zero(t, r1.Delay())
	r2, err := l.ReserveN(ctx, "k", 2)
	require.NoError(t, err)
	require.True(t, r2.OK())
	assert.Equal(t, 200*time.Millisecond, r2.Delay())

	// A refused Allow says when it would be admitted, and takes nothing.
	res, err := l.AllowN(ctx, "k", 1)
	require.NoError(t, err)
	assert.False(t, res.Allowed)
	assert.Equal(t, 300*time.Millisecond, res.RetryAfter)

	// Cancel gives both events of r2 back.
	r2.Cancel()
	r3 := l.Reserve(ctx, "k")
	assert.Equal(t, 100*time.Millisecond, r3.Delay())

	// Keys are independent; n above the burst is never admitted.
	assert.True(t, l.Allow(ctx, "other"))
	bad, err := l.ReserveN(ctx, "other", 3)
	require.NoError(t, err)
	assert.False(t, bad.OK())

	// A Wait past the deadline reserves nothing; one within it returns
	// when the clock reaches its time.
	short := fakeDeadline{ctx, clk.Now().Add(50 * time.Millisecond)}
	assert.ErrorIs(t, l.Wait(short, "k"), backoffredis.ErrWouldExceedDeadline)
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, "k") }() // due 200 ms from now
	require.Equal(t, 200*time.Millisecond, <-clk.armed)
	clk.Step(199 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before its time", err)
	default:
	}
	clk.Step(time.Millisecond)
	require.NoError(t, <-done)
}

// armedClock is a FakeClock that tells, on armed, the duration of every
// timer made, so that a test steps the clock after Wait has armed its timer.
type armedClock struct {
	*clocktesting.FakeClock
	armed chan time.Duration
}

func (c armedClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.armed <- d
	return t
}

// fakeDeadline is a context whose deadline is an instant of a FakeClock: Wait
// measures the time to a deadline on the limiter's clock, as the library's
// Limiter does.
type fakeDeadline struct {
	context.Context
	deadline time.Time
}

func (c fakeDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

func TestFallbackKeyLimitsAndKeyBound(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	l := backoffredis.NewKeyedLimiter(deadClient(t), "api", 1, 4, fallbackOptions(clk,
		backoffredis.WithExpectedReplicas(2), backoffredis.WithFallbackKeys(2))...)
	ctx := context.Background()
	admitted := func(key string, tries int) int {
		n := 0
		for range tries {
			if l.Allow(ctx, key) {
				n++
			}
		}
		return n
	}

	// A key's own limit is divided as the limiter's is: 20/2 = 10.
	l.SetKeyLimit("vip", 100, 20)
	assert.Equal(t, 10, admitted("vip", 30))
	assert.Equal(t, 2, admitted("a", 10), "the limiter's burst 4, halved")
	l.ClearKeyLimit("vip")
	clk.Step(time.Hour) // every bucket full again
	assert.Equal(t, 2, admitted("vip", 10), "vip has the limiter's limit again")

	// Two keys held (vip and a new one, both empty): further keys share one
	// bucket of a key's limit, never more.
	assert.Equal(t, 2, admitted("b", 10))
	assert.Equal(t, 2, admitted("c", 10)+admitted("d", 10)+admitted("e", 10))
}

// TestFallbackProbesRedisOncePerInterval: while Redis is unavailable, the
// first decision once a probe interval has passed since the last failure
// tries Redis again (here it fails again), and the decisions before it do
// not.
func TestFallbackProbesRedisOncePerInterval(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	l := backoffredis.NewLimiter(deadClient(t), "api", 1000, 1000, backoffredis.WithTimeout(testTimeout),
		backoffredis.WithProbeInterval(time.Second), backoffredis.WithClock(clk), backoffredis.WithLogger(nil))
	ctx := context.Background()
	require.True(t, l.Allow(ctx)) // fails over to the fallback
	require.Equal(t, uint64(1), l.Stats().Errors)
	clk.Step(time.Second - time.Nanosecond)
	l.Allow(ctx)
	l.Allow(ctx)
	assert.Equal(t, uint64(1), l.Stats().Errors, "no probe within the interval")
	clk.Step(time.Nanosecond)
	l.Allow(ctx)
	assert.Equal(t, uint64(2), l.Stats().Errors, "the probe interval has passed: one decision tries Redis")
	l.Allow(ctx)
	assert.Equal(t, uint64(2), l.Stats().Errors, "the failed probe starts a new interval")
	assert.Equal(t, uint64(1), l.Stats().Outages, "one outage, however many failed probes")
}

// TestFallbackShareOfASmallBurstIsAtLeastOne: with more replicas than the
// burst, each process's share of the burst is rounded up to one event, not
// down to a fallback that refuses everything.
func TestFallbackShareOfASmallBurstIsAtLeastOne(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	ctx := context.Background()
	l := backoffredis.NewLimiter(deadClient(t), "api", 10, 2, fallbackOptions(clk, backoffredis.WithExpectedReplicas(4))...)
	assert.True(t, l.Allow(ctx), "a share of one event")
	assert.False(t, l.Allow(ctx), "and no more")
	k := backoffredis.NewKeyedLimiter(deadClient(t), "api", 10, 2, fallbackOptions(clk, backoffredis.WithExpectedReplicas(4))...)
	assert.True(t, k.Allow(ctx, "a"), "a share of one event per key")
	assert.False(t, k.Allow(ctx, "a"))
}

// TestFallbackRefusedAllowNTakesNothingOfAKey: a keyed fallback refusing
// AllowN(key, n) with n events gives back every event it had reserved, the
// first one included.
func TestFallbackRefusedAllowNTakesNothingOfAKey(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	l := backoffredis.NewKeyedLimiter(deadClient(t), "api", 10, 4, fallbackOptions(clk)...)
	ctx := context.Background()
	for range 3 {
		require.True(t, l.Allow(ctx, "k"))
	}
	r, err := l.AllowN(ctx, "k", 2) // one event left: refused
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	assert.True(t, l.Allow(ctx, "k"), "the refused AllowN took nothing: one event left")
	assert.False(t, l.Allow(ctx, "k"))
}

func TestTokensNeedsRedis(t *testing.T) {
	l := backoffredis.NewLimiter(deadClient(t), "api", 10, 5, backoffredis.WithTimeout(testTimeout), backoffredis.WithLogger(nil))
	_, err := l.Tokens(context.Background())
	assert.ErrorIs(t, err, backoffredis.ErrUnavailable)
	k := backoffredis.NewKeyedLimiter(deadClient(t), "api", 10, 5, backoffredis.WithTimeout(testTimeout), backoffredis.WithLogger(nil))
	_, err = k.Tokens(context.Background(), "k")
	assert.ErrorIs(t, err, backoffredis.ErrUnavailable)

	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stop")
	cancel(cause)
	_, err = l.Tokens(ctx)
	assert.ErrorIs(t, err, cause)
}
