package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
	"github.com/retrykit/backoff/httpretry"
)

// The "after" blocks of docs/migrating.md, each ported from the "before"
// block beside it, and tests of what the guide says each does.

// migStart is the time the fake clocks of these tests start at.
var migStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// migLog records what the ported code logs, instead of log.Printf.
type migLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *migLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// migServer answers the i-th request with replies[i] (a status, and a
// Retry-After header after a space, such as "429 2"), and 200 "hello"
// once the script ends.
type migServer struct {
	*httptest.Server
	mu       sync.Mutex
	replies  []string
	requests int
}

func newMigServer(t *testing.T, replies ...string) *migServer {
	t.Helper()
	s := &migServer{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		i := s.requests
		s.requests++
		s.mu.Unlock()
		if i >= len(s.replies) {
			_, _ = io.WriteString(w, "hello")
			return
		}
		status, hint, _ := strings.Cut(s.replies[i], " ")
		if hint != "" {
			w.Header().Set("Retry-After", hint)
		}
		var code int
		_, _ = fmt.Sscan(status, &code)
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *migServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// ErrNotFound is the guide's error for an item that does not exist.
var ErrNotFound = errors.New("not found")

// afterCenkaltiV5 is the twin of the guide's port of a cenkalti/backoff v5
// fetch.
func afterCenkaltiV5(ctx context.Context, url string, clk *backofftest.AutoStepClock, l *migLog) (string, error) {
	s := backoff.Schedule{
		Duration: 100 * time.Millisecond, // InitialInterval
		Factor:   1.5,                    // v5's default Multiplier
		Jitter:   0.5,                    // v5's default RandomizationFactor, with SymmetricJitter below
		Cap:      2 * time.Second,        // MaxInterval
		Steps:    5,                      // WithMaxTries(5)
	}
	body, err := backoff.RetryValue(ctx, s, func(ctx context.Context) (string, error) {
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
			d, _ := backoff.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
			return "", backoff.RetryAfter(d, errors.New(resp.Status))
		case resp.StatusCode >= 500:
			return "", fmt.Errorf("server error: %s", resp.Status)
		}
		data, err := io.ReadAll(resp.Body)
		return string(data), err
	},
		backoff.WithClock(clk),
		backoff.WithJitterKind(backoff.SymmetricJitter),
		backoff.WithMaxElapsedTime(15*time.Minute), // v5's default limit
		backoff.WithNotify(func(_ int, err error, d time.Duration) {
			l.logf("retrying in %v: %v", d, err) // README: log.Printf("retrying in %v: %v", d, err)
		}))
	switch {
	case errors.Is(err, ErrNotFound): // not ==: the error keeps its Permanent mark
		return "", nil
	case err != nil:
		return "", fmt.Errorf("fetch %s: %w", url, err)
	}
	return body, nil
}

// TestAfterCenkaltiV5 runs the guide's port against a scripted server and
// checks what the guide says of it: v5's timing (waits spread on both sides
// of 100 ms, 150 ms …), a 404 that ends at once, a Retry-After obeyed, a 429
// without one that waits the schedule's time (v5 retried at once), and a
// *RetryError after 5 failures (v5 returned the last error).
func TestAfterCenkaltiV5(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		replies  []string
		requests int
		body     string
		waits    [][2]time.Duration // each wait within [lo, hi)
		check    func(t *testing.T, err error)
	}{
		{"two 503s, then 200", []string{"503", "503"}, 3, "hello",
			[][2]time.Duration{{50 * ms, 150 * ms}, {75 * ms, 225 * ms}},
			func(t *testing.T, err error) { assert.NoError(t, err) }},
		{"404 ends at once", []string{"404"}, 1, "", nil,
			func(t *testing.T, err error) { assert.NoError(t, err) }},
		{"429 with Retry-After: 2", []string{"429 2"}, 2, "hello",
			[][2]time.Duration{{2 * time.Second, 2*time.Second + 1}},
			func(t *testing.T, err error) { assert.NoError(t, err) }},
		{"429 without Retry-After waits the schedule's time", []string{"429"}, 2, "hello",
			[][2]time.Duration{{50 * ms, 150 * ms}},
			func(t *testing.T, err error) { assert.NoError(t, err) }},
		{"503 until the attempts run out", []string{"503", "503", "503", "503", "503", "503"}, 5, "",
			[][2]time.Duration{{50 * ms, 150 * ms}, {75 * ms, 225 * ms}, {112 * ms, 338 * ms}, {168 * ms, 507 * ms}},
			func(t *testing.T, err error) {
				var re *backoff.RetryError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, 5, re.Attempts)
				assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
				assert.EqualError(t, re.Last, "server error: 503 Service Unavailable")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newMigServer(t, tt.replies...)
			clk := backofftest.NewAutoStepClock(migStart)
			var l migLog
			body, err := afterCenkaltiV5(context.Background(), srv.URL, clk, &l)
			tt.check(t, err)
			assert.Equal(t, tt.body, body)
			assert.Equal(t, tt.requests, srv.count())
			require.Len(t, l.lines, len(tt.waits))
			for i, w := range tt.waits {
				// "retrying in 123ms: …"
				text, _, _ := strings.Cut(strings.TrimPrefix(l.lines[i], "retrying in "), ": ")
				d, err := time.ParseDuration(text)
				require.NoError(t, err, l.lines[i])
				assert.True(t, d >= w[0] && d < w[1], "wait %d: %v, want within [%v, %v)", i+1, d, w[0], w[1])
			}
		})
	}
}

