package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reserveForTest takes n tokens from s at now, as Limiter.ReserveN does, and
// returns the reservation, moving *lastEvent to its time-to-act.
func reserveForTest(t *testing.T, s *bucketState, now time.Duration, n int, limit float64, burst int, lastEvent *time.Duration) Reservation {
	t.Helper()
	wait, ok := s.take(now, n, limit, burst, maxDuration)
	require.True(t, ok)
	r := Reservation{ok: true, tokens: n, limit: limit, timeToAct: addInstant(now, wait)}
	*lastEvent = r.timeToAct
	return r
}

// TestBucketGiveBackAtItsTimeToAct: a reservation cancelled at exactly its
// time-to-act still gives its token back (x/time/rate returns nothing only
// when the time-to-act is before the cancel).
func TestBucketGiveBackAtItsTimeToAct(t *testing.T) {
	const limit, burst = 2.0, 1 // a token every 500 ms
	s := bucketState{tokens: burst}
	var lastEvent time.Duration
	reserveForTest(t, &s, 0, 1, limit, burst, &lastEvent) // the burst: at once
	r := reserveForTest(t, &s, 0, 1, limit, burst, &lastEvent)
	require.Equal(t, 500*time.Millisecond, r.timeToAct)

	s.giveBack(&r, 500*time.Millisecond, limit, burst, &lastEvent)
	assert.InDelta(t, 1.0, s.tokensAt(500*time.Millisecond, limit, burst), 1e-9,
		"the token earned by 500 ms, plus the one given back, capped at the burst")
}

// TestBucketGiveBackMovesLastEventBack: cancelling the latest reservation
// moves the latest time-to-act back to the reservation before it, also when
// that one's time is exactly the cancel's instant.
func TestBucketGiveBackMovesLastEventBack(t *testing.T) {
	const limit, burst = 2.0, 1
	s := bucketState{tokens: burst}
	var lastEvent time.Duration
	reserveForTest(t, &s, 0, 1, limit, burst, &lastEvent) // time-to-act 0
	r := reserveForTest(t, &s, 0, 1, limit, burst, &lastEvent)
	require.Equal(t, 500*time.Millisecond, lastEvent)

	s.giveBack(&r, 0, limit, burst, &lastEvent)
	assert.Equal(t, time.Duration(0), lastEvent, "back to the first reservation's time-to-act, which is now")
	assert.InDelta(t, 0.0, s.tokensAt(0, limit, burst), 1e-9, "the burst's token is still taken")
}
