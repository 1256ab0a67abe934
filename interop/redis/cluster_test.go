package redis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

// TestCluster checks every operation of the package through a Cluster
// client, on one cluster that the subtests share (starting one takes
// seconds); each subtest uses limiters of its own names.
func TestCluster(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()

	t.Run("LimiterKeyLivesOnItsSlotsMaster", func(t *testing.T) {
		l := backoffredis.NewLimiter(c.client(), "cl-limiter", 0.01, 3, generous) // one event per 100 s
		for i := range 3 {
			assert.True(t, l.Allow(ctx), "event %d of the burst", i)
		}
		r, err := l.AllowN(ctx, 1)
		require.NoError(t, err)
		assert.False(t, r.Allowed)
		assert.True(t, r.Shared)
		inRange(t, r.RetryAfter, 90*time.Second, 100*time.Second)
		// The key is on the master of its slot, read there directly.
		exists, err := c.masterOf(l.Key()).client().Exists(ctx, l.Key()).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), exists)
		tokens, err := l.Tokens(ctx)
		require.NoError(t, err)
		assert.Less(t, tokens, 0.5)
	})

	t.Run("ReserveCancelWaitAndTokens", func(t *testing.T) {
		// Delays on the server's clock, bounded by its TIME; Wait's timer
		// on a fake clock (ahead of the real one, so that go-redis sees no
		// deadline near).
		clk := armedClock{clocktesting.NewFakeClock(time.Now().Add(time.Hour)), make(chan time.Duration, 1)}
		l := backoffredis.NewKeyedLimiter(c.client(), "cl-reserve", 1, 1, generous, backoffredis.WithSpreadKeys(), backoffredis.WithClock(clk)) // one event per second
		span := openSpan(t, c.masterOf(l.Key("k")).client())
		require.True(t, l.Allow(ctx, "k"))
		r, err := l.ReserveN(ctx, "k", 1)
		require.NoError(t, err)
		require.True(t, r.OK())
		within(t, r.Delay(), time.Second-span.elapsed(), time.Second)
		r.Cancel()
		tokens, err := l.Tokens(ctx, "k")
		require.NoError(t, err)
		tokensWithin(t, tokens, 0, span) // the first event is still spent; the cancelled one is given back
		done := make(chan error, 1)
		go func() { done <- l.Wait(ctx, "k") }()
		d := <-clk.armed
		within(t, d, time.Second-span.elapsed(), time.Second)
		clk.Step(d)
		require.NoError(t, <-done)
	})

	t.Run("KeyedLimiterKeysShareOneSlotByDefault", func(t *testing.T) {
		l := backoffredis.NewKeyedLimiter(c.client(), "cl-tagged", 0.01, 2, generous)
		keys := manyKeys(30)
		m := c.masterOf(l.Key(keys[0]))
		for _, k := range keys {
			assert.Same(t, m, c.masterOf(l.Key(k)), "%s shares the tag {cl-tagged}", l.Key(k))
		}
		checkBatchDecisions(t, l, keys)
	})

	t.Run("SpreadKeysLiveOnEveryMaster", func(t *testing.T) {
		l := backoffredis.NewKeyedLimiter(c.client(), "cl-spread", 0.01, 2, generous, backoffredis.WithSpreadKeys())
		keys := manyKeys(30)
		masters := map[*server]int{}
		for _, k := range keys {
			assert.True(t, strings.HasPrefix(l.Key(k), "backoff:{cl-spread:"), l.Key(k))
			masters[c.masterOf(l.Key(k))]++
		}
		assert.Len(t, masters, 3, "30 keys spread over the 3 masters")
		checkBatchDecisions(t, l, keys)
	})

	t.Run("SpreadBatchIsOneRoundTripPerMaster", func(t *testing.T) {
		cl, trips := countingClient(c)
		l := backoffredis.NewKeyedLimiter(cl, "cl-trips", 1000, 1000, generous, backoffredis.WithSpreadKeys())
		keys := manyKeys(100)
		_, err := l.AllowBatch(ctx, keys) // loads the script where a master lacks it
		require.NoError(t, err)
		trips.reset()
		rs, err := l.AllowBatch(ctx, keys)
		require.NoError(t, err)
		for i, r := range rs {
			assert.True(t, r.Allowed && r.Shared, "key %d: %+v", i, r)
		}
		got := trips.get()
		assert.Len(t, got, 3, "one pipeline to each master: %v", got)
		for addr, n := range got {
			assert.Equal(t, 1, n, "round trips to %s", addr)
		}
	})

	t.Run("ScriptsFlushedFromEveryNode", func(t *testing.T) {
		spread := backoffredis.NewKeyedLimiter(c.client(), "cl-flush", 0.01, 1, generous, backoffredis.WithSpreadKeys())
		one := backoffredis.NewLimiter(c.client(), "cl-flush-one", 0.01, 1, generous)
		requeue := backoffredis.NewItemExponentialFailureRateLimiter[string](c.client(), "cl-flush-q", time.Millisecond, time.Second, generous, backoffredis.WithSpreadKeys())
		require.True(t, one.Allow(ctx))
		require.Equal(t, time.Millisecond, requeue.When("a"))
		for _, s := range c.nodes {
			require.NoError(t, s.client().ScriptFlush(ctx).Err())
		}
		keys := manyKeys(20)
		rs, err := spread.AllowBatch(ctx, keys)
		require.NoError(t, err)
		for i, r := range rs {
			assert.True(t, r.Allowed && r.Shared, "key %d: %+v", i, r)
		}
		r, err := one.AllowN(ctx, 1)
		require.NoError(t, err)
		assert.True(t, r.Shared)
		assert.False(t, r.Allowed, "the bucket survived the flush; only the script was gone")
		assert.Equal(t, 2*time.Millisecond, requeue.When("a"))
		assert.Zero(t, spread.Stats().Fallback+one.Stats().Fallback+requeue.Stats().Fallback)
	})

	t.Run("ConcurrentSpreadDecisionsTravelTogether", func(t *testing.T) {
		l := backoffredis.NewKeyedLimiter(c.client(), "cl-concurrent", 0.01, 3, generous, backoffredis.WithSpreadKeys())
		keys := manyKeys(8)
		var wg sync.WaitGroup
		var mu sync.Mutex
		admitted := map[string]int{}
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					k := keys[(g+i)%len(keys)]
					r, err := l.AllowN(ctx, k, 1)
					if err != nil || !r.Shared {
						t.Errorf("%s: %+v %v", k, r, err)
						return
					}
					if r.Allowed {
						mu.Lock()
						admitted[k]++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		for _, k := range keys {
			assert.Equal(t, 3, admitted[k], "40 asks for %s admit its burst, and no refill in 100 s", k)
		}
	})

	t.Run("RequeueCountsSurviveALeaderChange", func(t *testing.T) {
		for _, opts := range [][]backoffredis.Option{{generous}, {generous, backoffredis.WithSpreadKeys()}} {
			name := fmt.Sprintf("cl-requeue-%d", len(opts))
			a := backoffredis.NewItemExponentialFailureRateLimiter[string](c.client(), name, 5*time.Millisecond, time.Hour, opts...)
			for i, ms := range []time.Duration{5, 10, 20, 40} {
				assert.Equal(t, ms*time.Millisecond, a.When("ns/pod"), "failure %d", i+1)
			}
			b := backoffredis.NewItemExponentialFailureRateLimiter[string](c.client(), name, 5*time.Millisecond, time.Hour, opts...)
			assert.Equal(t, 4, b.NumRequeues("ns/pod"))
			assert.Equal(t, 80*time.Millisecond, b.When("ns/pod"))
			b.Forget("ns/pod")
			assert.Equal(t, 0, a.NumRequeues("ns/pod"))
			assert.Zero(t, a.Stats().Fallback+b.Stats().Fallback)
		}
	})

	t.Run("ReshardingUnderLoad", func(t *testing.T) {
		testResharding(t, c)
	})

	t.Run("HundredReplicasShareOneQuota", func(t *testing.T) {
		testHundredReplicas(t, c)
	})
}

