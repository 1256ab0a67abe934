package redis_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

func TestTokensSetLimitAndSetBurst(t *testing.T) {
	s := startServer(t)
	c := s.client()
	l := backoffredis.NewLimiter(c, "limits", 1, 5, generous) // one event per second
	ctx := context.Background()
	span := openSpan(t, c)

	tokens, err := l.Tokens(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5.0, tokens, "a key never used is a full bucket")
	for range 3 {
		require.True(t, l.Allow(ctx))
	}
	tokens, err = l.Tokens(ctx)
	require.NoError(t, err)
	// The bucket refills by one event per second of server time since the
	// first event.
	tokensWithin(t, tokens, 2, span)
	r, err := l.ReserveN(ctx, 4)
	require.NoError(t, err)
	require.True(t, r.OK())
	tokens, err = l.Tokens(ctx)
	require.NoError(t, err)
	tokensWithin(t, tokens, -2, span) // negative while the reservation waits
	r.Cancel()
	tokens, err = l.Tokens(ctx)
	require.NoError(t, err)
	tokensWithin(t, tokens, 2, span) // Cancel gave the four back

	// A larger burst keeps the bucket's debt of three events.
	l.SetBurst(10)
	assert.Equal(t, 10, l.Burst())
	tokens, err = l.Tokens(ctx)
	require.NoError(t, err)
	tokensWithin(t, tokens, 7, span)
	res, err := l.AllowN(ctx, 7)
	require.NoError(t, err)
	assert.True(t, res.Allowed, "the new burst admits what the old one could not")

	// An infinite rate admits everything; a rate that is not positive counts
	// as the slowest; a negative burst as 0, which admits nothing.
	l.SetLimit(math.Inf(1))
	assert.True(t, math.IsInf(l.Limit(), 1))
	res, err = l.AllowN(ctx, 10)
	require.NoError(t, err)
	assert.True(t, res.Allowed)
	l.SetLimit(-3)
	assert.Equal(t, 1e-6, l.Limit())
	l.SetLimit(math.NaN())
	assert.Equal(t, 1e-6, l.Limit())
	l.SetLimit(1)
	l.SetBurst(-1)
	assert.Equal(t, 0, l.Burst())
	res, err = l.AllowN(ctx, 1)
	require.NoError(t, err)
	assert.False(t, res.Allowed)
	assert.Equal(t, time.Duration(-1), res.RetryAfter)
	assert.ErrorIs(t, l.Wait(ctx), backoffredis.ErrExceedsBurst)
	assert.Zero(t, l.Stats().Fallback)
}

func TestKeyLimits(t *testing.T) {
	s := startServer(t)
	c := s.client()
	k := backoffredis.NewKeyedLimiter(c, "tenants", 1, 2, generous)
	ctx := context.Background()
	admitted := func(key string, tries int) int {
		n := 0
		for range tries {
			if k.Allow(ctx, key) {
				n++
			}
		}
		return n
	}

	k.SetKeyLimit("gold", 1, 6)
	k.SetKeyLimit("free", math.Inf(1), 0)
	span := openSpan(t, c)
	assert.Equal(t, 6, admitted("gold", 10))
	assert.Equal(t, 2, admitted("plain", 10))
	assert.Equal(t, 10, admitted("free", 10), "an infinite rate admits whatever the burst")
	tokens, err := k.Tokens(ctx, "gold")
	require.NoError(t, err)
	tokensWithin(t, tokens, 0, span)
	tokens, err = k.Tokens(ctx, "fresh")
	require.NoError(t, err)
	assert.Equal(t, 2.0, tokens)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, k.WaitN(short, "gold", 6), backoffredis.ErrWouldExceedDeadline, "gold's own burst admits 6, later")
	assert.ErrorIs(t, k.WaitN(short, "plain", 6), backoffredis.ErrExceedsBurst)

	// One script call over keys of different limits decides each by its own.
	k.SetKeyLimit("silver", 1, 3)
	rs, err := k.AllowBatch(ctx, []string{"silver", "other", "silver", "other", "silver", "other", "silver"})
	require.NoError(t, err)
	got := make([]bool, len(rs))
	for i, r := range rs {
		got[i] = r.Allowed
	}
	assert.Equal(t, []bool{true, true, true, true, true, false, false}, got)
	assert.Equal(t, 0, rs[4].Remaining)

	// Cleared, silver has the limiter's burst again; its bucket carries over.
	k.ClearKeyLimit("silver")
	k.ClearKeyLimit("never-set")
	assert.Equal(t, 0, admitted("silver", 5), "three events of debt exceed a burst of two")
	assert.Equal(t, 1.0, k.Limit())
	assert.Equal(t, 2, k.Burst())
}

// tokensWithin checks the tokens of a bucket at one event per second that
// held want at the first event of span: at least want, and at most want plus
// the server time since.
func tokensWithin(t *testing.T, tokens, want float64, span *serverSpan) {
	t.Helper()
	assert.GreaterOrEqual(t, tokens, want-1e-9)
	assert.LessOrEqual(t, tokens, want+span.elapsed().Seconds())
}
