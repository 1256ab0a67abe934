package backoff_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
	"github.com/retrykit/backoff/httpretry"
)

// The Go blocks of the README and of the pages under docs/ compile and do
// what the text says, through twins: a block preceded by the line
//
//	<!-- compiled: NAME -->
//
// has a twin, the function NAME in one of this package's _test.go files,
// whose body holds every non-blank line of the block, in order (other lines
// may come between, to set the scene). A twin line that must differ from
// the document (a fake clock passed where the document passes none) ends in
// "// README: " followed by the document's line, which it stands for.
// Lines compare with runs of spaces squeezed to one. The
// twin's tests then check the behaviour the text describes.
//
// Every ```go block carries a marker. One that cannot have a twin in this
// package (it needs a newer Go than go.mod's, or another module) says so
// with
//
//	<!-- not compiled: REASON -->
//
// A block without a marker, a marker without its block or its twin, or a
// block that drifted from its twin fails the test.

// readmeDocs are the documents whose Go blocks TestReadmeGoBlocksHaveCompiledTwins checks.
func readmeDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	return append([]string{"README.md"}, docs...)
}

// TestReadmeGoBlocksHaveCompiledTwins checks every marked block against its
// twin.
func TestReadmeGoBlocksHaveCompiledTwins(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	blocks := map[string][]string{}
	for _, path := range readmeDocs(t) {
		for name, block := range readmeMarkedBlocks(t, path) {
			_, dup := blocks[name]
			require.False(t, dup, "%s: twin name %q is used by another block", path, name)
			blocks[name] = block
		}
	}
	require.NotEmpty(t, blocks)
	twins := testFunctionBodies(t)
	for name, block := range blocks {
		t.Run(name, func(t *testing.T) {
			body, ok := twins[name]
			require.True(t, ok, "block marked %q: no function %s in the package's tests", name, name)
			var twin []string
			for _, line := range body {
				if _, readme, ok := strings.Cut(line, "// README: "); ok {
					line = readme
				}
				twin = append(twin, squeezeSpace(line))
			}
			next := 0
			for _, line := range block {
				for next < len(twin) && twin[next] != line {
					next++
				}
				require.Less(t, next, len(twin), "line %q is not in %s (in this order)", line, name)
				next++
			}
		})
	}
}

// squeezeSpace trims line and turns each run of spaces in it into one, so
// that gofmt's alignment of trailing comments does not count as drift.
func squeezeSpace(line string) string {
	return strings.Join(strings.Fields(line), " ")
}

// readmeMarkedBlocks returns the trimmed, non-blank lines of each Go block of
// the document at path marked compiled, by twin name. It fails the test on
// a Go block with no marker.
func readmeMarkedBlocks(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	const notCompiled = "-"
	blocks := map[string][]string{}
	var pending, inBlock, fence string
	lineNo := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		switch {
		case fence != "": // a block that is not Go, or not checked
			if line == "```" {
				fence = ""
			}
		case inBlock != "":
			if line == "```" {
				inBlock = ""
			} else if line != "" {
				blocks[inBlock] = append(blocks[inBlock], squeezeSpace(line))
			}
		case strings.HasPrefix(line, "<!-- compiled: "):
			pending = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- compiled: "), " -->")
		case strings.HasPrefix(line, "<!-- not compiled: "):
			pending = notCompiled
		case line == "```go" && pending == notCompiled:
			fence, pending = line, ""
		case line == "```go" && pending != "":
			inBlock, pending = pending, ""
			blocks[inBlock] = []string{}
		case line == "```go":
			t.Errorf("%s:%d: a ```go block without a <!-- compiled: NAME --> or <!-- not compiled: REASON --> marker", path, lineNo)
			fence = line
		case strings.HasPrefix(line, "```"):
			fence = line
		case pending != "" && line != "":
			t.Fatalf("%s:%d: marker %q is not followed by a ```go block", path, lineNo, pending)
		}
	}
	require.NoError(t, sc.Err())
	require.Empty(t, pending, "%s ends after a marker", path)
	return blocks
}

