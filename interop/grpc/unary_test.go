package grpcbackoff_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
	grpcbackoff "github.com/retrykit/backoff/interop/grpc"
)

// failFirst returns a unary handler that fails its first n calls with code
// (and the trailer md, if any), then answers with the call's number.
func failFirst(n int, code codes.Code, md metadata.MD) func(context.Context, int, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return func(ctx context.Context, call int, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		if call <= n {
			if md != nil {
				_ = grpc.SetTrailer(ctx, md)
			}
			return nil, status.Errorf(code, "failure %d", call)
		}
		return &testgrpc.SimpleResponse{Username: "ok"}, nil
	}
}

func TestUnaryFailsThenSucceeds(t *testing.T) {
	forEachTransport(t, func(t *testing.T, transport string) {
		clk := backofftest.NewAutoStepClock(epoch)
		srv := &testServer{unary: failFirst(3, codes.Unavailable, nil)}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 10}, backoff.WithClock(clk))
		client := dial(t, transport, srv, r)
		resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if err != nil || resp.GetUsername() != "ok" {
			t.Fatalf("got %v, %v; want the fourth call's answer", resp, err)
		}
		if got, want := srv.calls(), []string{"", "1", "2", "3"}; !slices.Equal(got, want) {
			t.Errorf("grpc-previous-rpc-attempts of each call: %q, want %q", got, want)
		}
		if got := clk.Since(epoch); got != 7*time.Second {
			t.Errorf("waited %v on the clock, want 1+2+4 s", got)
		}
	})
}

func TestUnaryMoreAttemptsThanGRPCsCap(t *testing.T) {
	// grpc-go's own retry caps maxAttempts at 5; the Schedule's Steps is the
	// only cap here, and Steps 0 has none.
	forEachTransport(t, func(t *testing.T, transport string) {
		srv := &testServer{unary: failFirst(11, codes.Unavailable, nil)}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: 10 * time.Millisecond},
			backoff.WithClock(backofftest.NewAutoStepClock(epoch)))
		if _, err := dial(t, transport, srv, r).UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
		if n := len(srv.calls()); n != 12 {
			t.Errorf("%d calls reached the server, want 12", n)
		}
	})
}

func TestUnaryGivesUpWithTheLastCode(t *testing.T) {
	forEachTransport(t, func(t *testing.T, transport string) {
		srv := &testServer{unary: failFirst(100, codes.Unavailable, nil)}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Steps: 3},
			backoff.WithClock(backofftest.NewAutoStepClock(epoch)))
		_, err := dial(t, transport, srv, r).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("code %v (%v), want Unavailable", status.Code(err), err)
		}
		var re *backoff.RetryError
		if !errors.As(err, &re) || re.Attempts != 3 || !errors.Is(err, backoff.ErrAttemptsExhausted) {
			t.Fatalf("error %v: want a RetryError of 3 attempts, exhausted", err)
		}
	})
}

func TestUnaryCodes(t *testing.T) {
	pushback := func(v string) metadata.MD { return metadata.Pairs(grpcbackoff.PushbackTrailer, v) }
	for _, tc := range []struct {
		name    string
		code    codes.Code
		trailer metadata.MD
		setup   func(*grpcbackoff.Retrier)
		calls   int           // calls that reach the server
		waited  time.Duration // on the clock
	}{
		{name: "Unavailable is retried", code: codes.Unavailable, calls: 2, waited: time.Second},
		{name: "InvalidArgument is not", code: codes.InvalidArgument, calls: 1},
		{name: "ResourceExhausted without pushback is not", code: codes.ResourceExhausted, calls: 1},
		{name: "ResourceExhausted with pushback waits it", code: codes.ResourceExhausted, trailer: pushback("5000"), calls: 2, waited: 5 * time.Second},
		{name: "a pushback replaces the schedule's wait", code: codes.Unavailable, trailer: pushback("250"), calls: 2, waited: 250 * time.Millisecond},
		{name: "a pushback of 0 leaves the schedule's wait", code: codes.ResourceExhausted, trailer: pushback("0"), calls: 2, waited: time.Second},
		{name: "a negative pushback stops", code: codes.Unavailable, trailer: pushback("-1"), calls: 1},
		{name: "an unparsable pushback stops", code: codes.Unavailable, trailer: pushback("soon"), calls: 1},
		{name: "a pushback does not make any code retryable", code: codes.Internal, trailer: pushback("10"), calls: 1},
		{name: "RetryableCodes replaces the set", code: codes.Aborted, calls: 2, waited: time.Second,
			setup: func(r *grpcbackoff.Retrier) { r.RetryableCodes = []codes.Code{codes.Aborted} }},
		{name: "Unavailable outside RetryableCodes is not", code: codes.Unavailable, calls: 1,
			setup: func(r *grpcbackoff.Retrier) { r.RetryableCodes = []codes.Code{codes.Aborted} }},
		{name: "empty PushbackCodes", code: codes.ResourceExhausted, trailer: pushback("10"), calls: 1,
			setup: func(r *grpcbackoff.Retrier) { r.PushbackCodes = []codes.Code{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := backofftest.NewAutoStepClock(epoch)
			srv := &testServer{unary: failFirst(1, tc.code, tc.trailer)}
			r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Steps: 5}, backoff.WithClock(clk))
			if tc.setup != nil {
				tc.setup(r)
			}
			_, err := dial(t, "bufconn", srv, r).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			if n := len(srv.calls()); n != tc.calls {
				t.Errorf("%d calls reached the server, want %d", n, tc.calls)
			}
			if got := clk.Since(epoch); got != tc.waited {
				t.Errorf("waited %v, want %v", got, tc.waited)
			}
			if tc.calls == 1 {
				// Not retried: the error as grpc-go returned it.
				if status.Code(err) != tc.code || status.Convert(err).Message() != "failure 1" {
					t.Errorf("error %v, want the server's %v", err, tc.code)
				}
				var re *backoff.RetryError
				if errors.As(err, &re) {
					t.Errorf("error %v is a RetryError, want the attempt's", err)
				}
			} else if err != nil {
				t.Errorf("error %v, want success", err)
			}
		})
	}
}

