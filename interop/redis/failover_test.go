package redis_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

// failoverTimeout is the limiters' timeout in the failover test: twice the
// default, so that a loaded two-core machine under the race detector does
// not fall back before the kill; the caller's deadline for redis_rate is
// the same.
const failoverTimeout = 100 * time.Millisecond

// decisionLog is what one client saw: each decision's start (since the run
// began), how long it took, and its outcome.
type decisionLog struct {
	at, took       []time.Duration
	allowed, fresh []bool // fresh: shared (ours) or answered without error (redis_rate)
}

func (d *decisionLog) add(at, took time.Duration, allowed, fresh bool) {
	d.at = append(d.at, at)
	d.took = append(d.took, took)
	d.allowed = append(d.allowed, allowed)
	d.fresh = append(d.fresh, fresh)
}

// summary of the clients' logs around a kill at kill.
type failoverSummary struct {
	admitted, inWindow int
	slowest            time.Duration
	stale              int           // decisions not shared (ours) or failed (redis_rate)
	back               time.Duration // kill until every client's decisions are fresh again; -1 if one never is
}

func summarize(logs []*decisionLog, kill time.Duration) failoverSummary {
	var s failoverSummary
	for _, d := range logs {
		// The client is fresh again at the end of its first fresh decision
		// after its first stale one after the kill. (A loaded machine may
		// time out a call later too: that is an outage of its own.)
		firstStale, back := -1, time.Duration(-1)
		for i := range d.at {
			s.slowest = max(s.slowest, d.took[i])
			if d.allowed[i] {
				s.admitted++
			}
			if !d.fresh[i] {
				s.stale++
			}
			switch {
			case d.at[i] < kill:
			case firstStale < 0 && !d.fresh[i]:
				firstStale = i
			case firstStale >= 0 && d.fresh[i] && back < 0:
				back = d.at[i] + d.took[i] - kill
			}
		}
		switch {
		case s.back < 0:
		case firstStale < 0:
		case back < 0:
			s.back = -1
		default:
			s.back = max(s.back, back)
		}
	}
	// The window: from the kill until every client is fresh again, or
	// until the end of the run.
	end := time.Duration(math.MaxInt64)
	if s.back >= 0 {
		end = kill + s.back
	}
	{
		for _, d := range logs {
			for i := range d.at {
				if d.allowed[i] && d.at[i] >= kill && d.at[i] <= end {
					s.inWindow++
				}
			}
		}
	}
	return s
}

