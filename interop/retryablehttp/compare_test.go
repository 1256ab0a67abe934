package retryablehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Both clients make at most 3 attempts, waiting 100ms then 200ms when the
// server gives no hint.
var schedule = backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Steps: 3}

// recorder collects the waits a client announces. With onWait set, it is
// called at the wait instead of skipping it (the cancellation scenario).
type recorder struct {
	mu     sync.Mutex
	waits  []time.Duration
	onWait func()
}

func (r *recorder) record(d time.Duration) (skip bool) {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	if r.onWait != nil {
		r.onWait()
		return false
	}
	return true
}

// A contender builds an http.Client that retries over base and reports its
// waits to rec without spending them.
type contender struct {
	name      string
	newClient func(base http.RoundTripper, rec *recorder) *http.Client
}

var contenders = []contender{
	{"httpretry", func(base http.RoundTripper, rec *recorder) *http.Client {
		clock := testclock.NewFakeClock(time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC))
		return &http.Client{Transport: httpretry.NewTransport(base, schedule,
			backoff.WithClock(clock),
			backoff.WithNotify(func(_ int, _ error, next time.Duration) {
				if rec.record(next) {
					clock.Step(next)
				}
			}))}
	}},
	{"go-retryablehttp", func(base http.RoundTripper, rec *recorder) *http.Client {
		c := retryablehttp.NewClient()
		c.HTTPClient = &http.Client{Transport: base}
		c.Logger = nil
		c.RetryMax = schedule.Steps - 1
		c.RetryWaitMin = schedule.Duration
		c.RetryWaitMax = 30 * time.Second
		c.Backoff = func(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
			d := retryablehttp.DefaultBackoff(lo, hi, attempt, resp)
			if rec.record(d) {
				return 0
			}
			return d
		}
		return c.StandardClient()
	}},
}

// outcome is what one request through a contender came to.
type outcome struct {
	attempts int
	waits    []time.Duration
	resp     *http.Response
	body     string // of resp, read
	err      error
	conns    int      // connections the server accepted
	url      string   // the server's
	bodies   []string // request bodies the server received
}

// verdict says whether a contender did what the scenario expects.
type verdict int

const (
	right verdict = iota
	wrong
	byDesign // a choice, not a defect: told apart in the table
)

func (v verdict) mark() string {
	return [...]string{"✅", "❌", "➖"}[v]
}

// scenario is one request against one scripted server.
type scenario struct {
	name     string
	answers  []answer // the server's answers in turn, the last repeated
	closed   bool     // nothing listens: connection refused
	newReq   func(url string) *http.Request
	cancel   bool // cancel the request's context when the client starts waiting
	expected string
	judge    func(o outcome) (string, verdict)
}

type answer struct {
	status int
	header func() http.Header // evaluated when the server answers
	body   string
}

func get(url string) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	return req
}

func hdr(kv ...string) func() http.Header {
	return func() http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
}

// httpDate returns a header function whose Date is the real time shifted by
// skew, and whose Retry-After is that Date plus after, in HTTP-date form.
func httpDate(skew, after time.Duration) func() http.Header {
	return func() http.Header {
		date := time.Now().Add(skew).UTC().Truncate(time.Second)
		h := http.Header{}
		h.Set("Date", date.Format(http.TimeFormat))
		h.Set("Retry-After", date.Add(after).Format(http.TimeFormat))
		return h
	}
}

func waitsString(ws []time.Duration) string {
	if len(ws) == 0 {
		return "no wait"
	}
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.String()
	}
	return "waits " + strings.Join(parts, ", ")
}