// manyKeys returns n distinct key names.
func manyKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i)
	}
	return keys
}

// checkBatchDecisions asks, in one AllowBatch, three events of each key of
// a limiter of burst 2 and a rate too slow to refill during the test: the
// first two of each key are admitted, the third refused, in order.
func checkBatchDecisions(t *testing.T, l *backoffredis.KeyedLimiter, keys []string) {
	t.Helper()
	var ask []string
	for range 3 {
		ask = append(ask, keys...)
	}
	rs, err := l.AllowBatch(context.Background(), ask)
	require.NoError(t, err)
	require.Len(t, rs, len(ask))
	for i, r := range rs {
		assert.True(t, r.Shared, "%d: %+v", i, r)
		assert.Equal(t, i < 2*len(keys), r.Allowed, "%d (%s): %+v", i, ask[i], r)
	}
}

// tripCounter counts the round trips of a Cluster client to each node.
type tripCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (tc *tripCounter) reset() { tc.mu.Lock(); tc.n = map[string]int{}; tc.mu.Unlock() }

func (tc *tripCounter) get() map[string]int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	out := map[string]int{}
	for k, v := range tc.n {
		out[k] = v
	}
	return out
}

func (tc *tripCounter) add(addr string) { tc.mu.Lock(); tc.n[addr]++; tc.mu.Unlock() }

