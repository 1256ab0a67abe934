package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

func TestKeyedLimiterKeysAreIndependent(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[string](10, 2, backoff.WithClock(clk))
	assert.True(t, k.Allow("a"))
	assert.True(t, k.Allow("a"))
	assert.False(t, k.Allow("a"), "a's burst is spent")
	assert.True(t, k.AllowN("b", 2), "b has its own bucket")
	assert.False(t, k.AllowN("c", 3), "more than the burst is never allowed")
	assert.True(t, k.AllowN("c", 0))
	assert.Equal(t, 2, k.Len(), "a and b are held; c took nothing")
	assert.Equal(t, 100*time.Millisecond, k.Reserve("a").Delay())
	clk.Step(200 * time.Millisecond)
	assert.True(t, k.Allow("a"), "a earns at 10/s")
	assert.False(t, k.Allow("a"))
}

// TestKeyedLimiterMatchesLimiter runs the same calls on a key and on a
// Limiter: a key's bucket is a Limiter's.
func TestKeyedLimiterMatchesLimiter(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[int](7.3, 4, backoff.WithClock(clk))
	l := backoff.NewLimiter(7.3, 4, backoff.WithClock(clk))
	steps := []time.Duration{0, 0, 0, 1, 123456789, 0, 987654321, 5 * time.Second, 0, 3}
	for i, step := range steps {
		clk.Step(step)
		require.Equal(t, l.AllowN(i%3), k.AllowN(7, i%3), "AllowN %d", i)
		rl, rk := l.Reserve(), k.Reserve(7)
		require.Equal(t, rl.OK(), rk.OK())
		require.Equal(t, rl.Delay(), rk.Delay(), "Reserve %d", i)
		if i%4 == 3 {
			rl.Cancel()
			rk.Cancel()
		}
	}
}

func TestKeyedLimiterReclaimsFullKeys(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[int](10, 1, backoff.WithClock(clk))
	for i := range 1000 {
		require.True(t, k.Allow(i))
	}
	assert.Equal(t, 1000, k.Len())
	clk.Step(100 * time.Millisecond) // every bucket is full again
	for i := 1000; i < 3000; i++ {
		require.True(t, k.Allow(i))
	}
	// Before the table grows for the new keys it drops the full ones: the
	// 2,000 new keys are not full and all stay.
	assert.GreaterOrEqual(t, k.Len(), 2000)
	assert.Less(t, k.Len(), 2500, "refilled keys are reclaimed as keys are added")
	clk.Step(100 * time.Millisecond) // all full again
	held := k.Len()
	for i := range 1000 {
		require.True(t, k.Allow(-1-i))
	}
	assert.Less(t, k.Len(), held, "the table shrinks while its keys refill, though keys are added")
	assert.True(t, k.Allow(5), "a reclaimed key starts full")
}

func TestKeyedLimiterMaxKeys(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[string](1, 2, backoff.WithClock(clk), backoff.WithMaxKeys(3))
	for _, key := range []string{"a", "b", "c"} {
		require.True(t, k.Allow(key))
	}
	assert.Equal(t, 3, k.Len())
	// The table is full and no bucket has refilled: new keys share one
	// bucket of burst 2, so together they get two events, not two each.
	admitted := 0
	for i := range 100 {
		if k.Allow(fmt.Sprint("new-", i)) {
			admitted++
		}
	}
	assert.Equal(t, 2, admitted, "keys beyond the bound share one bucket")
	assert.Equal(t, 3, k.Len(), "the bound holds")
	assert.True(t, k.Allow("a"), "held keys keep their own buckets")
	assert.False(t, k.Allow("a"))

	clk.Step(2 * time.Second) // every held bucket refills
	assert.True(t, k.AllowN("fresh", 2), "a refilled key makes room for a new one")
	assert.False(t, k.Allow("fresh"), "which has its own bucket")
	assert.LessOrEqual(t, k.Len(), 3)
}

func TestKeyedLimiterOwnLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	k := backoff.NewKeyedLimiter[string](1, 1, backoff.WithClock(clk))
	k.SetKeyLimit("vip", 100, 10)
	assert.True(t, k.AllowN("vip", 10))
	assert.False(t, k.Allow("vip"))
	clk.Step(10 * time.Millisecond)
	assert.True(t, k.Allow("vip"), "vip earns at 100/s")
	assert.False(t, k.AllowN("other", 2), "others keep the limiter's burst")
	k.SetKeyLimit("free", math.Inf(1), 0)
	assert.True(t, k.AllowN("free", 1000))
	k.ClearKeyLimit("vip")
	clk.Step(time.Hour)
	assert.False(t, k.AllowN("vip", 2), "vip is back to burst 1")
	assert.True(t, k.Allow("vip"))
}

func TestKeyedLimiterBadInput(t *testing.T) {
	assert.PanicsWithValue(t, "backoff: NewKeyedLimiter: r must not be negative or NaN, got -1",
		func() { backoff.NewKeyedLimiter[string](-1, 1) })
	assert.PanicsWithValue(t, "backoff: NewKeyedLimiter: burst must not be negative, got -2",
		func() { backoff.NewKeyedLimiter[string](1, -2) })
	k := backoff.NewKeyedLimiter[string](1, 0)
	assert.False(t, k.Allow("x"), "a zero burst allows nothing")
	assert.ErrorIs(t, k.Wait(context.Background(), "x"), backoff.ErrExceedsBurst)
}

func TestKeyedLimiterWait(t *testing.T) {
	clk := newHandshakeClock()
	k := backoff.NewKeyedLimiter[string](10, 1, backoff.WithClock(clk))
	require.NoError(t, k.Wait(context.Background(), "a"))
	done := make(chan error, 1)
	go func() { done <- k.Wait(context.Background(), "a") }()
	require.Equal(t, 100*time.Millisecond, clk.nextArmed(t, nil))
	require.NoError(t, k.Wait(context.Background(), "b"), "b does not wait for a")
	clk.Step(100 * time.Millisecond)
	require.NoError(t, waitFor(t, "Wait to return", done))

	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { done <- k.Wait(ctx, "a") }()
	clk.nextArmed(t, nil)
	cancel(cause)
	err := waitFor(t, "Wait to return", done)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, cause)
	assert.False(t, clk.HasWaiters(), "no timer is left on the clock")
	// The token came back: the next reservation waits 100 ms, not 200.
	assert.Equal(t, 100*time.Millisecond, k.Reserve("a").Delay())

	dl := deadlineCtx{Context: context.Background(), deadline: clk.Now().Add(50 * time.Millisecond)}
	assert.ErrorIs(t, k.Wait(dl, "a"), backoff.ErrWaitExceedsDeadline)
}