func TestUnaryAttemptTimeout(t *testing.T) {
	forEachTransport(t, func(t *testing.T, transport string) {
		clk := testclock.NewFakeClock(epoch)
		arrived := make(chan struct{})
		srv := &testServer{unary: func(ctx context.Context, call int, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			if call == 1 {
				close(arrived)
				<-ctx.Done() // stalls until the client gives the attempt up
				return nil, ctx.Err()
			}
			return &testgrpc.SimpleResponse{Username: "ok"}, nil
		}}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Steps: 3},
			backoff.WithClock(clk), backoff.WithAttemptTimeout(2*time.Second))
		client := dial(t, transport, srv, r)
		done := make(chan error, 1)
		go func() {
			_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			done <- err
		}()
		<-arrived // the attempt's timer is set before the call is sent
		clk.Step(2 * time.Second)
		if err := <-done; err != nil {
			t.Fatalf("error %v, want the second attempt's answer", err)
		}
		if got, want := srv.calls(), []string{"", "1"}; !slices.Equal(got, want) {
			t.Errorf("calls %q, want %q", got, want)
		}
	})
}

func TestUnaryCallersDeadline(t *testing.T) {
	forEachTransport(t, func(t *testing.T, transport string) {
		clk := backofftest.NewAutoStepClock(epoch)
		srv := &testServer{unary: failFirst(100, codes.Unavailable, nil)}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Minute, Steps: 5}, backoff.WithClock(clk))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := dial(t, transport, srv, r).UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, backoff.ErrDeadlineWouldPass) {
			t.Fatalf("error %v: want DeadlineExceeded, the deadline would pass", err)
		}
		if n := len(srv.calls()); n != 1 {
			t.Errorf("%d calls, want 1: the next would start after the deadline", n)
		}
		if clk.Since(epoch) != 0 {
			t.Errorf("waited %v, want no wait into the deadline", clk.Since(epoch))
		}
	})
}

func TestUnaryCallerCancels(t *testing.T) {
	forEachTransport(t, func(t *testing.T, transport string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv := &testServer{unary: func(_ context.Context, call int, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			if call == 2 {
				cancel()
			}
			return nil, status.Error(codes.Unavailable, "down")
		}}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Steps: 10},
			backoff.WithClock(backofftest.NewAutoStepClock(epoch)))
		_, err := dial(t, transport, srv, r).UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.Canceled || !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v: want Canceled", err)
		}
		if n := len(srv.calls()); n != 2 {
			t.Errorf("%d calls, want 2", n)
		}
	})
}

func TestBadInputsPanic(t *testing.T) {
	for name, f := range map[string]func(){
		"NewRetrier with an infinite Factor and no Cap": func() {
			grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Factor: math.Inf(1)})
		},
		"NewRetrier with a Jitter above MaxRetryJitter": func() {
			grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Jitter: 100})
		},
		"Resume with a nil next": func() {
			grpcbackoff.Resume[*testgrpc.StreamingOutputCallRequest, *testgrpc.StreamingOutputCallResponse](nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				where := "grpcbackoff: " + strings.Fields(name)[0] + ": "
				if p, _ := recover().(string); !strings.HasPrefix(p, where) {
					t.Errorf("panic %q, want one that starts %q", p, where)
				}
			}()
			f()
		})
	}
}

