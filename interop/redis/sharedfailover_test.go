package redis_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
	backoffredis "github.com/retrykit/backoff/interop/redis"
)

// replicaRun is a scenario of replicas, each with its own HTTP transport
// (its own connections, as separate processes have) and, when shared, its
// own Redis client and SharedRate, each sending perReplica GETs one after
// another to api.
type replicaRun struct {
	pacing               pacing
	replicas, perReplica int
	api                  *quotaAPI
	// For pacedShared: the Redis client of replica i (closed when the
	// replica ends), the quota's name, and the options of replica i.
	client func(i int) goredis.UniversalClient
	name   string
	opts   func(i int) []backoffredis.Option
	// live, if set, holds the SharedRates of the replicas still sending.
	live *liveReplicas
}

// liveReplicas are the SharedRates of the replicas that have not finished
// sending: a replica leaves the set before it closes its SharedRate.
type liveReplicas struct {
	mu    sync.Mutex
	rates map[int]*backoffredis.SharedRate
}

func (l *liveReplicas) add(i int, sr *backoffredis.SharedRate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rates == nil {
		l.rates = make(map[int]*backoffredis.SharedRate)
	}
	l.rates[i] = sr
}

func (l *liveReplicas) remove(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.rates, i)
}

// each calls f for every live replica, which cannot leave meanwhile.
func (l *liveReplicas) each(f func(i int, sr *backoffredis.SharedRate)) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, sr := range l.rates {
		f(i, sr)
	}
	return len(l.rates)
}

// run sends the requests, each bounded by ctx, and returns what it
// measured. A request that fails (ctx ended: the run hung) fails the test
// and ends its replica.
func (r replicaRun) run(ctx context.Context, t *testing.T) quotaRun {
	var wg sync.WaitGroup
	var roundTrips atomic.Uint64
	start := time.Now()
	for i := range r.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var opts []backoff.Option
			switch r.pacing {
			case pacedAlone:
				opts = append(opts, backoff.WithPacer(backoff.NewAdaptiveRate()))
			case pacedShared:
				rc := r.client(i)
				defer rc.Close()
				var ropts []backoffredis.Option
				if r.opts != nil {
					ropts = r.opts(i)
				}
				sr := backoffredis.NewSharedRate(rc, r.name, ropts...)
				if r.live != nil {
					r.live.add(i, sr)
				}
				defer func() {
					if r.live != nil {
						r.live.remove(i)
					}
					st := sr.Stats()
					roundTrips.Add(st.Shared + st.Errors)
					sr.Close()
				}()
				opts = append(opts, backoff.WithPacer(sr.Pacer()))
			}
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			client := &http.Client{Transport: httpretry.NewTransport(base, replicaSchedule, opts...)}
			for range r.perReplica {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.api.URL, nil)
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("replica %d (%v): %v", i, r.pacing, err)
					return
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	run := quotaRun{pacing: r.pacing, elapsed: time.Since(start)}
	run.minimum = time.Duration((float64(r.replicas*r.perReplica) - r.api.burst) / r.api.rate * float64(time.Second))
	run.served, run.throttled = r.api.counts()
	run.roundTrips = float64(roundTrips.Load()) / float64(r.replicas) / run.elapsed.Seconds()
	return run
}

// start runs r on a goroutine of its own: the channel yields what it
// measured.
func (r replicaRun) start(ctx context.Context, t *testing.T) <-chan quotaRun {
	done := make(chan quotaRun, 1)
	go func() { done <- r.run(ctx, t) }()
	return done
}

// awaitRun returns what the run measured, or fails the test if it has not
// ended by the deadline: a hung run fails rather than stalls the suite.
func awaitRun(t *testing.T, done <-chan quotaRun, deadline time.Time) quotaRun {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case r := <-done:
		return r
	case <-timer.C:
		t.Fatalf("the run did not end by its deadline")
		return quotaRun{}
	}
}