type tripHook struct {
	tc   *tripCounter
	addr string
}

func (h tripHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h tripHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.tc.add(h.addr)
		return next(ctx, cmd)
	}
}

func (h tripHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.tc.add(h.addr)
		return next(ctx, cmds)
	}
}

// countingClient returns a Cluster client whose round trips to each node
// (a command, or a pipeline of commands) are counted.
func countingClient(c *cluster) (*goredis.ClusterClient, *tripCounter) {
	tc := &tripCounter{n: map[string]int{}}
	cl := goredis.NewClusterClient(c.options())
	cl.OnNewNode(func(n *goredis.Client) { n.AddHook(tripHook{tc: tc, addr: n.Options().Addr}) })
	c.tb.Cleanup(func() { cl.Close() })
	return cl, tc
}

// testResharding moves slots to other masters, key by key, while four
// goroutines decide, one key at a time and in batches, for the keys of two
// KeyedLimiters: one whose keys share a slot (the default layout), whose
// slot moves, and one whose keys are spread, one of whose keys' slot moves.
// Between the states, the source master answers ASK for the keys already
// moved and TRYAGAIN for a call whose keys are on both masters; after the
// move, a master refuses a batch that the client's stale map of the slots
// sent it. Every decision must be shared, none may fail, and the events
// admitted for each key must stay within its bound.
func testResharding(t *testing.T, c *cluster) {
	const (
		rate  = 200
		burst = 20
	)
	ctx := context.Background()
	tagged := backoffredis.NewKeyedLimiter(c.client(), "cl-reshard", rate, burst, generous)
	spread := backoffredis.NewKeyedLimiter(c.client(), "cl-reshard-spread", rate, burst, generous, backoffredis.WithSpreadKeys())
	keys := manyKeys(5)

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted = map[string]int{}
		stop     = make(chan struct{})
	)
	count := func(k string, r backoffredis.Result) {
		if r.Allowed {
			mu.Lock()
			admitted[k]++
			mu.Unlock()
		}
	}
	start := time.Now()
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				for _, l := range []*backoffredis.KeyedLimiter{tagged, spread} {
					if g%2 == 0 {
						rs, err := l.AllowBatch(ctx, keys)
						if err != nil {
							t.Errorf("batch: %v", err)
							return
						}
						for j, r := range rs {
							if !r.Shared {
								t.Errorf("batch decided locally: %+v", r)
								return
							}
							count(l.Key(keys[j]), r)
						}
					} else {
						k := keys[i%len(keys)]
						r, err := l.AllowN(ctx, k, 1)
						if err != nil || !r.Shared {
							t.Errorf("%s: %+v %v", k, r, err)
							return
						}
						count(l.Key(k), r)
					}
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // decisions on the source masters
	moved := []string{tagged.Key(keys[0]), spread.Key(keys[0])}
	var from, to []*server
	for _, k := range moved {
		from = append(from, c.masterOf(k))
		to = append(to, c.migrateSlot(k))
	}
	time.Sleep(200 * time.Millisecond) // and on the new ones
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)

	for i, k := range moved {
		assert.NotSame(t, from[i], to[i])
		assert.Same(t, to[i], c.masterOf(k), "the slot of %s moved", k)
	}
	for _, l := range []*backoffredis.KeyedLimiter{tagged, spread} {
		st := l.Stats()
		assert.Zero(t, st.Fallback+st.Errors, "%+v", st)
	}
	bound := burst + rate*elapsed.Seconds()
	for k, n := range admitted {
		assert.LessOrEqual(t, float64(n), bound, k)
	}
	assert.Len(t, admitted, 2*len(keys), "every key admitted events")
	t.Logf("moved the slots of %v in a run of %v: admitted %v (bound %.0f each)", moved, elapsed, admitted, bound)
}