// TestClusterFailover kills (SIGKILL) the master that holds a shared limit
// of 100/s, burst 10, in the middle of a run of 4 clients (separate Cluster
// clients, hungry), and, in the same run and on a key of the same slot, of 4
// clients of redis_rate with the same limit. The cluster promotes the
// master's replica after cluster-node-timeout and an election.
//
// Ours: no call may block past its deadline (the limiter's timeout, plus
// scheduling slack); every decision is made, locally while the slot has no
// master, each client with its share (25/s, burst 2); after the promotion,
// every client's decisions are shared again; and the events admitted over
// the whole run stay within the shared bound, burst + rate × elapsed, plus
// what one failover may add: the shared bucket refills while nobody takes
// from it (burst), and the fallback buckets start full (4 × 2).
//
// redis_rate has no fallback: its caller gets an error, which it must turn
// into a refusal (counted here) or an admission; the test reports what it
// saw and asserts nothing about it.
func TestClusterFailover(t *testing.T) {
	const (
		clients  = 4
		rate     = 100
		burst    = 10
		healthy  = time.Second // before the kill, and after every client is shared again
		giveUp   = 20 * time.Second
		name     = "failover"
		rateKey  = "{" + name + "}" // redis_rate's key rate:{failover}, in our key's slot
		allowFor = burst + clients*(burst/clients)
	)
	c := startCluster(t)
	ctx := context.Background()

	ours := make([]*decisionLog, clients)
	theirs := make([]*decisionLog, clients)
	var lims []*backoffredis.Limiter
	var clis []*goredis.ClusterClient
	var (
		wg    sync.WaitGroup
		stop  = make(chan struct{})
		start = time.Now()
	)
	run := func(log *decisionLog, decide func() (allowed, fresh bool, retry time.Duration)) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			allowed, fresh, retry := decide()
			log.add(t0.Sub(start), time.Since(t0), allowed, fresh)
			if !allowed {
				time.Sleep(min(max(retry, time.Millisecond), 20*time.Millisecond))
			}
		}
	}
	for i := range clients {
		cl := c.client()
		clis = append(clis, cl)
		l := backoffredis.NewLimiter(cl, name, rate, burst,
			backoffredis.WithTimeout(failoverTimeout), backoffredis.WithExpectedReplicas(clients), backoffredis.WithLogger(nil))
		lims = append(lims, l)
		ours[i] = &decisionLog{}
		wg.Add(1)
		go run(ours[i], func() (bool, bool, time.Duration) {
			r, err := l.AllowN(ctx, 1)
			if err != nil {
				t.Errorf("client %d: %v", i, err)
			}
			return r.Allowed, r.Shared, r.RetryAfter
		})

		rcl := c.client()
		clis = append(clis, rcl)
		rl := redis_rate.NewLimiter(rcl)
		limit := redis_rate.Limit{Rate: rate, Burst: burst, Period: time.Second}
		theirs[i] = &decisionLog{}
		wg.Add(1)
		go run(theirs[i], func() (bool, bool, time.Duration) {
			cctx, cancel := context.WithTimeout(ctx, failoverTimeout)
			defer cancel()
			r, err := rl.Allow(cctx, rateKey, limit)
			if err != nil {
				return false, false, 10 * time.Millisecond
			}
			return r.Allowed > 0, true, r.RetryAfter
		})
	}
	// The scheduler's lag: how late a goroutine that only sleeps wakes up,
	// at worst, during the run. 16 goroutines deciding without pause, under
	// the race detector on a loaded two-core machine, wait for the scheduler
	// as long as that, which no deadline can prevent.
	var lag time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			time.Sleep(5 * time.Millisecond)
			lag = max(lag, time.Since(t0)-5*time.Millisecond)
		}
	}()
	master := c.masterOf(lims[0].Key())
	require.Same(t, master, c.masterOf("rate:"+rateKey), "both limits live on the master to kill")

	time.Sleep(healthy)
	before := outages(lims) // a loaded machine may have timed out a call already
	kill := time.Since(start)
	master.kill()
	deadline := time.Now().Add(giveUp)
	for !allBack(lims, before) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // waiting on the cluster's promotion, bounded
	}
	time.Sleep(healthy)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)

	o, r := summarize(ours, kill), summarize(theirs, kill)
	bound := burst + rate*elapsed.Seconds()
	t.Logf("run %v, kill at %v; bound burst+rate×elapsed = %.0f, failover allowance %d", elapsed.Round(time.Millisecond), kill.Round(time.Millisecond), bound, allowFor)
	t.Logf("ours:       admitted %d (%.1f%% of the bound), in the window %d (rate×window %.0f), not shared %d, shared again %v after the kill, slowest call %v (the scheduler's lag %v)",
		o.admitted, 100*float64(o.admitted)/bound, o.inWindow, rate*o.back.Seconds(), o.stale, o.back.Round(time.Millisecond), o.slowest.Round(time.Millisecond), lag.Round(time.Millisecond))
	again := "not within the run"
	if r.back >= 0 {
		again = r.back.Round(time.Millisecond).String() + " after the kill"
	}
	t.Logf("redis_rate: admitted %d (%.1f%% of the bound), in the window %d, errors %d, answering again %s, slowest call %v",
		r.admitted, 100*float64(r.admitted)/bound, r.inWindow, r.stale, again, r.slowest.Round(time.Millisecond))

	// A call's timeout path (the deadline's timer, the connection closed,
	// the fallback) waits for the scheduler, on a machine whose two cores the
	// servers and 16 deciding goroutines share: loadSlack, plus the lag
	// measured during the run.
	slack := loadSlack + lag
	assert.LessOrEqual(t, o.slowest, failoverTimeout+slack, "a decision blocked past its deadline (the scheduler's lag was %v)", lag)
	assert.Positive(t, o.stale, "the fallback decided during the failover")
	require.GreaterOrEqual(t, o.back, time.Duration(0), "every client's decisions are shared again after the promotion")
	for i, l := range lims {
		st := l.Stats()
		assert.True(t, st.Available, "client %d: %+v", i, st)
		assert.Positive(t, st.Outages, "client %d", i)
	}
	assert.LessOrEqual(t, float64(o.admitted), bound+allowFor)
	// Admissions lost: the first timeouts of the failover, and, under the
	// race detector on a loaded machine, calls slowed by the scheduler.
	floor := map[bool]float64{false: 0.8, true: 0.5}[raceEnabled]
	assert.GreaterOrEqual(t, float64(o.admitted), floor*bound, "admissions lost")

	// No connection outlives its client: once the clients are closed, the
	// surviving masters count no client connection but the one asking.
	for _, cl := range clis {
		require.NoError(t, cl.Close())
	}
	for _, m := range c.masters() {
		require.NoError(t, eventually(time.Second, func() error { return onlyConnection(m) }))
	}
	// Nor a goroutine: a closed go-redis client whose server died ends its
	// dial retries at its next attempt, a second after Close.
	require.NoError(t, eventually(3*time.Second, func() error { return goleak.Find() }))
}

func outages(lims []*backoffredis.Limiter) []uint64 {
	out := make([]uint64, len(lims))
	for i, l := range lims {
		out[i] = l.Stats().Outages
	}
	return out
}

// allBack reports whether every limiter has seen an outage since before
// and is available again.
func allBack(lims []*backoffredis.Limiter, before []uint64) bool {
	for i, l := range lims {
		if st := l.Stats(); st.Outages == before[i] || !st.Available {
			return false
		}
	}
	return true
}

// onlyConnection checks that s has one client connection: the one asking.
func onlyConnection(s *server) error {
	cl := goredis.NewClient(&goredis.Options{Addr: s.addr()})
	defer cl.Close()
	list, err := cl.ClientList(context.Background()).Result()
	if err != nil {
		return err
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if !strings.Contains(line, "flags=S") { // not a replica's link
			n++
		}
	}
	if n != 1 {
		return &connectionsLeft{addr: s.addr(), list: list}
	}
	return nil
}

type connectionsLeft struct{ addr, list string }

func (e *connectionsLeft) Error() string { return e.addr + " still has client connections:\n" + e.list }

// eventually retries f for up to within: a closed client's connections and
// goroutines end a moment after Close returns.
func eventually(within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
