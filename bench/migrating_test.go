package bench

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
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/hashicorp/go-retryablehttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// The "before" blocks of docs/migrating.md that use a library this module
// requires are compiled here, as twins (the rule of the main module's
// readme_test.go: the twin's body holds every non-blank line of the block,
// in order; a twin line ending in "// README: " stands for the document's
// line that follows), and the behaviours the guide attributes to those
// libraries are checked against them, at the versions go.mod pins. A
// library whose package name another one here has (cenkalti/backoff v4,
// avast/retry-go, sethvargo/go-retry) has its twin and checks in a file of
// its own, migrating_<library>_test.go, which imports it under that name.

// migratingDoc is the guide, seen from this module.
const migratingDoc = "../docs/migrating.md"

// benchTwinMarker matches the marker of a block whose twin is here.
var benchTwinMarker = regexp.MustCompile(`^<!-- not compiled: .*; its twin (\w+) is in the bench module -->$`)

// TestMigratingBeforeBlocksHaveTwins checks every block of the guide marked
// as having its twin in this module against that twin.
func TestMigratingBeforeBlocksHaveTwins(t *testing.T) {
	blocks := benchMarkedBlocks(t, migratingDoc)
	if len(blocks) == 0 {
		t.Fatalf("%s has no block whose twin is in the bench module", migratingDoc)
	}
	twins := benchTestFunctionBodies(t)
	for name, block := range blocks {
		t.Run(name, func(t *testing.T) {
			body, ok := twins[name]
			if !ok {
				t.Fatalf("the guide names the twin %s, which is not a function of this package's tests", name)
			}
			var twin []string
			for _, line := range body {
				if _, doc, ok := strings.Cut(line, "// README: "); ok {
					line = doc
				}
				twin = append(twin, strings.Join(strings.Fields(line), " "))
			}
			next := 0
			for _, line := range block {
				for next < len(twin) && twin[next] != line {
					next++
				}
				if next >= len(twin) {
					t.Fatalf("line %q of the guide is not in %s (in this order)", line, name)
				}
				next++
			}
		})
	}
}

// benchMarkedBlocks returns the squeezed, non-blank lines of each Go block
// of the document whose marker names a twin in this module, by twin name.
func benchMarkedBlocks(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blocks := map[string][]string{}
	var pending, in string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case in != "":
			if line == "```" {
				in = ""
			} else if line != "" {
				blocks[in] = append(blocks[in], strings.Join(strings.Fields(line), " "))
			}
		case benchTwinMarker.MatchString(line):
			pending = benchTwinMarker.FindStringSubmatch(line)[1]
		case line == "```go" && pending != "":
			in, pending = pending, ""
			blocks[in] = []string{}
		case line != "":
			pending = ""
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// benchTestFunctionBodies returns the lines of the body of every function
// of this package's _test.go files, by name.
func benchTestFunctionBodies(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	bodies := map[string][]string{}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				body := src[fset.Position(fn.Body.Lbrace).Offset:fset.Position(fn.Body.Rbrace).Offset]
				bodies[fn.Name.Name] = strings.Split(string(body), "\n")
			}
		}
	}
	return bodies
}

// ErrNotFound is the guide's error for an item that does not exist.
var ErrNotFound = errors.New("not found")

// beforeCenkaltiV5 is the twin of the guide's cenkalti/backoff v5 fetch, with
// waits shortened a hundredfold: they are real time.
func beforeCenkaltiV5(ctx context.Context, url string, logger *log.Logger) (string, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = time.Millisecond  // README: b.InitialInterval = 100 * time.Millisecond
	b.MaxInterval = 20 * time.Millisecond // README: b.MaxInterval = 2 * time.Second
	body, err := backoff.Retry(ctx, func() (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return "", backoff.Permanent(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound:
			return "", backoff.Permanent(ErrNotFound)
		case resp.StatusCode == http.StatusTooManyRequests:
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			return "", backoff.RetryAfter(secs)
		case resp.StatusCode >= 500:
			return "", fmt.Errorf("server error: %s", resp.Status)
		}
		data, err := io.ReadAll(resp.Body)
		return string(data), err
	},
		backoff.WithBackOff(b),
		backoff.WithMaxTries(5),
		backoff.WithNotify(func(err error, d time.Duration) {
			logger.Printf("retrying in %v: %v", d, err) // README: log.Printf("retrying in %v: %v", d, err)
		}))
	switch {
	case err == ErrNotFound:
		return "", nil
	case err != nil:
		return "", fmt.Errorf("fetch %s: %w", url, err)
	}
	return body, nil
}

