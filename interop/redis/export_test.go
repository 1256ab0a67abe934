package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// OnQueued makes k call f each time a decision joins the queue behind a
// round trip in flight, so that a test knows when its callers are queued.
// Set it before the calls it observes.
func OnQueued(k *KeyedLimiter, f func()) { k.l.co.onQueued = f }

// NewSharedRateStopped is NewSharedRate without its goroutine: the test
// makes the round trips with SyncForTest and CutForTest.
func NewSharedRateStopped(client goredis.UniversalClient, name string, opts ...Option) *SharedRate {
	return newSharedRate(client, name, false, opts)
}

// SyncForTest makes a sync round trip now.
func (s *SharedRate) SyncForTest() { s.roundTrip(context.Background(), "sync") }

// CutForTest makes the round trip of a cut this replica has asked for.
func (s *SharedRate) CutForTest() { s.roundTrip(context.Background(), "cut") }

// CutAskedForTest reports whether a throttling answer asked for a cut.
func (s *SharedRate) CutAskedForTest() bool {
	select {
	case <-s.cutAsked:
		return true
	default:
		return false
	}
}

// RecordKey returns the key of the SharedRate's record.
func (s *SharedRate) RecordKey() string { return s.key }

// SetDemandForTest makes the replica report demand d (math.Inf(1): more
// than it is given) at its next round trips, as if its requests did.
func (s *SharedRate) SetDemandForTest(d float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.demandForTest = d
}