// testFunctionBodies returns the lines of the body of every function
// declared in the package's _test.go files, by name.
func testFunctionBodies(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	bodies := map[string][]string{}
	for _, name := range files {
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				body := src[fset.Position(fn.Body.Lbrace).Offset:fset.Position(fn.Body.Rbrace).Offset]
				bodies[fn.Name.Name] = strings.Split(string(body), "\n")
			}
		}
	}
	return bodies
}

// orderStore is what the README's Retry example saves an order to.
type orderStore interface {
	SaveOrder(ctx context.Context, order string) error
}

// ErrInvalidOrder is the README's example of an error not worth retrying.
var ErrInvalidOrder = errors.New("invalid order")

// readmeRetry is the twin of the README's "Retry an operation".
func readmeRetry(ctx context.Context, db orderStore, order string, opts ...backoff.Option) error {
	s := backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 5}
	err := backoff.Retry(ctx, s, func(ctx context.Context) error {
		err := db.SaveOrder(ctx, order)
		if errors.Is(err, ErrInvalidOrder) {
			return backoff.Permanent(err) // not worth retrying: Retry returns it at once
		}
		return err // nil ends Retry; another error is retried 100, 200, 400, 800 ms later (+ up to 10%)
	}, opts...) // README: })
	var re *backoff.RetryError
	if errors.As(err, &re) {
		log.Printf("gave up after %d attempts: %v", re.Attempts, re.Last)
	}
	return err
}

// scriptedStore fails the i-th SaveOrder with errs[i], and succeeds after
// the script ends.
type scriptedStore struct {
	errs  []error
	calls int
}

func (s *scriptedStore) SaveOrder(context.Context, string) error {
	s.calls++
	if s.calls <= len(s.errs) {
		return s.errs[s.calls-1]
	}
	return nil
}

// TestReadmeRetry checks what the README says of its Retry block: an
// invalid order ends Retry at once with the Permanent error, other errors
// are retried 100, 200, 400, 800 ms later (each up to 10% longer), and after
// 5 failed attempts Retry returns a *RetryError.
func TestReadmeRetry(t *testing.T) {
	log.SetOutput(io.Discard)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	tests := []struct {
		name      string
		errs      []error
		attempts  int
		permanent bool
		gaveUp    bool
	}{
		{name: "saved at once", attempts: 1},
		{name: "two failures, then saved", errs: []error{errFlaky, errFlaky}, attempts: 3},
		{name: "an invalid order is permanent", errs: []error{ErrInvalidOrder}, attempts: 1, permanent: true},
		{name: "5 failures give up", errs: []error{errFlaky, errFlaky, errFlaky, errFlaky, errFlaky, errFlaky},
			attempts: 5, gaveUp: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := &scriptedStore{errs: tt.errs}
			fc := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			var waits []time.Duration
			err := readmeRetry(context.Background(), db, "order-1", backoff.WithClock(fc),
				backoff.WithNotify(func(_ int, _ error, next time.Duration) {
					waits = append(waits, next)
					fc.Step(next)
				}))
			assert.Equal(t, tt.attempts, db.calls, "attempts")
			switch {
			case tt.permanent:
				assert.True(t, backoff.IsPermanent(err), "%v", err)
				assert.ErrorIs(t, err, ErrInvalidOrder)
			case tt.gaveUp:
				var re *backoff.RetryError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, 5, re.Attempts)
				assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
				assert.ErrorIs(t, err, errFlaky)
			default:
				assert.NoError(t, err)
			}
			require.Len(t, waits, tt.attempts-1)
			for i, w := range waits {
				base := 100 * time.Millisecond << i
				assert.True(t, w >= base && w < base+base/10, "wait %d: %v", i+1, w)
			}
		})
	}
}

// readmeHTTP is the twin of the README's "Retry HTTP calls".
func readmeHTTP(url string, opts ...backoff.Option) (*http.Response, error) {
	client := httpretry.NewClient(backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 4, Cap: 5 * time.Second}, opts...) // README: client := httpretry.NewClient(backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 4, Cap: 5 * time.Second})
	resp, err := client.Get(url)                                                                                                                       // after 4 attempts on a 503, resp is that 503, err nil
	return resp, err
}