// scriptedServer answers the i-th request with replies[i] (a status), and
// 200 "hello" once the script ends.
func scriptedServer(t *testing.T, replies ...int) (*httptest.Server, func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		if i >= len(replies) {
			_, _ = io.WriteString(w, "hello")
			return
		}
		w.WriteHeader(replies[i])
	}))
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestBeforeCenkaltiV5 runs the guide's v5 fetch in the scenarios that the
// port's test runs with ours: the same bodies and request counts, and the
// two differences the guide names for this program: a 429 without
// Retry-After retried at once, and the last error returned as is after 5
// failures.
func TestBeforeCenkaltiV5(t *testing.T) {
	tests := []struct {
		name     string
		replies  []int
		requests int
		body     string
		err      string // "" for none; URL stands for the server's
		logged   []string
	}{
		{"two 503s, then 200", []int{503, 503}, 3, "hello", "", nil},
		{"404 ends at once", []int{404}, 1, "", "", nil},
		{"429 without Retry-After retries at once", []int{429}, 2, "hello", "",
			[]string{"retrying in 0s: retry after 0s"}},
		{"503 until the attempts run out", []int{503, 503, 503, 503, 503, 503}, 5, "",
			"fetch URL: server error: 503 Service Unavailable", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, requests := scriptedServer(t, tt.replies...)
			var logged strings.Builder
			body, err := beforeCenkaltiV5(context.Background(), srv.URL, log.New(&logged, "", 0))
			want := strings.ReplaceAll(tt.err, "URL", srv.URL)
			if (err == nil) != (want == "") || (err != nil && err.Error() != want) {
				t.Errorf("err = %v, want %q", err, want)
			}
			if body != tt.body || requests() != tt.requests {
				t.Errorf("body %q after %d requests, want %q after %d", body, requests(), tt.body, tt.requests)
			}
			var lines []string
			if text := strings.TrimSpace(logged.String()); text != "" {
				lines = strings.Split(text, "\n")
			}
			if len(lines) != tt.requests-1 {
				t.Errorf("%d retries logged, want %d:\n%s", len(lines), tt.requests-1, logged.String())
			}
			for i, want := range tt.logged {
				if lines[i] != want {
					t.Errorf("log line %d = %q, want %q", i, lines[i], want)
				}
			}
		})
	}
}

// errV5 is an operation's failure in the checks of cenkalti/backoff v5.
var errV5 = errors.New("unavailable")

// fastV5 is a backoff without jitter whose waits are a millisecond or two.
func fastV5() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: time.Millisecond, Multiplier: 2, MaxInterval: 2 * time.Millisecond}
}

