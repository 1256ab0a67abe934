package httpretry_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/retrykit/backoff"

	"github.com/retrykit/backoff/httpretry"
)

// canned answers 200 OK without a network, so that the benchmark measures
// what the Transport adds to a request, not the request.
type canned struct{}

func (canned) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// BenchmarkRoundTrip is the cost of a request that succeeds at once: through
// the bare RoundTripper, and through a Transport around it, without options
// and with one (backoff.Retry builds its configuration per call when given
// options).
func BenchmarkRoundTrip(b *testing.B) {
	req, err := http.NewRequest(http.MethodGet, "http://example.invalid/", nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", canned{}},
		{"httpretry", httpretry.NewTransport(canned{}, schedule)},
		{"httpretry-options", httpretry.NewTransport(canned{}, schedule, backoff.WithMaxRetryAfter(time.Minute))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				resp, err := bc.rt.RoundTrip(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatal(resp, err)
				}
			}
		})
	}
}
