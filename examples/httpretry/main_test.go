package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs the program on a fake clock, stepped by each wait it
// announces: the real server is asked four times, instantly.
func TestRun(t *testing.T) {
	fc := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, fc, fc.Step))
	assert.Equal(t, `attempt at 0s: 503 Service Unavailable, Retry-After 1s; next attempt in 1s
attempt at 1s: 503 Service Unavailable, Retry-After 1s; next attempt in 1s
attempt at 2s: 500 Internal Server Error; next attempt in 800ms
attempt at 2.8s: 200 OK
body: hello
`, out.String())
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		header string
		want   time.Duration
		ok     bool
	}{
		{"", 0, false},
		{"3", 3 * time.Second, true},
		{"-3", 0, false},
		{"soon", 0, false},
		{"99999999999999999", time.Duration(1<<63 - 1), true},
		{"Mon, 01 Jan 2024 00:00:30 GMT", 30 * time.Second, true},
		{"Sun, 31 Dec 2023 23:00:00 GMT", 0, true},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.header, now)
		assert.Equal(t, tt.ok, ok, tt.header)
		assert.Equal(t, tt.want, got, tt.header)
	}
}

func TestGetClassifiesResponses(t *testing.T) {
	tests := []struct {
		status     int
		retryAfter string
		permanent  bool
		hint       time.Duration
	}{
		{http.StatusNotFound, "", true, 0},
		{http.StatusTooManyRequests, "2", false, 2 * time.Second},
		{http.StatusBadGateway, "", false, 0},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if tt.retryAfter != "" {
				w.Header().Set("Retry-After", tt.retryAfter)
			}
			w.WriteHeader(tt.status)
		}))
		_, err := get(context.Background(), srv.Client(), srv.URL, time.Now())
		srv.Client().CloseIdleConnections()
		srv.Close()
		var se *statusError
		require.ErrorAs(t, err, &se, "status %d", tt.status)
		assert.Equal(t, tt.permanent, backoff.IsPermanent(err), "status %d", tt.status)
		var ra *backoff.RetryAfterError
		if tt.hint > 0 {
			require.ErrorAs(t, err, &ra)
			assert.Equal(t, tt.hint, ra.Delay)
		} else {
			assert.False(t, errors.As(err, &ra), "status %d has no hint", tt.status)
		}
	}
}