// TestCenkaltiV5AsTheGuideSays checks, row by row, what the guide's v5 table
// says cenkalti/backoff v5 does.
func TestCenkaltiV5AsTheGuideSays(t *testing.T) {
	ctx := context.Background()
	t.Run("a Permanent error: the error inside, without what wraps it", func(t *testing.T) {
		_, err := backoff.Retry(ctx, func() (int, error) { return 0, backoff.Permanent(ErrNotFound) })
		if err != ErrNotFound {
			t.Errorf("err = %#v, want ErrNotFound itself", err)
		}
		_, err = backoff.Retry(ctx, func() (int, error) { return 0, fmt.Errorf("get: %w", backoff.Permanent(ErrNotFound)) })
		if err != ErrNotFound {
			t.Errorf("wrapped: err = %v, want ErrNotFound itself", err)
		}
		_, err = backoff.Retry(ctx, func() (int, error) { return 0, backoff.Permanent(ErrNotFound) }, backoff.WithMaxTries(1))
		var p *backoff.PermanentError
		if !errors.As(err, &p) || err == ErrNotFound {
			t.Errorf("on the last allowed try: err = %#v, want the *PermanentError", err)
		}
	})
	t.Run("the attempts run out: the last error itself", func(t *testing.T) {
		calls := 0
		v, err := backoff.Retry(ctx, func() (int, error) { calls++; return calls, errV5 },
			backoff.WithBackOff(fastV5()), backoff.WithMaxTries(3))
		if err != errV5 || calls != 3 {
			t.Errorf("err = %v after %d calls, want errV5 after 3", err, calls)
		}
		if v != 3 {
			t.Errorf("value = %d, want 3: the last failed attempt's", v)
		}
	})
	t.Run("jitter and defaults: 500 ms ±50%, ×1.5, at most 60 s", func(t *testing.T) {
		b := backoff.NewExponentialBackOff()
		if b.InitialInterval != 500*time.Millisecond || b.Multiplier != 1.5 || b.MaxInterval != time.Minute || b.RandomizationFactor != 0.5 {
			t.Fatalf("defaults %+v", *b)
		}
		below := 0
		for range 200 {
			b.Reset()
			d := b.NextBackOff()
			if d < 250*time.Millisecond || d > 750*time.Millisecond {
				t.Fatalf("first wait %v outside 500ms ±50%%", d)
			}
			if d < 500*time.Millisecond {
				below++
			}
		}
		if below < 50 {
			t.Errorf("%d of 200 first waits below 500ms: the jitter should shorten waits too", below)
		}
	})
	t.Run("elapsed time: 15 minutes by default", func(t *testing.T) {
		if backoff.DefaultMaxElapsedTime != 15*time.Minute {
			t.Fatalf("DefaultMaxElapsedTime = %v", backoff.DefaultMaxElapsedTime)
		}
		// A first wait of 16 minutes would end past the limit: Retry gives
		// up at once, without waiting.
		calls := 0
		_, err := backoff.Retry(ctx, func() (int, error) { calls++; return 0, errV5 },
			backoff.WithBackOff(backoff.NewConstantBackOff(16*time.Minute)))
		if err != errV5 || calls != 1 {
			t.Errorf("err = %v after %d calls, want errV5 after 1", err, calls)
		}
	})
	t.Run("RetryAfter: 0 retries at once, then the backoff restarts", func(t *testing.T) {
		results := []error{errV5, errV5, backoff.RetryAfter(0), errV5}
		calls := 0
		var waits []time.Duration
		_, err := backoff.Retry(ctx, func() (int, error) {
			calls++
			if calls <= len(results) {
				return 0, results[calls-1]
			}
			return 0, nil
		}, backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: time.Millisecond, Multiplier: 2, MaxInterval: time.Second}),
			backoff.WithNotify(func(_ error, d time.Duration) { waits = append(waits, d) }))
		want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 0, time.Millisecond}
		if err != nil || fmt.Sprint(waits) != fmt.Sprint(want) {
			t.Errorf("waits %v (err %v), want %v", waits, err, want)
		}
	})
	t.Run("giving up after a RetryAfter returns it", func(t *testing.T) {
		_, err := backoff.Retry(ctx, func() (int, error) { return 0, backoff.RetryAfter(0) }, backoff.WithMaxTries(2))
		var ra *backoff.RetryAfterError
		if !errors.As(err, &ra) || err.Error() != "retry after 0s" {
			t.Errorf("err = %v, want the *RetryAfterError", err)
		}
	})
	t.Run("ctx already done: op runs once, the cause alone is returned", func(t *testing.T) {
		cctx, cancel := context.WithCancelCause(ctx)
		errShutdown := errors.New("shutting down")
		cancel(errShutdown)
		calls := 0
		_, err := backoff.Retry(cctx, func() (int, error) { calls++; return 0, errV5 })
		if calls != 1 || err != errShutdown {
			t.Errorf("%d calls, err %v; want 1 call and the cause alone", calls, err)
		}
	})
	t.Run("ctx ends during a wait: the cause alone, the last error lost", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		_, err := backoff.Retry(cctx, func() (int, error) { return 0, errV5 },
			backoff.WithBackOff(backoff.NewConstantBackOff(10*time.Minute)),
			backoff.WithNotify(func(error, time.Duration) { cancel() }))
		if err != context.Canceled || errors.Is(err, errV5) {
			t.Errorf("err = %v, want context.Canceled alone", err)
		}
	})
	t.Run("a Multiplier below 1 shrinks the waits", func(t *testing.T) {
		b := &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, Multiplier: 0.5, MaxInterval: time.Second}
		b.Reset()
		if d1, d2 := b.NextBackOff(), b.NextBackOff(); d1 != 100*time.Millisecond || d2 != 50*time.Millisecond {
			t.Errorf("waits %v, %v; want 100ms, 50ms", d1, d2)
		}
	})
	t.Run("a ZeroBackOff retries at once", func(t *testing.T) {
		calls := 0
		start := time.Now()
		_, err := backoff.Retry(ctx, func() (int, error) { calls++; return 0, errV5 },
			backoff.WithBackOff(&backoff.ZeroBackOff{}), backoff.WithMaxTries(1000))
		if err != errV5 || calls != 1000 || time.Since(start) > 10*time.Second {
			t.Errorf("%d calls in %v, err %v", calls, time.Since(start), err)
		}
	})
	t.Run("notify: not for the attempt given up after", func(t *testing.T) {
		notes := 0
		_, _ = backoff.Retry(ctx, func() (int, error) { return 0, errV5 },
			backoff.WithBackOff(fastV5()), backoff.WithMaxTries(3),
			backoff.WithNotify(func(error, time.Duration) { notes++ }))
		if notes != 2 {
			t.Errorf("notify called %d times for 3 attempts, want 2", notes)
		}
	})
}