// afterCenkaltiV4 is the twin of the guide's port of a cenkalti/backoff v4
// RetryNotify.
func afterCenkaltiV4(ctx context.Context, send func(context.Context, string) error, msg string, clk *backofftest.AutoStepClock, l *migLog) error {
	s := backoff.Schedule{Duration: 200 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: time.Minute, Steps: 6}
	err := backoff.Retry(ctx, s, func(ctx context.Context) error {
		return send(ctx, msg)
	},
		backoff.WithClock(clk),
		backoff.WithJitterKind(backoff.SymmetricJitter),
		backoff.WithMaxElapsedTime(time.Minute),
		backoff.WithNotify(func(_ int, err error, d time.Duration) {
			l.logf("send failed, retrying in %v: %v", d, err) // README: log.Printf("send failed, retrying in %v: %v", d, err)
		}))
	return err
}

// TestAfterCenkaltiV4: Steps 6 makes the 6 attempts of WithMaxRetries(b, 5),
// and the first wait lies within ±50% of 200 ms.
func TestAfterCenkaltiV4(t *testing.T) {
	errDown := errors.New("smtp: connection refused")
	calls := 0
	var at []time.Duration
	clk := backofftest.NewAutoStepClock(migStart)
	var l migLog
	err := afterCenkaltiV4(context.Background(), func(context.Context, string) error {
		calls++
		at = append(at, clk.Since(migStart))
		return errDown
	}, "hello", clk, &l)
	assert.Equal(t, 6, calls)
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
	assert.ErrorIs(t, err, errDown)
	require.Len(t, l.lines, 5)
	assert.True(t, at[1] >= 100*time.Millisecond && at[1] < 300*time.Millisecond, "first wait %v", at[1])
}

// ErrNoSuchReport is the guide's error that is not worth retrying.
var ErrNoSuchReport = errors.New("no such report")

// afterAvast is the twin of the guide's port of an avast/retry-go
// DoWithData.
func afterAvast(ctx context.Context, fetchReport func(context.Context, string) ([]byte, error), id string, clk *backofftest.AutoStepClock, l *migLog) ([]byte, error) {
	s := backoff.Schedule{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.5, Cap: 5 * time.Second, Steps: 5}
	report, err := backoff.RetryValue(ctx, s, func(ctx context.Context) ([]byte, error) {
		return fetchReport(ctx, id)
	},
		backoff.WithClock(clk),
		backoff.WithRetryable(func(err error) bool { return !errors.Is(err, ErrNoSuchReport) }),
		backoff.WithNotify(func(attempt int, err error, _ time.Duration) { l.logf("attempt %d failed: %v", attempt, err) }), // README: backoff.WithNotify(func(attempt int, err error, _ time.Duration) { log.Printf("attempt %d failed: %v", attempt, err) }),
	)
	var re *backoff.RetryError
	if errors.As(err, &re) {
		err = re.Last // LastErrorOnly(true)
	}
	return report, err
}