// TestSharedRateRedisKilled: 50 replicas share a quota of 100 requests/s
// through one redis-server, which is killed (SIGKILL) 5 s into the run and
// restarted on the same port, empty, 4 s later. Meanwhile 50 replicas with
// an AdaptiveRate each (what a SharedRate falls back to) run against a second
// such API. The shared run must end, throttled no more than the local one,
// each replica must have logged each outage once (the kill, and any round
// trip that a loaded machine made outlast its timeout), and 2 s after the
// restart every live replica must share again, counting all of them, in a
// record that Redis has again.
func TestSharedRateRedisKilled(t *testing.T) {
	t.Parallel()
	const (
		replicas, perReplica, rate = 50, 30, 100
		killAt                     = 5 * time.Second
		downFor                    = 4 * time.Second
		sharingWithin              = 2 * time.Second
		bound                      = 90 * time.Second // the whole run, hung or not
		name                       = "killed"
	)
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	deadline := time.Now().Add(bound + 10*time.Second)

	logs := make([]*logBuffer, replicas)
	for i := range logs {
		logs[i] = &logBuffer{}
	}
	live := &liveReplicas{}
	shared := replicaRun{
		pacing: pacedShared, replicas: replicas, perReplica: perReplica, api: newQuotaAPI(t, rate, rate),
		client: func(int) goredis.UniversalClient { return goredis.NewClient(srv.options()) },
		name:   name,
		opts: func(i int) []backoffredis.Option {
			// A round trip under the race detector, with 100 replicas on
			// the machine, can take longer than the default 50 ms: only
			// the kill may count as an outage here.
			return []backoffredis.Option{backoffredis.WithLogger(logs[i].logger()), backoffredis.WithTimeout(500 * time.Millisecond)}
		},
		live: live,
	}
	alone := replicaRun{pacing: pacedAlone, replicas: replicas, perReplica: perReplica, api: newQuotaAPI(t, rate, rate)}
	start := time.Now()
	sharedDone, aloneDone := shared.start(ctx, t), alone.start(ctx, t)

	// The outage: the run must still be going when it is over and checked.
	at := func(d time.Duration) {
		timer := time.NewTimer(time.Until(start.Add(d)))
		defer timer.Stop()
		select {
		case <-timer.C:
		case r := <-sharedDone:
			t.Fatalf("the shared run ended after %v, before the outage was over: make it longer", r.elapsed)
		}
	}
	at(killAt)
	srv.kill()
	at(killAt + downFor)
	srv.start()
	restarted := time.Since(start)
	at(restarted + sharingWithin)

	n := live.each(func(i int, sr *backoffredis.SharedRate) {
		st := sr.Stats()
		assert.True(t, st.Available, "replica %d shares again %v after the restart: %+v", i, sharingWithin, st)
		assert.GreaterOrEqual(t, st.Outages, uint64(1), "replica %d saw the outage", i)
	})
	// Replicas() is the count of leases at the replica's last round trip:
	// those that finished since are still in it, so it is at least the
	// replicas live now.
	live.each(func(i int, sr *backoffredis.SharedRate) {
		assert.GreaterOrEqual(t, sr.Replicas(), n, "replica %d counts all the live replicas", i)
	})
	admin := srv.client()
	exists, err := admin.Exists(context.Background(), backoffredis.DefaultPrefix+"rate:{"+name+"}").Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, exists, "the record is in Redis again")
	t.Logf("killed at %v, restarted at %v (%v after the kill); %v later, %d replicas live", killAt, restarted, restarted-killAt, sharingWithin, n)
	assert.Positive(t, n, "replicas were live when sharing again was checked")

	sr, ar := awaitRun(t, sharedDone, deadline), awaitRun(t, aloneDone, deadline)
	t.Log(ar)
	t.Log(sr)
	assert.LessOrEqual(t, sr.throttled, ar.throttled, "no more 429s than an AdaptiveRate per replica")
	logged := 0
	for i, l := range logs {
		// Each outage is logged once when it begins and once when it ends,
		// not once per decision made without Redis. The kill is one outage;
		// on a loaded machine a round trip after the restart can also
		// outlast its 500 ms timeout, which is another, logged as such.
		down, up := l.count("unavailable"), l.count("available again")
		logged += down
		assert.Contains(t, []int{up, up + 1}, down, "replica %d logged each outage once, and each return", i)
	}
	t.Logf("%d replicas logged the outage", logged)
	assert.Positive(t, logged, "the outage was logged")
}
