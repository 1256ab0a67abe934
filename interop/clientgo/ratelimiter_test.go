package clientgobackoff_test

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	clientgobackoff "github.com/retrykit/backoff/interop/clientgo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// apfServer answers GET /version like an API server under API Priority and
// Fairness: seats requests are served at once, each taking service; up to
// queue more wait for a seat; beyond that the answer is 429 with
// Retry-After: 1.
type apfServer struct {
	seats   chan struct{}
	queued  atomic.Int64
	queue   int64
	service time.Duration

	served, rejected atomic.Int64
}

func newAPFServer(seats, queue int, service time.Duration) *apfServer {
	return &apfServer{seats: make(chan struct{}, seats), queue: int64(queue), service: service}
}

func (s *apfServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case s.seats <- struct{}{}:
	default:
		if s.queued.Add(1) > s.queue {
			s.queued.Add(-1)
			s.rejected.Add(1)
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"kind":"Status","code":429}`, http.StatusTooManyRequests)
			return
		}
		s.seats <- struct{}{}
		s.queued.Add(-1)
	}
	time.Sleep(s.service) // the server's work, in real time: this is the server, not the code under test
	<-s.seats
	s.served.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.0"}`))
}

// run sends n GET /version requests from g goroutines through client-go's
// discovery client built from cfg.
func run(t *testing.T, cfg *rest.Config, g, n int) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / g {
				_, err := dc.RESTClient().Get().AbsPath("/version").DoRaw(context.Background())
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
}

// timingLimiter adds up the time its requests spent waiting in l.
type timingLimiter struct {
	flowcontrol.RateLimiter
	waited atomic.Int64
}

func (l *timingLimiter) Wait(ctx context.Context) error {
	start := time.Now()
	err := l.RateLimiter.Wait(ctx)
	l.waited.Add(int64(time.Since(start)))
	return err
}

// TestNoClientWaitWhileTheServerHasRoom: 1,000 requests from 10 goroutines
// to a server with room for them all wait nowhere with Configure. client-go's
// default limiter, a token bucket of 5 per second with bursts of 10 (x/time/
// rate's, which backoff.Limiter matches to the nanosecond), would hold them
// back for 198 s: computed here on a fake clock rather than waited for.
//
// That Configure's limiter made nothing wait is read from its rate, which
// stays unlimited without a 429, and whose Wait then returns at once. The
// real time the requests spent in Wait is only a sanity bound: it is
// scheduling delays, a few milliseconds in all on a quiet machine, up to
// about 100 ms at a load of 5 on two cores.
func TestNoClientWaitWhileTheServerHasRoom(t *testing.T) {
	srv := httptest.NewServer(newAPFServer(100, 100, 0))
	defer srv.Close()

	clk := testingclock.NewFakeClock(time.Now())
	bucket := backoff.NewLimiter(5, 10, backoff.WithClock(clk))
	start := clk.Now()
	for range 1000 {
		clk.Step(bucket.Reserve().Delay())
	}
	t.Logf("client-go's default: the last of 1,000 requests waits %v", clk.Since(start))
	assert.Equal(t, 198*time.Second, clk.Since(start))

	cfg := &rest.Config{Host: srv.URL}
	l := clientgobackoff.Configure(cfg)
	timed := &timingLimiter{RateLimiter: l}
	cfg.RateLimiter = timed
	run(t, cfg, 10, 1000)
	t.Logf("Configure: %v of client-side waiting in all, QPS %v", time.Duration(timed.waited.Load()), l.QPS())
	assert.True(t, math.IsInf(float64(l.QPS()), 1), "no 429, so the rate never limited a request")
	assert.Less(t, time.Duration(timed.waited.Load()), time.Second, "Wait returned at once, give or take the scheduler")
}

// TestFewerThrottlesWhenTheServerIsSaturated: 40 goroutines send 1,000
// requests to a server with 4 seats and a queue of 8. With no client limit
// (client-go retries each 429 after its Retry-After) the first contact
// alone costs about 28 429s (40 requests at once for 12 places). Configure
// lets 10 requests be in flight at first, and learns from there how many the
// server serves without queueing, while its rate learns the rest from the
// 429s: fewer than 2% of the requests are throttled, and fewer than half
// the unlimited run's count. Both runs are real time, so both counts vary
// with the machine's load: on a quiet 2-core machine 2 to 4 of the paced
// run's requests are throttled against 48 to 54 of the unlimited run's; at a
// load of 5, or with three copies of the test at once, 1 to 11 against 44 to
// 54; beside another module's test binary being linked, as in CI, as many
// as 15 against 39. The bounds leave room for that.
func TestFewerThrottlesWhenTheServerIsSaturated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for several seconds of real time")
	}
	unlimited := newAPFServer(4, 8, 2*time.Millisecond)
	srv := httptest.NewServer(unlimited)
	defer srv.Close()
	run(t, &rest.Config{Host: srv.URL, RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}, 40, 1000)
	t.Logf("no client limit: %d 429s for %d requests served", unlimited.rejected.Load(), unlimited.served.Load())

	paced := newAPFServer(4, 8, 2*time.Millisecond)
	srv2 := httptest.NewServer(paced)
	defer srv2.Close()
	cfg := &rest.Config{Host: srv2.URL}
	l := clientgobackoff.Configure(cfg)
	start := time.Now()
	run(t, cfg, 40, 1000)
	t.Logf("Configure: %d 429s for %d requests served in %v, QPS now %.0f", paced.rejected.Load(), paced.served.Load(), time.Since(start), l.QPS())
	assert.Less(t, 2*paced.rejected.Load(), unlimited.rejected.Load(), "fewer than half the unlimited run's 429s")
	assert.Less(t, paced.rejected.Load(), int64(20), "fewer than 2% of 1,000 requests throttled")
}
