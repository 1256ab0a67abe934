package backoff_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// TestRetryAcceptsJitterUpToMaxRetryJitter: MaxRetryJitter itself is a
// Jitter Retry accepts; only a larger one panics.
func TestRetryAcceptsJitterUpToMaxRetryJitter(t *testing.T) {
	fc := testingclock.NewFakeClock(epoch)
	s := backoff.Schedule{Duration: 1, Jitter: backoff.MaxRetryJitter, Steps: 1}
	require.NotPanics(t, func() {
		assert.NoError(t, backoff.Retry(context.Background(), s,
			func(context.Context) error { return nil }, backoff.WithClock(fc)))
	})
	s.Jitter = backoff.MaxRetryJitter + 1e-9
	assert.Panics(t, func() {
		_ = backoff.Retry(context.Background(), s, func(context.Context) error { return nil }, backoff.WithClock(fc))
	})
}
