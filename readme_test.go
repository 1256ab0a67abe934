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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// The README's Go blocks compile and do what the README says, through
// twins: a README block preceded by the line
//
//	<!-- compiled: NAME -->
//
// has a twin, the function NAME in one of this package's _test.go files,
// whose body holds every non-blank line of the block, in order (other lines
// may come between, to set the scene). A twin line that must differ from
// the README (a fake clock passed where the README passes none) ends in
// "// README: " followed by the README's line, which it stands for. The
// twin's tests then check the behaviour the README describes.
//
// The mechanism is opt-in per block, so that a README section without the
// marker (a shell command, a sketch) never fails this test; a marker without
// its block or its twin, or a block that drifted from its twin, does.

// TestReadmeGoBlocksHaveCompiledTwins checks every marked block against its
// twin.
func TestReadmeGoBlocksHaveCompiledTwins(t *testing.T) {
	blocks := readmeMarkedBlocks(t, "README.md")
	require.NotEmpty(t, blocks)
	twins := testFunctionBodies(t)
	for name, block := range blocks {
		t.Run(name, func(t *testing.T) {
			body, ok := twins[name]
			require.True(t, ok, "README block marked %q: no function %s in the package's tests", name, name)
			var twin []string
			for _, line := range body {
				if _, readme, ok := strings.Cut(line, "// README: "); ok {
					line = readme
				}
				twin = append(twin, strings.TrimSpace(line))
			}
			next := 0
			for _, line := range block {
				for next < len(twin) && twin[next] != line {
					next++
				}
				require.Less(t, next, len(twin), "README line %q is not in %s (in this order)", line, name)
				next++
			}
		})
	}
}

// readmeMarkedBlocks returns the trimmed, non-blank lines of each marked Go
// block of the README, by twin name.
func readmeMarkedBlocks(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	blocks := map[string][]string{}
	var pending, inBlock string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case inBlock != "":
			if line == "```" {
				inBlock = ""
			} else if line != "" {
				blocks[inBlock] = append(blocks[inBlock], line)
			}
		case strings.HasPrefix(line, "<!-- compiled: "):
			pending = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- compiled: "), " -->")
		case pending != "" && line == "```go":
			inBlock, pending = pending, ""
			blocks[inBlock] = []string{}
		case pending != "" && line != "":
			t.Fatalf("README marker %q is not followed by a ```go block", pending)
		}
	}
	require.NoError(t, sc.Err())
	require.Empty(t, pending, "README ends after a marker")
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

// readmeRetry is the twin of the README's "Retry an operation".
func readmeRetry(ctx context.Context, client *http.Client, req *http.Request, opts ...backoff.Option) error {
	err := backoff.Retry(ctx, backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 5, Cap: 5 * time.Second},
		func(ctx context.Context) error {
			resp, err := client.Do(req.WithContext(ctx)) // a GET: a request with a body needs a fresh body per attempt
			if err != nil {
				return err // retried
			}
			defer resp.Body.Close()
			switch {
			case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
				err := fmt.Errorf("server: %s", resp.Status)
				if d, ok := backoff.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
					return backoff.RetryAfter(d, err) // the server's hint replaces the next wait
				}
				return err // retried after the schedule's wait
			case resp.StatusCode >= 400:
				return backoff.Permanent(fmt.Errorf("request rejected: %s", resp.Status)) // stop now
			}
			return nil
		}, opts...) // README: })
	var re *backoff.RetryError
	if errors.As(err, &re) {
		log.Printf("gave up after %d attempts: %v", re.Attempts, re.Last)
	}
	return err
}

// scriptedTransport answers the i-th request with responses[i] (a status,
// and a Retry-After value if not empty), and 200 after the script ends. It
// never touches the network.
type scriptedTransport struct {
	responses [][2]string
	calls     int
}

func (s *scriptedTransport) RoundTrip(*http.Request) (*http.Response, error) {
	status, retryAfter := "200", ""
	if s.calls < len(s.responses) {
		status, retryAfter = s.responses[s.calls][0], s.responses[s.calls][1]
	}
	s.calls++
	var code int
	fmt.Sscan(status, &code)
	resp := &http.Response{StatusCode: code, Status: status + " " + http.StatusText(code),
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}
	if retryAfter != "" {
		resp.Header.Set("Retry-After", retryAfter)
	}
	return resp, nil
}

// TestReadmeRetry checks what the README says of its Retry block: 5xx and
// 429 retried, after the server's Retry-After only when it sends a usable
// one, any other 4xx permanent, a *RetryError after 5 failed attempts. The
// snippet of the issue returned nil for a 500 after 1 attempt, and made 5
// attempts in 1.1 ms for a plain 503.
func TestReadmeRetry(t *testing.T) {
	log.SetOutput(io.Discard)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	type want struct {
		attempts  int
		waits     []time.Duration // exact waits; nil: the schedule's, checked by range
		permanent bool
		gaveUp    bool
	}
	tests := []struct {
		name      string
		responses [][2]string
		want      want
	}{
		{"200 at once", nil, want{attempts: 1}},
		{"a 503 without a hint waits the schedule", [][2]string{{"503", ""}}, want{attempts: 2}},
		{"500, 502 and 504 are retried", [][2]string{{"500", ""}, {"502", ""}, {"504", ""}}, want{attempts: 4}},
		{"a hint is used when present", [][2]string{{"503", "3"}}, want{attempts: 2, waits: []time.Duration{3 * time.Second}}},
		{"429 with a hint", [][2]string{{"429", "2"}}, want{attempts: 2, waits: []time.Duration{2 * time.Second}}},
		{"an unusable hint is no hint", [][2]string{{"503", "soon"}}, want{attempts: 2}},
		{"404 is permanent", [][2]string{{"404", ""}}, want{attempts: 1, permanent: true}},
		{"5 failures give up", [][2]string{{"500", ""}, {"500", ""}, {"500", ""}, {"500", ""}, {"500", ""}},
			want{attempts: 5, gaveUp: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			transport := &scriptedTransport{responses: tt.responses}
			client := &http.Client{Transport: transport}
			req, err := http.NewRequest(http.MethodGet, "http://example.invalid/", nil)
			require.NoError(t, err)
			fc := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			var waits []time.Duration
			err = readmeRetry(context.Background(), client, req, backoff.WithClock(fc),
				backoff.WithNotify(func(_ int, _ error, next time.Duration) {
					waits = append(waits, next)
					fc.Step(next)
				}))
			assert.Equal(t, tt.want.attempts, transport.calls, "attempts")
			switch {
			case tt.want.permanent:
				assert.True(t, backoff.IsPermanent(err), "%v", err)
			case tt.want.gaveUp:
				var re *backoff.RetryError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, 5, re.Attempts)
				assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
			default:
				assert.NoError(t, err)
			}
			if tt.want.waits != nil {
				assert.Equal(t, tt.want.waits, waits)
				return
			}
			for i, w := range waits { // 100 ms, 200 ms, 400 ms, 800 ms, each up to 10% longer
				base := 100 * time.Millisecond << i
				assert.True(t, w >= base && w < base+base/10, "wait %d: %v", i+1, w)
			}
		})
	}
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
