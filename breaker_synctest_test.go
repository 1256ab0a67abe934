//go:build go1.25

package backoff_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

// TestSynctestBreaker runs a breaker on the real clock in a synctest
// bubble: callers that Retry through an open breaker all wait until its
// probe time, and the probes close it.
func TestSynctestBreaker(t *testing.T) {
	bubble(t, func(t *testing.T) {
		start := time.Now()
		b := backoff.NewBreaker(backoff.WithBreakerProbes(2),
			backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: time.Second, Factor: 2}))
		for range 5 {
			p, err := b.Allow()
			require.NoError(t, err)
			p.Done(context.Background(), errors.New("connection refused"))
		}
		require.Equal(t, backoff.BreakerOpen, b.State())
		time.Sleep(250 * time.Millisecond) // virtual: the open time runs on

		var mu sync.Mutex
		var calledAt []time.Duration
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := backoff.Retry(context.Background(), backoff.Schedule{Duration: 10 * time.Millisecond, Steps: 10},
					func(context.Context) error {
						mu.Lock()
						defer mu.Unlock()
						calledAt = append(calledAt, time.Since(start))
						return nil
					}, backoff.WithPacer(b))
				assert.NoError(t, err)
			}()
		}
		wg.Wait()
		// Each caller called fn once. Two are the probes at 1s; the others
		// find the breaker closed by then, or, refused while the probes
		// were out, retry 10 ms later and find it closed.
		require.Len(t, calledAt, 4)
		atOpen := 0
		for _, at := range calledAt {
			assert.Contains(t, []time.Duration{time.Second, time.Second + 10*time.Millisecond}, at, "no call while the breaker was open")
			if at == time.Second {
				atOpen++
			}
		}
		assert.GreaterOrEqual(t, atOpen, 2, "the probes")
		assert.Equal(t, backoff.BreakerClosed, b.State())
	})
}