// deployment and deploymentStore stand for a Kubernetes object and its
// client: Update fails with a conflict while conflicts last.
type deployment struct{ Replicas int }

type deploymentStore struct {
	conflicts int
	saved     deployment
}

func (s *deploymentStore) Get(context.Context, string) (*deployment, error) {
	d := s.saved
	return &d, nil
}

func (s *deploymentStore) Update(_ context.Context, d *deployment) error {
	if s.conflicts > 0 {
		s.conflicts--
		return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("modified"))
	}
	s.saved = *d
	return nil
}

// beforeClientGo is the twin of the guide's client-go RetryOnConflict.
func beforeClientGo(ctx context.Context, store *deploymentStore, name string, replicas int) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := store.Get(ctx, name)
		if err != nil {
			return err
		}
		d.Replicas = replicas
		return store.Update(ctx, d)
	})
	return err
}

// TestClientGoAsTheGuideSays checks the guide's client-go rows: the
// example retries conflicts and returns the conflict itself when they
// outlast DefaultRetry; OnError panics on a nil retriable; DefaultBackoff's
// numbers.
func TestClientGoAsTheGuideSays(t *testing.T) {
	store := &deploymentStore{conflicts: 2}
	if err := beforeClientGo(context.Background(), store, "web", 3); err != nil || store.saved.Replicas != 3 {
		t.Errorf("err %v, saved %+v", err, store.saved)
	}
	store = &deploymentStore{conflicts: 10}
	if err := beforeClientGo(context.Background(), store, "web", 3); !apierrors.IsConflict(err) {
		t.Errorf("err = %v, want the conflict itself", err)
	}
	if store.conflicts != 5 {
		t.Errorf("%d attempts, want DefaultRetry's 5", 10-store.conflicts)
	}

	func() {
		defer func() {
			if recover() == nil {
				t.Error("OnError with a nil retriable did not panic on an error")
			}
		}()
		_ = retry.OnError(retry.DefaultRetry, nil, func() error { return errV5 })
	}()

	want := wait.Backoff{Steps: 4, Duration: 10 * time.Millisecond, Factor: 5, Jitter: 0.1}
	if retry.DefaultBackoff != want {
		t.Errorf("DefaultBackoff = %+v, want %+v", retry.DefaultBackoff, want)
	}
}

