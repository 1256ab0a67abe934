package redis_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
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

// testTimeout is the deadline of every Redis call in these tests, and
// loadSlack what the checks that a call honours its deadline allow beyond it
// (waking the goroutine, closing the connection, deciding locally): far above
// the scheduling delays of a two-core machine at a load of 5 under the race
// detector, and far below go-redis's own 3 s read timeout, which a call that
// ignored its deadline would wait out on a frozen server.
const (
	testTimeout = 50 * time.Millisecond
	loadSlack   = time.Second
)

// deadClient returns a client of a loopback port where nothing listens.
func deadClient(tb testing.TB) *goredis.Client {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	addr := l.Addr().String()
	l.Close()
	c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	tb.Cleanup(func() { c.Close() })
	return c
}

// logBuffer is a slog.Logger whose lines can be counted.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(substr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), substr)
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// timed runs f and fails the test if it took longer than the deadline of a
// Redis call (plus loadSlack).
func timed(t *testing.T, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	took := time.Since(start)
	assert.LessOrEqual(t, took, testTimeout+loadSlack, "%s blocked past its deadline", what)
}

// faultRig is a limiter on a server the test can crash and freeze, with its
// probes on a fake clock, so that the test decides when the limiter tries
// Redis again.
type faultRig struct {
	srv     *server
	clk     *clocktesting.FakeClock
	log     *logBuffer
	changes []bool
	mu      sync.Mutex
	lim     *backoffredis.KeyedLimiter
}

func newFaultRig(t *testing.T, opts ...backoffredis.Option) *faultRig {
	r := &faultRig{srv: startServer(t), clk: clocktesting.NewFakeClock(time.Unix(0, 0)), log: &logBuffer{}}
	opts = append([]backoffredis.Option{
		backoffredis.WithTimeout(testTimeout),
		backoffredis.WithProbeInterval(time.Second),
		backoffredis.WithClock(r.clk),
		backoffredis.WithLogger(r.log.logger()),
		backoffredis.WithExpectedReplicas(4),
		backoffredis.WithOnStateChange(func(up bool, _ error) {
			r.mu.Lock()
			r.changes = append(r.changes, up)
			r.mu.Unlock()
		}),
	}, opts...)
	// 1000/s, burst 400: the fallback has 250/s and burst 100.
	c := r.srv.client()
	r.lim = backoffredis.NewKeyedLimiter(c, "faults", 1000, 400, opts...)
	// Open a connection and load the script with a generous deadline, so
	// that the rig starts healthy on a loaded machine.
	require.True(t, backoffredis.NewKeyedLimiter(c, "warm-up", 1, 1, generous).Allow(context.Background(), "k"))
	return r
}

func (r *faultRig) allow(t *testing.T) backoffredis.Result {
	t.Helper()
	var res backoffredis.Result
	timed(t, "AllowN", func() {
		var err error
		res, err = r.lim.AllowN(context.Background(), "k", 1)
		require.NoError(t, err)
	})
	return res
}

// outage checks the limiter through an outage that begins with fail and ends
// with heal.
func (r *faultRig) outage(t *testing.T, fail, heal func()) {
	require.True(t, r.allow(t).Shared, "shared while the server is up")

	fail()
	// The first call notices, within its deadline, and falls back.
	first := r.allow(t)
	assert.False(t, first.Shared)
	assert.True(t, first.Allowed, "the fallback admits")
	st := r.lim.Stats()
	assert.False(t, st.Available)
	assert.Equal(t, uint64(1), st.Outages)

	// Until the probe interval passes, calls do not try Redis: each is
	// decided locally, and concurrent callers do not wait either.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				res, err := r.lim.AllowN(context.Background(), "k", 1)
				if err != nil || res.Shared {
					t.Errorf("during the outage: %+v, %v", res, err)
				}
			}
		}()
	}
	timed(t, "8×20 fallback decisions", wg.Wait)
	assert.Equal(t, st.Errors, r.lim.Stats().Errors, "no fallback decision tried Redis")
	// The fallback's burst is 400/4 = 100: the 161 events since the first
	// fallback decision exceed it.
	assert.Less(t, r.lim.Stats().Fallback-st.Fallback, uint64(1+160))

	// A probe while the server is still down fails within its deadline.
	r.clk.Step(time.Second)
	assert.False(t, r.allow(t).Shared)
	assert.Equal(t, uint64(1), r.lim.Stats().Outages, "one outage, not one per failed probe")

	heal()
	r.clk.Step(time.Second)
	back := r.allow(t)
	assert.True(t, back.Shared, "the first probe after recovery is shared")
	assert.True(t, r.lim.Stats().Available)
	assert.True(t, r.allow(t).Shared, "and so are the calls after it")

	assert.Equal(t, 1, r.log.count("Redis unavailable"), "logged once per state change")
	assert.Equal(t, 1, r.log.count("Redis available again"))
	r.mu.Lock()
	assert.Equal(t, []bool{false, true}, r.changes)
	r.mu.Unlock()
}