// TestAfterAvast: the notify hook logs attempts 1 to 4 and the fifth error
// is returned as is (LastErrorOnly), the first wait is 200 ms plus up to
// 100 ms, and an error the predicate rejects ends the retries at once.
func TestAfterAvast(t *testing.T) {
	t.Run("attempts run out", func(t *testing.T) {
		clk := backofftest.NewAutoStepClock(migStart)
		var l migLog
		var at []time.Duration
		var last error
		_, err := afterAvast(context.Background(), func(context.Context, string) ([]byte, error) {
			at = append(at, clk.Since(migStart))
			last = fmt.Errorf("attempt %d: 503", len(at))
			return nil, last
		}, "r1", clk, &l)
		assert.Same(t, last, err, "the last error itself, as LastErrorOnly(true) returned it")
		assert.Len(t, at, 5)
		assert.Equal(t, []string{"attempt 1 failed: attempt 1: 503", "attempt 2 failed: attempt 2: 503",
			"attempt 3 failed: attempt 3: 503", "attempt 4 failed: attempt 4: 503"}, l.lines)
		assert.True(t, at[1] >= 200*time.Millisecond && at[1] < 300*time.Millisecond, "first wait %v", at[1])
	})
	t.Run("an error the predicate rejects", func(t *testing.T) {
		calls := 0
		_, err := afterAvast(context.Background(), func(context.Context, string) ([]byte, error) {
			calls++
			if calls == 2 {
				return nil, ErrNoSuchReport
			}
			return nil, errFlaky
		}, "r1", backofftest.NewAutoStepClock(migStart), &migLog{})
		assert.Equal(t, 2, calls)
		assert.Same(t, ErrNoSuchReport, err)
	})
	t.Run("success", func(t *testing.T) {
		report, err := afterAvast(context.Background(), func(context.Context, string) ([]byte, error) {
			return []byte("report"), nil
		}, "r1", backofftest.NewAutoStepClock(migStart), &migLog{})
		require.NoError(t, err)
		assert.Equal(t, "report", string(report))
	})
}

// afterSethvargo is the twin of the guide's port of a sethvargo/go-retry Do.
func afterSethvargo(ctx context.Context, ping func(context.Context) error, isTransient func(error) bool, clk *backofftest.AutoStepClock) error {
	s := backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 2 * time.Second, Steps: 5}
	err := backoff.Retry(ctx, s, func(ctx context.Context) error {
		err := ping(ctx)
		if err != nil && !isTransient(err) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithJitterKind(backoff.SymmetricJitter), backoff.WithClock(clk)) // README: }, backoff.WithJitterKind(backoff.SymmetricJitter))
	return err
}

// TestAfterSethvargo: a transient error is retried (5 attempts in all, the
// 1 + 4 retries of WithMaxRetries(4, b)), any other ends at once with its
// Permanent mark, and the waits spread ±10% around 100, 200, 400, 800 ms.
func TestAfterSethvargo(t *testing.T) {
	errBusy := errors.New("busy")
	errAuth := errors.New("bad password")
	isTransient := func(err error) bool { return errors.Is(err, errBusy) }
	run := func(results ...error) (int, []time.Duration, error) {
		clk := backofftest.NewAutoStepClock(migStart)
		var at []time.Duration
		err := afterSethvargo(context.Background(), func(context.Context) error {
			at = append(at, clk.Since(migStart))
			if len(at) <= len(results) {
				return results[len(at)-1]
			}
			return errBusy
		}, isTransient, clk)
		return len(at), at, err
	}
	calls, _, err := run(errBusy, errBusy, nil)
	assert.NoError(t, err)
	assert.Equal(t, 3, calls)

	calls, _, err = run(errBusy, errAuth)
	assert.Equal(t, 2, calls)
	assert.ErrorIs(t, err, errAuth)
	assert.True(t, backoff.IsPermanent(err))

	calls, at, err := run()
	assert.Equal(t, 5, calls)
	assert.ErrorIs(t, err, backoff.ErrAttemptsExhausted)
	for i, base := range []time.Duration{100, 200, 400, 800} {
		wait := at[i+1] - at[i]
		base *= time.Millisecond
		assert.True(t, wait >= base-base/10 && wait < base+base/10, "wait %d: %v around %v", i+1, wait, base)
	}
}

