package redis_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

// TestAdmitsWhatRedisRateAdmits drives our limiter and redis_rate's with the
// same random sequence of AllowN calls at (nearly) the same instants, on the
// same server: each step asks ours, then theirs, back to back. The two may
// only disagree on a call made within a millisecond of the instant at which
// the events become admissible, closer than the time between the two calls.
// After each step our key is set to redis_rate's state (its TAT, converted
// from float seconds to integer microseconds), so that a disagreement at one
// boundary does not carry over into the next steps.
func TestAdmitsWhatRedisRateAdmits(t *testing.T) {
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	const rate, burst = 50, 5 // an event per 20 ms
	ours := backoffredis.NewLimiter(c, "compat", rate, burst, generous)
	theirs := redis_rate.NewLimiter(c)
	limit := redis_rate.Limit{Rate: rate, Burst: burst, Period: time.Second}

	rnd := rand.New(rand.NewPCG(1, 2))
	agreed, near := 0, 0
	admitted := 0
	for step := range 300 {
		if rnd.IntN(3) == 0 {
			time.Sleep(time.Duration(rnd.IntN(30)) * time.Millisecond)
		}
		n := 1 + rnd.IntN(3)
		start := time.Now()
		a, err := ours.AllowN(ctx, n)
		require.NoError(t, err)
		b, err := theirs.AllowN(ctx, "compat", limit, n)
		require.NoError(t, err)
		// The two calls saw the same state, at instants at most gap apart.
		gap := time.Since(start) + time.Millisecond
		if a.Allowed {
			admitted++
		}
		syncState(t, c, ours.Key(), "rate:compat")
		if a.Allowed == (b.Allowed > 0) {
			agreed++
			if a.Allowed {
				// Remaining grows by one per interval passed between the calls.
				assert.InDelta(t, b.Remaining, a.Remaining, 1+float64(gap)/float64(time.Second/rate), "step %d", step)
			} else {
				// RetryAfter-ResetAfter is (n-burst) intervals whatever the
				// instant: it must be the same for both.
				assert.InDelta(t, float64(b.RetryAfter-b.ResetAfter), float64(a.RetryAfter-a.ResetAfter), float64(50*time.Microsecond), "step %d n=%d ours %+v theirs %+v", step, n, a, b)
				assert.InDelta(t, float64(b.RetryAfter), float64(a.RetryAfter), float64(gap), "step %d", step)
			}
			continue
		}
		// A disagreement is only acceptable at a boundary.
		near++
		if a.Allowed {
			assert.LessOrEqual(t, b.RetryAfter, gap, "step %d: we admitted, redis_rate refused", step)
		} else {
			assert.LessOrEqual(t, a.RetryAfter, gap, "step %d: we refused, redis_rate admitted", step)
		}
	}
	t.Logf("300 steps: %d agreed, %d at a boundary; %d admitted", agreed, near, admitted)
	assert.LessOrEqual(t, near, 15)
	assert.Greater(t, admitted, 30)
	assert.Less(t, admitted, 270)
}

// syncState copies redis_rate's key (a float of seconds since 2017) to ours
// (integer microseconds since 2017), with its expiry.
func syncState(t *testing.T, c *goredis.Client, ours, theirs string) {
	t.Helper()
	ctx := context.Background()
	v, err := c.Get(ctx, theirs).Result()
	if err == goredis.Nil {
		require.NoError(t, c.Del(ctx, ours).Err())
		return
	}
	require.NoError(t, err)
	f, err := strconv.ParseFloat(v, 64)
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, ours, strconv.FormatInt(int64(math.Ceil(f*1e6)), 10), time.Second).Err())
}
