package grpcbackoff_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
	grpcbackoff "github.com/retrykit/backoff/interop/grpc"
)

func TestClassify(t *testing.T) {
	if grpcbackoff.Classify(nil) != nil {
		t.Error("Classify(nil) is not nil")
	}
	for _, tc := range []struct {
		code              codes.Code
		overload, timeout bool
	}{
		{code: codes.Unavailable, overload: true},
		{code: codes.ResourceExhausted, overload: true},
		{code: codes.DeadlineExceeded, timeout: true},
		{code: codes.Canceled},
		{code: codes.Internal},
		{code: codes.InvalidArgument},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			orig := fmt.Errorf("calling: %w", status.Error(tc.code, "answer"))
			err := grpcbackoff.Classify(orig)
			if got := errors.Is(err, backoff.ErrOverloaded); got != tc.overload {
				t.Errorf("errors.Is(ErrOverloaded) = %v, want %v", got, tc.overload)
			}
			var to interface{ Timeout() bool }
			if got := errors.As(err, &to) && to.Timeout(); got != tc.timeout {
				t.Errorf("a timeout: %v, want %v", got, tc.timeout)
			}
			if status.Code(err) != tc.code || err.Error() != orig.Error() || !errors.Is(err, orig) {
				t.Errorf("Classify changed the error: %v (%v), want %v", err, status.Code(err), orig)
			}
			if !tc.overload && !tc.timeout && err != orig {
				t.Errorf("Classify marked %v", err)
			}
		})
	}
}

// TestPacersReadTheClassification: a Throttler passed with backoff.WithPacer
// counts an overload (UNAVAILABLE) or a timeout (DEADLINE_EXCEEDED) as a
// request the server did not accept, and starts refusing attempts, while an
// error that is neither (ABORTED) counts as accepted.
func TestPacersReadTheClassification(t *testing.T) {
	for _, tc := range []struct {
		code    codes.Code
		refuses bool
	}{
		{codes.Unavailable, true},
		{codes.DeadlineExceeded, true},
		{codes.Aborted, false},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			clk := backofftest.NewAutoStepClock(epoch)
			throttler := backoff.NewThrottler(1, time.Hour, backoff.WithClock(clk))
			srv := &testServer{unary: failFirst(1000, tc.code, nil)}
			r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Millisecond, Steps: 40},
				backoff.WithClock(clk), backoff.WithPacer(throttler))
			r.RetryableCodes = []codes.Code{tc.code}
			_, err := dial(t, "bufconn", srv, r).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			var re *backoff.RetryError
			if !errors.As(err, &re) || re.Attempts != 40 {
				t.Fatalf("error %v, want 40 attempts", err)
			}
			sent := len(srv.calls())
			if refused := throttler.Rejected() > 0; refused != tc.refuses || (sent+int(throttler.Rejected()) != 40) {
				t.Errorf("%d attempts sent, %d refused by the throttler; want refusals: %v", sent, throttler.Rejected(), tc.refuses)
			}
		})
	}
}

// TestCallersCancellationIsNeutral: an attempt the caller cancels tells an
// AdaptiveLimiter nothing (its limit stays), where an UNAVAILABLE answer
// lowers it.
func TestCallersCancellationIsNeutral(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel bool
		falls  bool
	}{
		{name: "the caller cancels", cancel: true},
		{name: "the server is unavailable", falls: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := backofftest.NewAutoStepClock(epoch)
			limiter := backoff.NewAdaptiveLimiter(backoff.WithClock(clk), backoff.WithInitialLimit(20))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			srv := &testServer{unary: func(sctx context.Context, _ int, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
				if tc.cancel {
					cancel()
					<-sctx.Done()
					return nil, sctx.Err()
				}
				return nil, status.Error(codes.Unavailable, "down")
			}}
			r := grpcbackoff.NewRetrier(backoff.Schedule{Steps: 1},
				backoff.WithClock(clk), backoff.WithPacer(limiter))
			_, err := dial(t, "bufconn", srv, r).UnaryCall(ctx, &testgrpc.SimpleRequest{})
			want := codes.Unavailable
			if tc.cancel {
				want = codes.Canceled
			}
			if status.Code(err) != want {
				t.Fatalf("error %v, want %v", err, want)
			}
			if falls := limiter.Limit() < 20; falls != tc.falls {
				t.Errorf("limit %d after the call; want it to fall: %v", limiter.Limit(), tc.falls)
			}
			if limiter.Inflight() != 0 {
				t.Errorf("%d permits still held", limiter.Inflight())
			}
		})
	}
}