// TestReadmeHTTP: a server that always answers 503 gets 4 requests, and
// the client returns the last 503 with a nil error. The waits take no time
// on an AutoStepClock.
func TestReadmeHTTP(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	clk := backofftest.NewAutoStepClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	resp, err := readmeHTTP(srv.URL, backoff.WithClock(clk))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, int32(4), requests.Load())
}

// readmeLimiter is the twin of the README's Limiter block.
func readmeLimiter(ctx context.Context, clk clock.WithDelayedExecution, requests []string, call func(string)) error {
	api := backoff.NewLimiter(10, 5, backoff.WithClock(clk)) // README: api := backoff.NewLimiter(10, 5) // 10 calls/s, bursts of 5
	for _, req := range requests {
		if err := api.Wait(ctx); err != nil {
			return err // ctx ended (with its cause), or its deadline comes before the token
		}
		call(req)
	}
	return nil
}

// TestReadmeLimiter: the first 5 calls go at once, then one every 100 ms;
// a context that has ended stops the loop with its error.
func TestReadmeLimiter(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := backofftest.NewAutoStepClock(start)
	var at []time.Duration
	err := readmeLimiter(context.Background(), clk, []string{"a", "b", "c", "d", "e", "f", "g"}, func(string) {
		at = append(at, clk.Since(start))
	})
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{0, 0, 0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond}, at)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = readmeLimiter(ctx, clk, []string{"a"}, func(string) { t.Error("called after the context ended") })
	assert.ErrorIs(t, err, context.Canceled)
}

// readmeKeyedLimiter is the twin of the README's KeyedLimiter block: a
// handler that admits each client at 1 request/s, bursts of 20.
func readmeKeyedLimiter(clk clock.WithDelayedExecution) http.HandlerFunc {
	perClient := backoff.NewKeyedLimiter[string](1, 20, backoff.WithMaxKeys(100_000), backoff.WithClock(clk)) // README: perClient := backoff.NewKeyedLimiter[string](1, 20, backoff.WithMaxKeys(100_000))
	return func(w http.ResponseWriter, r *http.Request) {
		clientID := r.Header.Get("X-Client-ID")
		if !perClient.Allow(clientID) {
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

// TestReadmeKeyedLimiter: a client gets 20 requests at once, then 429s,
// while another client is still served; a second later the first gets one
// more.
func TestReadmeKeyedLimiter(t *testing.T) {
	fc := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := readmeKeyedLimiter(fc)
	status := func(client string) int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-Client-ID", client)
		rec := httptest.NewRecorder()
		h(rec, req)
		return rec.Code
	}
	for i := range 20 {
		require.Equal(t, http.StatusOK, status("a"), "request %d", i+1)
	}
	assert.Equal(t, http.StatusTooManyRequests, status("a"))
	assert.Equal(t, http.StatusOK, status("b"))
	fc.Step(time.Second)
	assert.Equal(t, http.StatusOK, status("a"))
	assert.Equal(t, http.StatusTooManyRequests, status("a"))
}

// docsPriorities is the twin of docs/kubernetes.md's priorities block: it
// returns what the first GetWithPriority hands out.
func docsPriorities(initialList []string) (string, int, bool) {
	q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](),
		backoff.WithFairness(func(key string) string { return strings.Split(key, "/")[0] }), // round-robin across namespaces
		backoff.WithMaxReadyWait(time.Minute))                                               // no priority waits longer than a minute behind higher ones
	defer q.ShutDown()

	q.AddWithOptions(backoff.AddOptions{Priority: -100}, initialList...) // resyncs last
	q.Add("default/web-0")                                               // priority 0: before them
	item, priority, shutdown := q.GetWithPriority()
	return item, priority, shutdown
}

// TestDocsPriorities: the item added at priority 0 comes out before the
// initial list added at -100.
func TestDocsPriorities(t *testing.T) {
	item, priority, shutdown := docsPriorities([]string{"default/a", "kube-system/b"})
	assert.Equal(t, "default/web-0", item)
	assert.Equal(t, 0, priority)
	assert.False(t, shutdown)
}