// afterRetryablehttp is the twin of the guide's port of a
// go-retryablehttp client.
func afterRetryablehttp(url string, opts ...backoff.Option) error {
	t := httpretry.NewTransport(nil, backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: 4}, opts...) // README: t := httpretry.NewTransport(nil, backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: 4})

	t.RetryInternalServerError = true // go-retryablehttp retries a 500
	client := &http.Client{Transport: t}
	resp, err := client.Get(url)
	if err == nil && resp.StatusCode >= 500 { // go-retryablehttp returned an error instead
		resp.Body.Close()
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && string(body) != "hello" {
		err = fmt.Errorf("unexpected body %q", body)
	}
	return err
}

// TestAfterRetryablehttp: 4 attempts (RetryMax 3), a 500 retried as
// go-retryablehttp does, and an error once they run out on a status.
func TestAfterRetryablehttp(t *testing.T) {
	srv := newMigServer(t, "500", "503")
	require.NoError(t, afterRetryablehttp(srv.URL, backoff.WithClock(backofftest.NewAutoStepClock(migStart))))
	assert.Equal(t, 3, srv.count())

	srv = newMigServer(t, "500", "500", "500", "500", "500")
	err := afterRetryablehttp(srv.URL, backoff.WithClock(backofftest.NewAutoStepClock(migStart)))
	assert.EqualError(t, err, "GET "+srv.URL+": 500 Internal Server Error")
	assert.Equal(t, 4, srv.count())
}

// migDeployment and migStore stand for a Kubernetes object and its client.
type migDeployment struct{ Replicas int }

type migStore struct {
	conflicts int // Updates left to fail with errConflict
	gets      int
	saved     migDeployment
}

var errConflict = errors.New("the object has been modified; please apply your changes to the latest version and try again")

func (s *migStore) Get(context.Context, string) (*migDeployment, error) {
	s.gets++
	d := s.saved
	return &d, nil
}

func (s *migStore) Update(_ context.Context, d *migDeployment) error {
	if s.conflicts > 0 {
		s.conflicts--
		return errConflict
	}
	s.saved = *d
	return nil
}

// isConflict stands for apierrors.IsConflict.
func isConflict(err error) bool { return errors.Is(err, errConflict) }

// afterClientGo is the twin of the guide's port of client-go's
// retry.RetryOnConflict, in both of the guide's forms: it returns what each
// returned.
func afterClientGo(ctx context.Context, store *migStore, name string, replicas int, clk *backofftest.AutoStepClock) (error, error) {
	err := backoff.OnError(backoff.DefaultRetry, isConflict, func() error { // README: err := backoff.OnError(backoff.DefaultRetry, apierrors.IsConflict, func() error {
		d, err := store.Get(ctx, name)
		if err != nil {
			return err
		}
		d.Replicas = replicas
		return store.Update(ctx, d)
	}, backoff.WithClock(clk)) // README: })
	onError := err

	// or, in new code: a context, and a *RetryError when it gives up
	err = backoff.Retry(ctx, backoff.DefaultRetry, func(ctx context.Context) error {
		d, err := store.Get(ctx, name)
		if err != nil {
			return err
		}
		d.Replicas = replicas
		return store.Update(ctx, d)
	}, backoff.WithRetryable(isConflict), backoff.WithClock(clk)) // README: }, backoff.WithRetryable(apierrors.IsConflict))
	return onError, err
}

// TestAfterClientGo: both forms retry a conflict (re-reading the object
// each time) and succeed; when the conflicts outlast DefaultRetry's 5
// attempts, OnError returns the conflict itself, as client-go does, and
// Retry a *RetryError that wraps it.
func TestAfterClientGo(t *testing.T) {
	store := &migStore{conflicts: 2}
	onError, retryErr := afterClientGo(context.Background(), store, "web", 3, backofftest.NewAutoStepClock(migStart))
	require.NoError(t, onError)
	require.NoError(t, retryErr)
	assert.Equal(t, 3, store.saved.Replicas)
	assert.Equal(t, 4, store.gets, "3 for OnError (2 conflicts), 1 for Retry")

	store = &migStore{conflicts: 10}
	onError, retryErr = afterClientGo(context.Background(), store, "web", 3, backofftest.NewAutoStepClock(migStart))
	assert.Same(t, errConflict, onError)
	var re *backoff.RetryError
	require.ErrorAs(t, retryErr, &re)
	assert.Equal(t, 5, re.Attempts)
	assert.Same(t, errConflict, re.Last)
	assert.Equal(t, 10, store.gets)
}