// TestGRPCsOwnRetryStopsAtFive is the case the interceptor exists for:
// grpc-go's built-in retry, asked for 10 attempts in the service config,
// makes 5 (it caps maxAttempts at 5) where the server needed 8, while the
// interceptor, asked for 10, gets the answer.
func TestGRPCsOwnRetryStopsAtFive(t *testing.T) {
	const serviceConfig = `{"methodConfig": [{
		"name": [{"service": "grpc.testing.TestService"}],
		"retryPolicy": {
			"maxAttempts": 10, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
			"backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]
		}}]}`
	builtin := &testServer{unary: failFirst(7, codes.Unavailable, nil)}
	_, err := dialWith(t, "bufconn", builtin, grpc.WithDefaultServiceConfig(serviceConfig)).
		UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	if status.Code(err) != codes.Unavailable || len(builtin.calls()) != 5 {
		t.Errorf("grpc-go's retry: %v after %d calls; want UNAVAILABLE after 5", err, len(builtin.calls()))
	}
	// Both send grpc-previous-rpc-attempts the same way.
	if got, want := builtin.calls(), []string{"", "1", "2", "3", "4"}; !slices.Equal(got, want) {
		t.Errorf("grpc-go's grpc-previous-rpc-attempts: %q, want %q", got, want)
	}

	ours := &testServer{unary: failFirst(7, codes.Unavailable, nil)}
	r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Millisecond, Steps: 10},
		backoff.WithClock(backofftest.NewAutoStepClock(epoch)))
	if _, err := dial(t, "bufconn", ours, r).UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil || len(ours.calls()) != 8 {
		t.Errorf("the interceptor: %v after %d calls; want the answer of the 8th", err, len(ours.calls()))
	}
	if got, want := ours.calls(), builtin.calls(); len(got) < 5 || !slices.Equal(got[:5], want) {
		t.Errorf("the interceptor's grpc-previous-rpc-attempts: %q, grpc-go's: %q", got, want)
	}
}

// stubInvoker and stubInterceptor are package variables so that the
// compiler cannot inline the call through them: the allocations counted are
// those of the interceptor as grpc-go calls it.
var (
	stubInvoker     grpc.UnaryInvoker
	stubInterceptor grpc.UnaryClientInterceptor
)

// TestUnaryAllocatesTwiceWhenTheFirstAttemptSucceeds: the call's state
// and its attempt function, which backoff.Retry keeps on the heap for its
// hedges, are all the interceptor allocates when the first attempt succeeds.
func TestUnaryAllocatesTwiceWhenTheFirstAttemptSucceeds(t *testing.T) {
	stubInterceptor = grpcbackoff.NewRetrier(backoff.Schedule{}).UnaryClientInterceptor()
	stubInvoker = func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	req, reply := &testgrpc.SimpleRequest{}, &testgrpc.SimpleResponse{}
	// As generated code calls it: grpc.StaticMethod, then the caller's options.
	opts := []grpc.CallOption{grpc.StaticMethod(), grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(1 << 20)}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if err := stubInterceptor(ctx, "/m", req, reply, nil, stubInvoker, opts...); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("%v allocations per call, want at most 2", allocs)
	}
}

func TestUnaryPassesTheCallersOptionsToEveryAttempt(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 6} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			caller := make([]grpc.CallOption, n, n+1) // spare room the interceptor must not write into
			for i := range caller {
				caller[i] = grpc.MaxCallRecvMsgSize(i + 1)
			}
			spare := caller[:n+1]
			spare[n] = grpc.StaticMethod()
			var got [][]grpc.CallOption
			invoker := func(_ context.Context, _ string, _, _ any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
				got = append(got, slices.Clone(opts))
				if len(got) < 3 {
					return status.Error(codes.Unavailable, "down")
				}
				return nil
			}
			r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Steps: 3},
				backoff.WithClock(backofftest.NewAutoStepClock(epoch)))
			err := r.UnaryClientInterceptor()(context.Background(), "/m", &testgrpc.SimpleRequest{}, &testgrpc.SimpleResponse{}, nil, invoker, caller...)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 {
				t.Fatalf("%d attempts, want 3", len(got))
			}
			for i, opts := range got {
				if len(opts) != n+1 || !slices.Equal(opts[:n], caller) {
					t.Errorf("attempt %d: options %v, want the caller's %v and a trailer option", i+1, opts, caller)
					continue
				}
				if _, ok := opts[n].(grpc.TrailerCallOption); !ok {
					t.Errorf("attempt %d: last option %T, want grpc.TrailerCallOption", i+1, opts[n])
				}
			}
			if _, ok := spare[n].(grpc.StaticMethodCallOption); !ok {
				t.Errorf("the caller's spare slot holds %T: the interceptor wrote into the caller's array", spare[n])
			}
		})
	}
}