// docsRetryBudget is the twin of docs/retry-budgets.md's block: it reports
// whether the budget refused a retry of call.
func docsRetryBudget(ctx context.Context, s backoff.Schedule, call func(context.Context) error) (refused bool, err error) {
	budget := backoff.NewRetryBudget(0.1, 10, time.Second)             // 10% of requests + 10 retries/s
	err = backoff.Retry(ctx, s, call, backoff.WithRetryBudget(budget)) // README: err := backoff.Retry(ctx, s, call, backoff.WithRetryBudget(budget))
	if errors.Is(err, backoff.ErrRetryBudgetExhausted) {
		// refused at once, without waiting; errors.As(err, &retryErr) still reaches call's error
		refused = true
	}
	q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](),
		backoff.WithRetryBudget(budget))
	q.ShutDown()
	return refused, err
}

// TestDocsRetryBudget: a call that always fails, with up to 100 attempts
// and no waits, is refused once it has used the budget's floor of about 10
// retries, and the error still reaches the call's.
func TestDocsRetryBudget(t *testing.T) {
	attempts := 0
	refused, err := docsRetryBudget(context.Background(), backoff.Schedule{Steps: 100}, func(context.Context) error {
		attempts++
		return errFlaky
	})
	assert.True(t, refused)
	assert.ErrorIs(t, err, errFlaky)
	var retryErr *backoff.RetryError
	require.ErrorAs(t, err, &retryErr)
	assert.Equal(t, attempts, retryErr.Attempts)
	assert.True(t, attempts > 1 && attempts < 100, "attempts: %d", attempts)
}

// armingClock2 is a FakeClock that reports on armed every AfterFunc it
// registers or re-arms, once registered, so that a test steps the clock only
// after a queue has set its timer.
type armingClock2 struct {
	*testclock.FakeClock
	armed chan time.Duration
}

func (c *armingClock2) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &armingTimer{Timer: c.FakeClock.AfterFunc(d, f), armed: c.armed}
	c.armed <- d
	return t
}

type armingTimer struct {
	clock.Timer
	armed chan time.Duration
}

func (t *armingTimer) Reset(d time.Duration) bool {
	r := t.Timer.Reset(d)
	t.armed <- d
	return r
}

// readmePark is the twin of the README's parking block.
func readmePark(q *backoff.RateLimitingQueue[string], key string, rv int64, cacheVersion func(string) int64) {
	// reconcile, after its write of key at version rv: no run until the cache has seen it
	q.Park(key, func() bool { return cacheVersion(key) >= rv }, 5*time.Second)

	// the informer's event handler
	q.Add(key)
	q.Wake()
}

// TestReadmePark: the event of the controller's own write, seen before the
// cache has it, does not release the item; the Wake after the cache
// catches up does.
func TestReadmePark(t *testing.T) {
	fc := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](backoff.WithClock(fc)), backoff.WithClock(fc))
	defer q.ShutDown()
	var seen atomic.Int64
	readmePark(q, "default/web", 7, func(string) int64 { return seen.Load() })
	assert.Equal(t, 0, q.Len(), "held: the cache is at version 0")
	seen.Store(7)
	q.Wake()
	assert.Equal(t, 1, q.Len())
}

// readmeFeedAndDrain is the twin of the README's "Feed and drain a
// controller's queue": reconcile fails twice, then succeeds.
func readmeFeedAndDrain(ctx context.Context, fc clock.WithDelayedExecution, reconcile func(context.Context, string) error) {
	opts := []backoff.Option{backoff.WithName("pods"), backoff.WithClock(fc), backoff.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))} // README: opts := []backoff.Option{backoff.WithName("pods")} // in tests, add backoff.WithClock(fakeClock) here: one slice, one clock
	q := backoff.NewRateLimitingQueue(backoff.DefaultControllerRateLimiter[string](opts...), opts...)
	q.Add("default/web-0")

	backoff.RunWorkers(ctx, q, 4, func(ctx context.Context, key string) (backoff.Result, error) {
		if err := reconcile(ctx, key); err != nil {
			return backoff.Result{}, err // requeued after 5 ms, 10 ms, 20 ms … 1000 s
		}
		return backoff.Result{RequeueAfter: time.Hour}, nil // resync in an hour
	})
}

