package backoff

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDurationFromTokensAtAZeroLimit: a zero limit never earns, so every
// amount of tokens, also none or a negative one (a reservation's tokens
// counted back), is the largest duration, as x/time/rate's
// durationFromTokens has it.
func TestDurationFromTokensAtAZeroLimit(t *testing.T) {
	for _, tokens := range []float64{-1, 0, 1} {
		assert.Equal(t, maxDuration, durationFromTokens(0, tokens), "tokens %v", tokens)
	}
}

// TestBucketGiveBackAtAZeroLimit: cancelling the latest reservation taken at
// a zero limit moves the latest time-to-act to the far future, by
// x/time/rate's rule (the reservation before it would be "never").
func TestBucketGiveBackAtAZeroLimit(t *testing.T) {
	const limit, burst = 0.0, 2
	s := bucketState{tokens: burst}
	var lastEvent time.Duration
	r := reserveForTest(t, &s, 0, 1, limit, burst, &lastEvent)
	s.giveBack(&r, 0, limit, burst, &lastEvent)
	assert.Equal(t, maxDuration, lastEvent)
	assert.InDelta(t, 2.0, s.tokensAt(0, limit, burst), 1e-9, "the token is back")
}

// TestDurationFromTokensAtTwoToThe63: tokens whose time is exactly 2^63 ns,
// which float64(maxDuration) rounds to, saturate at the largest duration
// instead of converting out of range (to the smallest duration on amd64).
func TestDurationFromTokensAtTwoToThe63(t *testing.T) {
	tokens := math.Ldexp(1, 63) / float64(time.Second) // at a limit of 1 per second
	assert.Equal(t, math.Ldexp(1, 63), tokens*float64(time.Second), "the product is exactly 2^63")
	assert.Equal(t, maxDuration, durationFromTokens(1, tokens))
}