// migrateSlot moves the slot of key to another master as redis-cli
// --cluster reshard does (IMPORTING on the target, MIGRATING on the source,
// MIGRATE of the keys, then the slot given to the target everywhere), one key
// at a time with a pause between, so that the clients see the states
// between. It returns the new master.
func (c *cluster) migrateSlot(key string) *server {
	c.tb.Helper()
	ctx := context.Background()
	src := c.masterOf(key)
	var dst *server
	for _, m := range c.masters() {
		if m != src {
			dst = m
			break
		}
	}
	sc, dc := src.client(), dst.client()
	slot, err := sc.ClusterKeySlot(ctx, key).Result()
	require.NoError(c.tb, err)
	srcID, err := sc.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(c.tb, err)
	dstID, err := dc.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(c.tb, err)
	require.NoError(c.tb, dc.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	require.NoError(c.tb, sc.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	for {
		keys, err := sc.ClusterGetKeysInSlot(ctx, int(slot), 1).Result()
		require.NoError(c.tb, err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		require.NoError(c.tb, sc.Do(ctx, args...).Err())
		time.Sleep(20 * time.Millisecond)
	}
	for _, m := range append([]*server{dst, src}, c.masters()...) {
		require.NoError(c.tb, m.client().Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	}
	return dst
}

// TestSpreadKeysOnOneServer checks that WithSpreadKeys changes the key names
// and nothing else on a single server, where one script call decides for
// every key of a batch.
func TestSpreadKeysOnOneServer(t *testing.T) {
	s := startServer(t)
	l := backoffredis.NewKeyedLimiter(s.client(), "one", 0.01, 2, generous, backoffredis.WithSpreadKeys())
	q := backoffredis.NewItemExponentialFailureRateLimiter[string](s.client(), "q", time.Millisecond, time.Second, generous, backoffredis.WithSpreadKeys())
	assert.Equal(t, "backoff:{one:acme}", l.Key("acme"))
	assert.Equal(t, "backoff:{q:ns/pod}", q.Key("ns/pod"))
	checkBatchDecisions(t, l, manyKeys(10))
	assert.Equal(t, time.Millisecond, q.When("ns/pod"))
	n, err := s.client().Exists(context.Background(), l.Key("tenant-0"), q.Key("ns/pod")).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
}