// TestReadmeFeedAndDrain: the failing key is requeued 5 ms, then 10 ms
// later, all on the fake clock passed once; success requeues it in an hour.
func TestReadmeFeedAndDrain(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := &armingClock2{testclock.NewFakeClock(start), make(chan time.Duration, 64)}
	ctx, cancel := context.WithCancel(context.Background())
	var at []time.Duration
	calls := make(chan struct{})
	done := wtGo(func() {
		readmeFeedAndDrain(ctx, fc, func(context.Context, string) error {
			at = append(at, fc.Since(start))
			calls <- struct{}{}
			if len(at) <= 2 {
				return errFlaky
			}
			return nil
		})
	})
	t.Cleanup(cancel) // stops the workers if a wait below fails the test
	for i, requeue := range []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, time.Hour} {
		waitFor(t, fmt.Sprintf("reconcile call %d", i+1), calls, fc.FakeClock)
		// The queue may also re-arm for a firing it has served.
		for d := time.Duration(0); d != requeue; {
			d = waitFor(t, fmt.Sprintf("the queue to arm its timer for the requeue after %v", requeue), fc.armed, fc.FakeClock)
		}
		if requeue != time.Hour {
			fc.Step(requeue)
		}
	}
	cancel()
	waitFor(t, "RunWorkers to return once its context is canceled", done, fc.FakeClock)
	assert.Equal(t, []time.Duration{0, 5 * time.Millisecond, 15 * time.Millisecond}, at)
}

// TestReadmeFakeClock is the twin of the README's "Test it with a fake
// clock".
func TestReadmeFakeClock(t *testing.T) {
	fc := testclock.NewFakeClock(time.Now()) // README: fc := testingclock.NewFakeClock(time.Now()) // k8s.io/utils/clock/testing
	q := backoff.NewDelayingQueue[string](backoff.WithClock(fc))
	defer q.ShutDown()
	q.AddAfter("x", time.Minute)

	fc.Step(59 * time.Second)
	assert.Equal(t, 0, q.Len())
	fc.Step(time.Second)
	assert.Equal(t, 1, q.Len()) // visible at once: no polling, no sleeping
}

// container is what the README's "Gate work per key" restarts.
type container struct{ FinishedAt time.Time }

// readmeGate is the twin of the README's "Gate work per key": it returns
// one sync of the kubelet for key, which restarts the container unless it is
// in back-off.
func readmeGate(fc *testclock.FakeClock, key string, container *container, restart func(*container)) func() error {
	b := backoff.NewBackOff(10*time.Second, 5*time.Minute, backoff.WithClock(fc)) // README: b := backoff.NewBackOff(10*time.Second, 5*time.Minute)
	return func() error {
		if b.IsInBackOffSince(key, container.FinishedAt) {
			return fmt.Errorf("back-off %s restarting %s", b.Get(key), key)
		}
		b.Next(key, container.FinishedAt)
		restart(container)
		return nil
	}
}

// TestReadmeGate: a container that crashes at once is restarted 10 s, then
// 20 s after each crash, and refused in between.
func TestReadmeGate(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := testclock.NewFakeClock(start)
	var restarts []time.Duration
	sync := readmeGate(fc, "web/app", &container{FinishedAt: start}, func(c *container) {
		restarts = append(restarts, fc.Since(start))
		c.FinishedAt = fc.Now() // it crashes at once
	})
	var refusals []string
	for range 31 { // the kubelet syncs every second
		if err := sync(); err != nil {
			refusals = append(refusals, err.Error())
		}
		fc.Step(time.Second)
	}
	assert.Equal(t, []time.Duration{0, 10 * time.Second, 30 * time.Second}, restarts)
	assert.Contains(t, refusals, "back-off 10s restarting web/app")
	assert.Contains(t, refusals, "back-off 20s restarting web/app")
}