// beforeRetryablehttp is the twin of the guide's go-retryablehttp GET, with
// waits shortened a hundredfold: they are real time.
func beforeRetryablehttp(url string) (*http.Response, error) {
	client := retryablehttp.NewClient()
	client.RetryMax = 3
	client.RetryWaitMin = time.Millisecond      // README: client.RetryWaitMin = 100 * time.Millisecond
	client.RetryWaitMax = 20 * time.Millisecond // README: client.RetryWaitMax = 2 * time.Second
	client.Logger = nil
	resp, err := client.StandardClient().Get(url)
	return resp, err
}

// TestBeforeRetryablehttp runs the guide's go-retryablehttp GET: 500 and
// 503 are retried, 404 and 501 returned at once, and when the 4 attempts
// (RetryMax 3) run out on a status, an error comes back and no response.
func TestBeforeRetryablehttp(t *testing.T) {
	tests := []struct {
		name     string
		replies  []int
		requests int
		status   int    // 0 for no response
		err      string // "" for none; URL stands for the server's
	}{
		{"a 500 and a 503, then 200", []int{500, 503}, 3, 200, ""},
		{"429 retried", []int{429}, 2, 200, ""},
		{"404 returned at once", []int{404}, 1, 404, ""},
		{"501 returned at once", []int{501}, 1, 501, ""},
		{"503 until the attempts run out", []int{503, 503, 503, 503, 503}, 4, 0,
			`Get "URL": GET URL giving up after 4 attempt(s)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, requests := scriptedServer(t, tt.replies...)
			resp, err := beforeRetryablehttp(srv.URL)
			status := 0
			if resp != nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			want := strings.ReplaceAll(tt.err, "URL", srv.URL)
			if (err == nil) != (want == "") || (err != nil && err.Error() != want) {
				t.Errorf("err = %v, want %q", err, want)
			}
			if status != tt.status || requests() != tt.requests {
				t.Errorf("status %d after %d requests, want %d after %d", status, requests(), tt.status, tt.requests)
			}
		})
	}
}

// fastRetryablehttp is go-retryablehttp's default client, silent, with waits
// of a millisecond or two.
func fastRetryablehttp() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 2*time.Millisecond
	return c
}

// TestRetryablehttpAsTheGuideSays checks, row by row, what the guide's
// table says go-retryablehttp does.
func TestRetryablehttpAsTheGuideSays(t *testing.T) {
	ctx := context.Background()
	t.Run("defaults: 5 attempts, waits 1, 2, 4, 8 s doubling up to 30 s, no jitter", func(t *testing.T) {
		c := retryablehttp.NewClient()
		if c.RetryMax != 4 || c.RetryWaitMin != time.Second || c.RetryWaitMax != 30*time.Second {
			t.Fatalf("RetryMax %d, RetryWaitMin %v, RetryWaitMax %v", c.RetryMax, c.RetryWaitMin, c.RetryWaitMax)
		}
		var waits []time.Duration
		for i := range 6 {
			waits = append(waits, c.Backoff(c.RetryWaitMin, c.RetryWaitMax, i, nil))
		}
		if got := fmt.Sprint(waits); got != "[1s 2s 4s 8s 16s 30s]" {
			t.Errorf("waits %s, want [1s 2s 4s 8s 16s 30s]", got)
		}
	})
	t.Run("statuses retried: 429, every 5xx but 501, and 0", func(t *testing.T) {
		for status, want := range map[int]bool{0: true, 200: false, 404: false, 429: true, 500: true, 501: false, 502: true, 503: true, 504: true, 599: true} {
			if got, _ := retryablehttp.DefaultRetryPolicy(ctx, &http.Response{StatusCode: status}, nil); got != want {
				t.Errorf("status %d retried: %v, want %v", status, got, want)
			}
		}
	})
	t.Run("a POST is retried, its body read whole and replayed", func(t *testing.T) {
		var mu sync.Mutex
		var bodies []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			data, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, r.Method+" "+string(data))
			n := len(bodies)
			mu.Unlock()
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}))
		defer srv.Close()
		// io.MultiReader hides the strings.Reader: the body cannot be rewound.
		resp, err := fastRetryablehttp().StandardClient().Post(srv.URL, "text/plain", io.MultiReader(strings.NewReader("payload")))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(bodies) != "[POST payload POST payload]" || resp.StatusCode != 200 {
			t.Errorf("status %d after %q, want 200 after the POST twice", resp.StatusCode, bodies)
		}
	})
	t.Run("the attempts run out on a status: an error, no response", func(t *testing.T) {
		srv, requests := scriptedServer(t, 503, 503, 503, 503, 503, 503)
		resp, err := fastRetryablehttp().Get(srv.URL)
		if resp != nil || err == nil || !strings.Contains(err.Error(), "giving up after 5 attempt(s)") || requests() != 5 {
			t.Errorf("resp %v, err %v after %d requests; want no response and giving up after 5", resp, err, requests())
		}
	})
	t.Run("the attempts run out on a connection error: an error wrapping it", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, err := fastRetryablehttp().Get(srv.URL)
		var op *net.OpError
		if !errors.As(err, &op) || !strings.Contains(err.Error(), "giving up after 5 attempt(s)") {
			t.Errorf("err = %v, want one wrapping the *net.OpError after 5 attempts", err)
		}
	})
	t.Run("Retry-After: on 429 and 503, without bound", func(t *testing.T) {
		for status, want := range map[int]time.Duration{429: time.Hour, 503: time.Hour, 500: time.Second} {
			resp := &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {"3600"}}}
			if got := retryablehttp.DefaultBackoff(time.Second, 30*time.Second, 0, resp); got != want {
				t.Errorf("status %d with Retry-After: 3600: wait %v, want %v", status, got, want)
			}
		}
	})
	t.Run("cancelled during a wait: ctx.Err(), no response", func(t *testing.T) {
		srv, _ := scriptedServer(t, 503)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		c := retryablehttp.NewClient()
		c.Logger = nil
		c.RetryWaitMin, c.RetryWaitMax = 10*time.Minute, 10*time.Minute
		c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			ok, err := retryablehttp.DefaultRetryPolicy(ctx, resp, err)
			cancel()
			return ok, err
		}
		req, err := retryablehttp.NewRequestWithContext(cctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if resp != nil || err != context.Canceled {
			t.Errorf("resp %v, err %v; want no response and context.Canceled", resp, err)
		}
	})
	t.Run("logging: a [DEBUG] line per request and per retry, by default", func(t *testing.T) {
		if retryablehttp.NewClient().Logger == nil {
			t.Fatal("NewClient's Logger is nil")
		}
		srv, _ := scriptedServer(t, 503)
		var logged strings.Builder
		c := fastRetryablehttp()
		c.Logger = log.New(&logged, "", 0)
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if n := strings.Count(logged.String(), "[DEBUG] GET "); n != 2 {
			t.Errorf("%d [DEBUG] lines, want 2:\n%s", n, logged.String())
		}
	})
	t.Run("PassthroughErrorHandler: the last response and a nil error", func(t *testing.T) {
		srv, _ := scriptedServer(t, 503, 503, 503, 503, 503, 503)
		c := fastRetryablehttp()
		c.ErrorHandler = retryablehttp.PassthroughErrorHandler
		resp, err := c.Get(srv.URL)
		if err != nil || resp == nil || resp.StatusCode != 503 {
			t.Fatalf("resp %v, err %v; want the 503 and no error", resp, err)
		}
		resp.Body.Close()
	})
}
