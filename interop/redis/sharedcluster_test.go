package redis_test

import (
	"context"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

// TestSharedRateOnCluster: 20 replicas, each with its own Cluster client,
// share a quota of 40 requests/s (a bucket of 40) through a Redis Cluster of
// three masters, for about 10 s, while 20 replicas with exponential backoff
// alone run against a second such API. The record must live on the master
// of its slot only, and the cuts must have reached every replica: the
// shared run is throttled a tenth as often as backoff alone, at most (under
// -race, where cuts travel slower, 30%: see fewerBound).
func TestSharedRateOnCluster(t *testing.T) {
	t.Parallel()
	const (
		replicas, perReplica, rate = 20, 22, 40
		bound                      = 60 * time.Second
		name                       = "cluster"
	)
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	deadline := time.Now().Add(bound + 10*time.Second)

	shared := replicaRun{
		pacing: pacedShared, replicas: replicas, perReplica: perReplica, api: newQuotaAPI(t, rate, rate),
		client: func(int) goredis.UniversalClient { return goredis.NewClusterClient(c.options()) },
		name:   name,
		opts: func(int) []backoffredis.Option {
			// No outage here: a slow round trip under the race detector
			// must not count as one.
			return []backoffredis.Option{backoffredis.WithLogger(nil), generous}
		},
	}
	alone := replicaRun{pacing: pacedByBackoff, replicas: replicas, perReplica: perReplica, api: newQuotaAPI(t, rate, rate)}
	sharedDone, aloneDone := shared.start(ctx, t), alone.start(ctx, t)
	sr, br := awaitRun(t, sharedDone, deadline), awaitRun(t, aloneDone, deadline)
	t.Log(br)
	t.Log(sr)
	assert.LessOrEqual(t, float64(sr.throttled), max(0.1, 2*(1-fewerBound()))*float64(br.throttled), "at most a tenth of the 429s of exponential backoff alone (under -race, see fewerBound)")

	// The record outlives the replicas' leases by ten of them: it is
	// still there. SCAN answers on every master, whatever slots it serves.
	key := backoffredis.DefaultPrefix + "rate:{" + name + "}"
	owner := c.masterOf("{" + name + "}")
	var holders []string
	for _, m := range c.masters() {
		mc := goredis.NewClient(&goredis.Options{Addr: m.addr()})
		var keys []string
		it := mc.Scan(context.Background(), 0, key, 100).Iterator()
		for it.Next(context.Background()) {
			keys = append(keys, it.Val())
		}
		mc.Close()
		require.NoError(t, it.Err())
		if slices.Contains(keys, key) {
			holders = append(holders, m.addr())
		}
	}
	t.Logf("%s is on %v; the master of {%s} is %s", key, holders, name, owner.addr())
	assert.Equal(t, []string{owner.addr()}, holders, "the record is on the master of its slot only")
	// The quota was met: the estimate was cut at least once.
	gen, err := c.client().HGet(context.Background(), key, "gen").Int()
	require.NoError(t, err)
	t.Logf("cut generation %d", gen)
	assert.GreaterOrEqual(t, gen, 2, "the estimate was cut")
}
