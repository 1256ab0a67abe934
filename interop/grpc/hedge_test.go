package grpcbackoff_test

import (
	"context"
	"slices"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	grpcbackoff "github.com/retrykit/backoff/interop/grpc"
)

// TestUnaryHedgeWinsOverASlowReplica: with backoff.WithHedge, a call whose
// first attempt has no answer after the delay gets a hedge; the hedge's
// reply is the call's, and the slow attempt is cancelled (the server sees
// its context end).
func TestUnaryHedgeWinsOverASlowReplica(t *testing.T) {
	const delay = 50 * time.Millisecond
	forEachTransport(t, func(t *testing.T, transport string) {
		arrived := make(chan struct{})
		gaveUp := make(chan struct{})
		srv := &testServer{unary: func(ctx context.Context, call int, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			if call > 1 {
				return &testgrpc.SimpleResponse{Username: "hedge"}, nil
			}
			close(arrived)
			<-ctx.Done() // the slow replica answers nothing until it is cancelled
			close(gaveUp)
			return nil, ctx.Err()
		}}
		clk := testclock.NewFakeClock(epoch)
		r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Steps: 3},
			backoff.WithClock(clk), backoff.WithHedge(delay))
		client := dial(t, transport, srv, r)

		type result struct {
			resp *testgrpc.SimpleResponse
			err  error
		}
		out := make(chan result, 1)
		go func() {
			resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			out <- result{resp, err}
		}()
		<-arrived // the hedge's timer is armed before the first attempt is sent
		clk.Step(delay)
		got := <-out
		if got.err != nil || got.resp.GetUsername() != "hedge" {
			t.Fatalf("got %v, %v; want the hedge's reply", got.resp, got.err)
		}
		<-gaveUp // the slow attempt was cancelled
		if calls, want := srv.calls(), []string{"", "1"}; !slices.Equal(calls, want) {
			t.Errorf("grpc-previous-rpc-attempts of each call: %q, want %q", calls, want)
		}
	})
}