func TestFallbackWhenTheServerIsKilledAndRestarted(t *testing.T) {
	r := newFaultRig(t)
	r.outage(t, r.srv.kill, r.srv.start)
}

func TestFallbackWhenTheServerStalls(t *testing.T) {
	r := newFaultRig(t)
	r.outage(t, r.srv.stop, r.srv.cont)
}

func TestFailClosed(t *testing.T) {
	r := newFaultRig(t, backoffredis.WithFailClosed())
	ctx := context.Background()
	require.True(t, r.lim.Allow(ctx, "k"))

	r.srv.stop()
	var err error
	timed(t, "AllowN", func() { _, err = r.lim.AllowN(ctx, "k", 1) })
	assert.ErrorIs(t, err, backoffredis.ErrUnavailable)
	var netErr net.Error
	assert.True(t, errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded), "wraps the cause: %v", err)
	timed(t, "Allow", func() { assert.False(t, r.lim.Allow(ctx, "k")) })
	timed(t, "AllowBatch", func() {
		_, err := r.lim.AllowBatch(ctx, []string{"a", "b"})
		assert.ErrorIs(t, err, backoffredis.ErrUnavailable)
	})
	timed(t, "WaitN", func() { assert.ErrorIs(t, r.lim.Wait(ctx, "k"), backoffredis.ErrUnavailable) })
	st := r.lim.Stats()
	assert.Equal(t, uint64(4), st.Refused)
	assert.Zero(t, st.Fallback)

	r.srv.cont()
	r.clk.Step(time.Second)
	assert.True(t, r.lim.Allow(ctx, "k"))
}

func TestCallerContextEndsBeforeRedisAnswers(t *testing.T) {
	r := newFaultRig(t)
	r.srv.stop()
	defer r.srv.cont()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	_, err := r.lim.AllowN(ctx, "k", 1)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, r.lim.Stats().Available, "the caller's deadline says nothing about Redis")
}

func TestWarnsWhenTheClientIgnoresDeadlines(t *testing.T) {
	var log logBuffer
	plain := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	defer plain.Close()
	backoffredis.NewLimiter(plain, "x", 1, 1, backoffredis.WithLogger(log.logger()))
	assert.Equal(t, 1, log.count("ContextTimeoutEnabled"))

	good := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer good.Close()
	backoffredis.NewKeyedLimiter(good, "x", 1, 1, backoffredis.WithLogger(log.logger()))
	short := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ReadTimeout: 10 * time.Millisecond})
	defer short.Close()
	backoffredis.NewItemExponentialFailureRateLimiter[string](short, "x", time.Millisecond, time.Second, backoffredis.WithLogger(log.logger()))
	assert.Equal(t, 1, log.count("ContextTimeoutEnabled"), "no warning when the deadline is honoured")
}

// TestKillUnderLoad kills the server while four goroutines are deciding
// without pause, restarts it, and checks that no call failed or blocked past
// its deadline, and that decisions are shared again after the restart.
func TestKillUnderLoad(t *testing.T) {
	r := newFaultRig(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	var calls, shared int
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				res, err := r.lim.AllowN(context.Background(), "k", 1)
				took := time.Since(start)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				slowest = max(slowest, took)
				calls++
				if res.Shared {
					shared++
				}
				mu.Unlock()
				// A busy service, not a spin loop: four spinning goroutines
				// under the race detector on two cores would measure the
				// scheduler, not the limiter.
				time.Sleep(time.Millisecond)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // let the load run on the healthy server
	r.srv.kill()
	time.Sleep(100 * time.Millisecond) // and on the fallback
	r.srv.start()
	// The next probe is due one fake second after the outage began. A
	// probe can still fail if go-redis is backing off its dials; the next
	// one, a step later, then succeeds.
	deadline := time.Now().Add(5 * time.Second)
	for !r.lim.Stats().Available && time.Now().Before(deadline) {
		r.clk.Step(time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	// After the restart, a pooled connection opened before the kill can
	// fail once more, which counts as a second, short outage; the next
	// probe succeeds.
	for i := 0; i < 5 && !r.allow(t).Shared; i++ {
		r.clk.Step(time.Second)
	}
	st := r.lim.Stats()
	assert.True(t, st.Available, "shared again after the restart")
	assert.GreaterOrEqual(t, st.Outages, uint64(1))
	assert.LessOrEqual(t, st.Outages, uint64(2))
	assert.Positive(t, st.Fallback)
	assert.LessOrEqual(t, slowest, testTimeout+loadSlack, "a call blocked past its deadline")
	t.Logf("%d calls, %d shared, %d fallback, slowest %v; %+v", calls, shared, st.Fallback, slowest, st)
}
