package redis_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

// TestFourClientsShareOneLimit runs 4 processes' worth of clients (separate
// go-redis clients, so separate connection pools) against one limit of 100/s,
// burst 10, for 10 s of real time, all hungry: each asks again as soon as the
// limiter says a token is free. Every admission is also counted on the
// server (INCR), and the elapsed time is read from the server's clock.
func TestFourClientsShareOneLimit(t *testing.T) {
	const (
		clients = 4
		rate    = 100
		burst   = 10
		run     = 10 * time.Second
	)
	s := startServer(t)
	admin := s.client()
	ctx := context.Background()

	start := serverTime(t, admin)
	var wg sync.WaitGroup
	local := make([]int, clients)
	for i := range clients {
		c := s.client()
		l := backoffredis.NewLimiter(c, "shared", rate, burst,
			backoffredis.WithTimeout(time.Second)) // this test is about sharing, not faults: a slow first dial under -race must not fall back
		wg.Add(1)
		go func() {
			defer wg.Done()
			for end := time.Now().Add(run); time.Now().Before(end); {
				r, err := l.AllowN(ctx, 1)
				if err != nil || !r.Shared {
					t.Errorf("client %d: %+v %v", i, r, err)
					return
				}
				if !r.Allowed {
					time.Sleep(r.RetryAfter)
					continue
				}
				local[i]++
				if err := c.Incr(ctx, "admitted").Err(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := serverTime(t, admin).Sub(start)

	admitted, err := admin.Get(ctx, "admitted").Int()
	require.NoError(t, err)
	sum := 0
	for _, n := range local {
		sum += n
		assert.Positive(t, n, "every client got a share")
	}
	assert.Equal(t, sum, admitted)
	bound := burst + rate*elapsed.Seconds()
	t.Logf("admitted %d in %v (server clock): bound %.1f, %.1f%% of it; per client %v", admitted, elapsed, bound, 100*float64(admitted)/bound, local)
	assert.LessOrEqual(t, float64(admitted), bound)
	assert.GreaterOrEqual(t, float64(admitted), 0.95*bound)
}
