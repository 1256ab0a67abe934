package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	testclock "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestFetch runs the program's fetch on a fake clock, stepped by each wait it
// announces: the real server is asked four times, instantly.
func TestFetch(t *testing.T) {
	srv := httptest.NewServer(flakyServer())
	defer srv.Close()
	fc := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	require.NoError(t, fetch(context.Background(), &out, srv.Client().Transport, srv.URL, fc, fc.Step))
	assert.Equal(t, `attempt at 0s: 503 Service Unavailable, Retry-After: 1; next attempt in 1s
attempt at 1s: 503 Service Unavailable, Retry-After: 1; next attempt in 1s
attempt at 2s: 500 Internal Server Error; next attempt in 800ms
attempt at 2.8s: 200 OK
body: hello
`, out.String())
}

// TestFetchClientError: a status that retrying cannot fix ends the fetch
// after one attempt.
func TestFetchClientError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	fc := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	err := fetch(context.Background(), &out, srv.Client().Transport, srv.URL, fc, fc.Step)
	require.EqualError(t, err, "404 Not Found: 404 page not found")
	assert.Equal(t, "attempt at 0s: 404 Not Found\n", out.String())
}

// TestFetchCancelled: cancelling the context during a wait ends the fetch at
// once, on a clock that never moves.
func TestFetchCancelled(t *testing.T) {
	srv := httptest.NewServer(flakyServer())
	defer srv.Close()
	fc := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	err := fetch(ctx, &out, srv.Client().Transport, srv.URL, fc, func(time.Duration) { cancel() })
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, "attempt at 0s: 503 Service Unavailable, Retry-After: 1; next attempt in 1s\n", out.String())
}