func attemptsString(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

var (
	busy2   = answer{status: 503, header: hdr("Retry-After", "2"), body: "busy"}
	okay    = answer{status: 200, body: "ok"}
	bigBusy = func(size int) answer { return answer{status: 503, body: strings.Repeat("x", size)} }
)

// firstWaitJudge expects a retry after the given first wait, within tol
// either way (a client that measures an HTTP-date against its own clock
// loses the time between the server's Date and its reading of the clock).
func firstWaitJudge(want, tol time.Duration, describe string) func(o outcome) (string, verdict) {
	return func(o outcome) (string, verdict) {
		if o.err != nil || len(o.waits) == 0 {
			return fmt.Sprintf("%s, %v", attemptsString(o.attempts), o.err), wrong
		}
		w := o.waits[0]
		if w >= want-tol && w <= want+tol {
			return "waits " + describe, right
		}
		return fmt.Sprintf("waits %v", w), wrong
	}
}

var scenarios = []scenario{
	{
		name:     "503 with `Retry-After: 2`, twice, then 200",
		answers:  []answer{busy2, busy2, okay},
		newReq:   get,
		expected: "3 attempts, waits 2s, 2s, 200",
		judge: func(o outcome) (string, verdict) {
			s := fmt.Sprintf("%s, %s, %d", attemptsString(o.attempts), waitsString(o.waits), statusOf(o))
			return s, verdictIf(s == "3 attempts, waits 2s, 2s, 200")
		},
	},
	{
		name:     "429 with `Retry-After` as an HTTP-date 90 s after the response's `Date`",
		answers:  []answer{{status: 429, header: httpDate(0, 90*time.Second)}, okay},
		newReq:   get,
		expected: "waits 90s",
		judge:    firstWaitJudge(90*time.Second, 2*time.Second, "90s (±2s)"),
	},
	{
		name:     "the same, with the client's clock 1 h ahead of the server's",
		answers:  []answer{{status: 429, header: httpDate(-time.Hour, 90*time.Second)}, okay},
		newReq:   get,
		expected: "waits 90s",
		judge:    firstWaitJudge(90*time.Second, 2*time.Second, "90s (±2s)"),
	},
	{
		name:     "503 with `Retry-After: -5`",
		answers:  []answer{{status: 503, header: hdr("Retry-After", "-5")}, okay},
		newReq:   get,
		expected: "ignored: the schedule's 100ms",
		judge:    firstWaitJudge(100*time.Millisecond, 0, "100ms"),
	},
	{
		name:     "503 with `Retry-After: 3600`",
		answers:  []answer{{status: 503, header: hdr("Retry-After", "3600")}, okay},
		newReq:   get,
		expected: "bounded by the client (5m by default)",
		judge: func(o outcome) (string, verdict) {
			if len(o.waits) == 0 {
				return "no retry", wrong
			}
			return waitsString(o.waits[:1]), verdictIf(o.waits[0] <= backoff.DefaultMaxRetryAfter)
		},
	},
	{
		name:     "503 with `Retry-After: 99999999999` (3,170 years)",
		answers:  []answer{{status: 503, header: hdr("Retry-After", "99999999999")}, okay},
		newReq:   get,
		expected: "ignored or bounded",
		judge: func(o outcome) (string, verdict) {
			if len(o.waits) == 0 {
				return "no retry", wrong
			}
			w := o.waits[0]
			return waitsString(o.waits[:1]), verdictIf(w > 0 && w <= backoff.DefaultMaxRetryAfter)
		},
	},
	{
		name:     "400",
		answers:  []answer{{status: 400}},
		newReq:   get,
		expected: "1 attempt, 400",
		judge: func(o outcome) (string, verdict) {
			s := fmt.Sprintf("%s, %d", attemptsString(o.attempts), statusOf(o))
			return s, verdictIf(s == "1 attempt, 400")
		},
	},
	{
		name:     "500",
		answers:  []answer{{status: 500}},
		newReq:   get,
		expected: "a choice: httpretry retries 500 only when asked",
		judge: func(o outcome) (string, verdict) {
			return fmt.Sprintf("%s, %s", attemptsString(o.attempts), statusOrError(o)), byDesign
		},
	},
	{
		name:    "POST without `Idempotency-Key`, 503",
		answers: []answer{busy2},
		newReq: func(url string) *http.Request {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"n":1}`))
			return req
		},
		expected: "1 attempt (RFC 9110 §9.2.2)",
		judge: func(o outcome) (string, verdict) {
			return attemptsString(o.attempts), verdictIf(o.attempts == 1)
		},
	},
	{
		name:    "POST with `Idempotency-Key` and a body, 503 twice, then 200",
		answers: []answer{busy2, busy2, okay},
		newReq: func(url string) *http.Request {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"n":1}`))
			req.Header.Set("Idempotency-Key", "k-1")
			return req
		},
		expected: "3 attempts, the same body each time",
		judge: func(o outcome) (string, verdict) {
			same := len(o.bodies) == 3 && o.bodies[0] == `{"n":1}` && o.bodies[1] == o.bodies[0] && o.bodies[2] == o.bodies[0]
			s := attemptsString(o.attempts)
			if same {
				s += ", same body"
			}
			return s, verdictIf(same && statusOf(o) == 200)
		},
	},
	{
		name:     "connection refused",
		closed:   true,
		newReq:   get,
		expected: "3 attempts, then an error that wraps ECONNREFUSED",
		judge: func(o outcome) (string, verdict) {
			wraps := errors.Is(o.err, syscall.ECONNREFUSED)
			s := attemptsString(o.attempts)
			if wraps {
				s += ", error wraps ECONNREFUSED"
			} else {
				s += ", error does not wrap ECONNREFUSED"
			}
			return s, verdictIf(o.attempts == 3 && wraps)
		},
	},
	{
		name:     "request's context cancelled during the wait",
		answers:  []answer{{status: 503, header: hdr("Retry-After", "60")}},
		newReq:   get,
		cancel:   true,
		expected: "returns at once, `errors.Is(err, context.Canceled)`",
		judge: func(o outcome) (string, verdict) {
			is := errors.Is(o.err, context.Canceled)
			return fmt.Sprintf("%s, errors.Is Canceled: %v", attemptsString(o.attempts), is),
				verdictIf(is && o.attempts == 1)
		},
	},
	{
		name:     "503 on every attempt",
		answers:  []answer{{status: 503, body: "busy"}},
		newReq:   get,
		expected: "3 attempts, then the 503 and its body, nil error (as `http.Client`)",
		judge: func(o outcome) (string, verdict) {
			s := fmt.Sprintf("%s, %s", attemptsString(o.attempts), statusOrError(o))
			return s, verdictIf(o.attempts == 3 && o.err == nil && statusOf(o) == 503 && o.body == "busy")
		},
	},
	{
		name:     "503 with a 2 KiB body, twice, then 200",
		answers:  []answer{bigBusy(2 << 10), bigBusy(2 << 10), okay},
		newReq:   get,
		expected: "1 connection for the 3 attempts",
		judge:    connectionsJudge,
	},
	{
		name:     "503 with a 16 KiB body, twice, then 200",
		answers:  []answer{bigBusy(16 << 10), bigBusy(16 << 10), okay},
		newReq:   get,
		expected: "1 connection for the 3 attempts",
		judge:    connectionsJudge,
	},
	{
		name:    "PUT with a body that cannot be rewound (no `GetBody`), 503",
		answers: []answer{busy2},
		newReq: func(url string) *http.Request {
			req, _ := http.NewRequest(http.MethodPut, url, io.MultiReader(strings.NewReader("stream")))
			return req
		},
		expected: "a choice: httpretry sends a stream once; go-retryablehttp reads all of it into memory first",
		judge: func(o outcome) (string, verdict) {
			return attemptsString(o.attempts), byDesign
		},
	},
}

