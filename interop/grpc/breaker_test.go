package grpcbackoff_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
	grpcbackoff "github.com/retrykit/backoff/interop/grpc"
)

// TestUnaryWithABreaker: a Breaker given with backoff.WithPacer opens on
// the call's failures; the attempt it refuses reaches no server, and the
// call waits, on the fake clock, for the breaker's Retry-After (the rest of
// its open time) before the probe that succeeds and closes it. A call made while it is
// open is refused without being sent, with Unavailable and an error that
// errors.Is matches with backoff.ErrBreakerOpen.
func TestUnaryWithABreaker(t *testing.T) {
	const openFor = 30 * time.Second
	forEachTransport(t, func(t *testing.T, transport string) {
		clk := backofftest.NewAutoStepClock(epoch)
		b := backoff.NewBreaker(backoff.WithClock(clk), backoff.WithBreakerConsecutiveFailures(2), backoff.WithBreakerProbes(1),
			backoff.WithBreakerOpenSchedule(backoff.Schedule{Duration: openFor}))
		srv := &testServer{unary: failFirst(2, codes.Unavailable, nil)}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Steps: 5},
			backoff.WithClock(clk), backoff.WithPacer(b))
		client := dial(t, transport, srv, r)

		resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if err != nil || resp.GetUsername() != "ok" {
			t.Fatalf("got %v, %v; want the probe's answer", resp, err)
		}
		// Unavailable at 0 s and at 1 s (the breaker opens until 31 s); the
		// attempt at 2 s is refused and waits the 29 s left; the probe at
		// 31 s succeeds.
		if got := clk.Since(epoch); got != 1*time.Second+openFor {
			t.Errorf("waited %v on the clock, want 1 s + 1 s + 29 s", got)
		}
		if got, want := srv.calls(), []string{"", "1", "2"}; !slices.Equal(got, want) {
			t.Errorf("grpc-previous-rpc-attempts of each call: %q, want %q (the refused attempt was not sent)", got, want)
		}
		if s := b.State(); s != backoff.BreakerClosed {
			t.Errorf("breaker %v after the probe succeeded, want closed", s)
		}
		if n := b.Transitions(backoff.BreakerOpen); n != 1 {
			t.Errorf("the breaker opened %d times, want 1", n)
		}

		// Open it again, then call with one attempt: refused, not sent.
		for range 2 {
			p, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			p.Done(context.Background(), errors.New("connection refused"))
		}
		if s := b.State(); s != backoff.BreakerOpen {
			t.Fatalf("breaker %v, want open", s)
		}
		once := grpcbackoff.NewRetrier(backoff.Schedule{Steps: 1}, backoff.WithClock(clk), backoff.WithPacer(b))
		_, err = dial(t, transport, srv, once).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if !errors.Is(err, backoff.ErrBreakerOpen) || status.Code(err) != codes.Unavailable {
			t.Errorf("error %v (code %v): want Unavailable, matching backoff.ErrBreakerOpen", err, status.Code(err))
		}
		if n := len(srv.calls()); n != 3 {
			t.Errorf("%d calls reached the server, want 3: the refused call was sent", n)
		}
	})
}
