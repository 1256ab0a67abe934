package redis_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

// sharedPair returns n SharedRates of one quota on srv, with no goroutine
// of their own (the test makes their round trips), on one fake clock.
func sharedRates(t *testing.T, srv *server, clk *testingclock.FakeClock, name string, n int, opts ...backoffredis.Option) []*backoffredis.SharedRate {
	t.Helper()
	rates := make([]*backoffredis.SharedRate, n)
	for i := range rates {
		rates[i] = backoffredis.NewSharedRateStopped(srv.client(), name,
			append([]backoffredis.Option{backoffredis.WithClock(clk), backoffredis.WithLogger(nil)}, opts...)...)
		rates[i].SetDemandForTest(math.Inf(1))
		t.Cleanup(func() { rates[i].Close() })
	}
	return rates
}

// TestSharedRateCutsOnce: two replicas meet the quota at the same estimate;
// the record is cut once, and both adopt the cut.
func TestSharedRateCutsOnce(t *testing.T) {
	srv := startServer(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rates := sharedRates(t, srv, clk, "once", 2, backoffredis.WithInitialRate(100))
	a, b := rates[0], rates[1]
	a.SyncForTest()
	assert.Equal(t, 2, a.Replicas())
	assert.InDelta(t, 50, a.Pacer().Rate(), 1e-9, "two replicas that want more than they are given share the estimate equally")

	clk.Step(time.Second) // the slow start: 100 doubled four times
	a.SyncForTest()
	b.SyncForTest()
	require.InDelta(t, 1600, a.Estimate(), 1e-6)
	for _, r := range rates {
		require.True(t, r.Pacer().Allow())
		r.Pacer().Throttled(time.Second)
		assert.True(t, r.CutAskedForTest(), "a throttling answer at the current curve asks for a cut")
		r.Pacer().Throttled(time.Second)
		assert.False(t, r.CutAskedForTest(), "once per curve")
	}
	a.CutForTest()
	b.CutForTest()
	gen, err := srv.client().HGet(context.Background(), a.RecordKey(), "gen").Int()
	require.NoError(t, err)
	assert.Equal(t, 2, gen, "one cut, however many replicas met the quota")
	assert.InDelta(t, 0.8*1600/2, a.Estimate(), 1e-6, "leaving the slow start, the cut finds the quota at half the estimate")
	assert.InDelta(t, a.Estimate(), b.Estimate(), 1e-9)
	assert.InDelta(t, a.Estimate()/2, b.Pacer().Rate(), 1e-6)
	assert.True(t, b.Pacer().Stats().Steered)
}

// TestSharedRateDividesAmongLiveReplicas: a replica that joins is counted
// at its first round trip; one that closes gives up its lease at once; one
// that stops making round trips is dropped when its lease ends.
func TestSharedRateDividesAmongLiveReplicas(t *testing.T) {
	srv := startServer(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rates := sharedRates(t, srv, clk, "live", 3, backoffredis.WithInitialRate(90))
	a, b, c := rates[0], rates[1], rates[2]
	for _, r := range rates {
		r.SyncForTest()
		assert.Equal(t, 3, r.Replicas())
		assert.InDelta(t, 30, r.Pacer().Rate(), 1e-9)
	}
	require.NoError(t, c.Close())
	a.SyncForTest()
	assert.Equal(t, 2, a.Replicas(), "a closed replica leaves at once")
	assert.InDelta(t, 45, a.Pacer().Rate(), 1e-9)

	clk.Step(2 * time.Second)
	a.SyncForTest()
	assert.Equal(t, 2, a.Replicas(), "b's lease lasts three sync intervals")
	clk.Step(1500 * time.Millisecond)
	a.SyncForTest()
	assert.Equal(t, 1, a.Replicas(), "b made no round trip for longer than its lease")
	b.SyncForTest()
	assert.Equal(t, 2, b.Replicas())
}

// TestSharedRateWithoutRedis: while Redis is unavailable the AdaptiveRate
// runs at its own law, from its share, logged once; the first round trip
// that succeeds shares again, and recreates a record that Redis lost from
// the estimate the replica knew.
func TestSharedRateWithoutRedis(t *testing.T) {
	srv := startServer(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var logs logBuffer
	var states []bool
	r := backoffredis.NewSharedRateStopped(srv.client(), "outage", backoffredis.WithClock(clk),
		backoffredis.WithLogger(logs.logger()), backoffredis.WithInitialRate(20),
		backoffredis.WithOnStateChange(func(up bool, _ error) { states = append(states, up) }))
	t.Cleanup(func() { r.Close() })
	require.True(t, r.Pacer().Allow())
	r.Pacer().Throttled(0)
	require.True(t, r.CutAskedForTest())
	r.CutForTest()
	known := r.Estimate()
	require.InDelta(t, 8, known, 1e-9, "a cut in the slow start at 20: 20 / 2 · 0.8")

	srv.kill()
	r.SyncForTest()
	r.SyncForTest()
	assert.False(t, r.Pacer().Stats().Steered, "the AdaptiveRate runs at its own law")
	assert.False(t, r.Stats().Available)
	assert.Equal(t, 1, logs.count("unavailable"), "logged once")
	assert.Equal(t, uint64(1), r.Stats().Outages)

	srv.start() // an empty Redis: the record is gone
	r.SyncForTest()
	assert.True(t, r.Stats().Available)
	assert.True(t, r.Pacer().Stats().Steered)
	assert.Equal(t, 1, logs.count("available again"))
	assert.Equal(t, []bool{false, true}, states)
	slow, err := srv.client().HGet(context.Background(), r.RecordKey(), "slow").Int()
	require.NoError(t, err)
	assert.Equal(t, 0, slow, "recreated past a cut, not in a slow start")
	assert.InDelta(t, 0.95*known, r.Estimate(), 0.01, "at the plateau of the estimate the replica knew")
	assert.False(t, math.IsNaN(r.Pacer().Rate()))
}

// TestSharedRateCurveWaitsForDemand: while the replicas want less than the
// estimate, the curve does not grow unseen: when demand rises after a long
// quiet spell, the estimate starts from where demand held it, not from a
// slow start that ran on meanwhile.
func TestSharedRateCurveWaitsForDemand(t *testing.T) {
	srv := startServer(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := sharedRates(t, srv, clk, "quiet", 1, backoffredis.WithInitialRate(10))[0]
	r.SetDemandForTest(2)
	r.SyncForTest() // reports the demand
	for range 30 {
		clk.Step(time.Second)
		r.SyncForTest()
		assert.Equal(t, 10.0, r.Estimate(), "held at the slow start's base, twice the demand being less")
	}
	r.SetDemandForTest(math.Inf(1))
	r.SyncForTest()
	assert.InDelta(t, 10, r.Estimate(), 1, "demand rose: the slow start goes on from where it was held")
	clk.Step(500 * time.Millisecond)
	assert.InDelta(t, 40, r.Estimate(), 4, "and doubles every 250 ms from there")
}