func connectionsJudge(o outcome) (string, verdict) {
	s := fmt.Sprintf("%d connection(s), %d", o.conns, statusOf(o))
	return s, verdictIf(o.conns == 1 && statusOf(o) == 200)
}

func verdictIf(ok bool) verdict {
	if ok {
		return right
	}
	return wrong
}

func statusOf(o outcome) int {
	if o.resp == nil {
		return 0
	}
	return o.resp.StatusCode
}

// statusOrError describes the response's status, or the error, with the
// test server's address (which changes from run to run) replaced by URL.
func statusOrError(o outcome) string {
	if o.err != nil {
		return "error `" + strings.ReplaceAll(o.err.Error(), o.url, "URL") + "`"
	}
	return fmt.Sprint(o.resp.StatusCode)
}

// run sends the scenario's request through the contender, against a fresh
// server, and reports what happened.
func run(t *testing.T, sc scenario, c contender) outcome {
	t.Helper()
	var (
		mu     sync.Mutex
		calls  int
		bodies []string
		conns  atomic.Int32
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read, _ := io.ReadAll(r.Body)
		mu.Lock()
		a := sc.answers[min(calls, len(sc.answers)-1)]
		calls++
		bodies = append(bodies, string(read))
		mu.Unlock()
		if a.header != nil {
			for k, v := range a.header() {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	defer srv.Close()
	url := srv.URL
	if sc.closed {
		srv.Close()
	}

	m := &meter{base: base}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{}
	if sc.cancel {
		rec.onWait = cancel
	}
	client := c.newClient(m, rec)
	req := sc.newReq(url).WithContext(ctx)
	resp, err := client.Do(req)
	o := outcome{resp: resp, err: err, url: url}
	if resp != nil {
		read, rerr := io.ReadAll(resp.Body)
		require.NoError(t, rerr)
		resp.Body.Close()
		o.body = string(read)
	}
	srv.Close()
	mu.Lock()
	defer mu.Unlock()
	o.attempts = int(m.attempts.Load())
	o.bodies = bodies
	o.conns = int(conns.Load())
	rec.mu.Lock()
	o.waits = rec.waits
	rec.mu.Unlock()
	return o
}

// meter counts the attempts that reach the network.
type meter struct {
	base     http.RoundTripper
	attempts atomic.Int32
}

func (m *meter) RoundTrip(req *http.Request) (*http.Response, error) {
	m.attempts.Add(1)
	return m.base.RoundTrip(req)
}

// want is what each contender is expected to get right, scenario by
// scenario, as measured with go-retryablehttp v0.7.8. A change in either
// library shows here first.
var want = map[string][]verdict{
	"httpretry":        {right, right, right, right, right, right, right, byDesign, right, right, right, right, right, right, right, byDesign},
	"go-retryablehttp": {right, right, wrong, right, wrong, wrong, right, byDesign, wrong, right, right, right, wrong, right, wrong, byDesign},
}

// TestCompare runs every scenario through both clients, checks each verdict
// against want, and checks that httpretry/README.md carries the table the
// run produced.
func TestCompare(t *testing.T) {
	var table strings.Builder
	table.WriteString("| scenario | expected | httpretry | go-retryablehttp |\n| --- | --- | --- | --- |\n")
	for i, sc := range scenarios {
		cells := make([]string, len(contenders))
		for j, c := range contenders {
			o := run(t, sc, c)
			summary, v := sc.judge(o)
			assert.Equal(t, want[c.name][i].mark(), v.mark(), "%s: %s: %s", c.name, sc.name, summary)
			cells[j] = v.mark() + " " + summary
		}
		fmt.Fprintf(&table, "| %s | %s | %s | %s |\n", sc.name, sc.expected, cells[0], cells[1])
	}
	t.Logf("measured:\n%s", table.String())
	readme, err := os.ReadFile("../../httpretry/README.md")
	require.NoError(t, err)
	assert.Contains(t, string(readme), table.String(), "httpretry/README.md does not carry the measured table (see the log)")
}
