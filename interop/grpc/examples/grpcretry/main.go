// Command grpcretry calls a gRPC server on the loopback interface through
// the interceptors of package grpcbackoff, and prints what happens:
//
//   - a unary call that the server fails with UNAVAILABLE seven times before
//     answering: eight attempts, more than the five that grpc-go's own retry
//     (gRFC A6's maxAttempts) allows, each after the first carrying
//     grpc-previous-rpc-attempts;
//   - a server stream of ten events that the server breaks after every
//     third, resumed each time from the last event received: every event
//     arrives once.
//
// The client's lines come from backoff.WithNotify: each failed attempt, or
// break of the stream, and the wait before the next attempt.
//
//	go run ./examples/grpcretry
//
// It runs on the real clock, for about a second: the waits of its Schedule,
// 20 ms doubling up to 200 ms. Its test runs it on a fake clock.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/retrykit/backoff"
	grpcbackoff "github.com/retrykit/backoff/interop/grpc"
)

func main() {
	if err := run(context.Background(), os.Stdout, clock.RealClock{}); err != nil {
		fmt.Fprintln(os.Stderr, "grpcretry:", err)
		os.Exit(1)
	}
}

// schedule is the client's: 20 ms, doubling, at most 200 ms apart, and no
// cap on the attempts (the call's context bounds them).
var schedule = backoff.Schedule{Duration: 20 * time.Millisecond, Factor: 2, Cap: 200 * time.Millisecond}

// run serves the flaky service on the loopback interface, makes both calls
// through a Retrier waiting on clk, and reports them to w.
func run(ctx context.Context, w io.Writer, clk clock.WithDelayedExecution) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	start := clk.Now()
	w = &lockedWriter{w: w} // the server's handlers write too
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, &flaky{w: w, since: func() time.Duration { return clk.Since(start) }})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		<-served
	}()

	r := grpcbackoff.NewRetrier(schedule, backoff.WithClock(clk),
		backoff.WithNotify(func(attempt int, err error, next time.Duration) {
			fmt.Fprintf(w, "client: attempt %d: %v; next in %v\n", attempt, status.Code(err), next)
		}))
	cc, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(), // the interceptors retry; grpc-go's own retry would multiply the attempts
		grpc.WithChainUnaryInterceptor(r.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(r.StreamClientInterceptor()))
	if err != nil {
		return err
	}
	defer cc.Close()
	client := testgrpc.NewTestServiceClient(cc)

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "unary: %q at %v\n", resp.GetUsername(), clk.Since(start).Round(time.Millisecond))

	// Resume asks for the events after the last one received.
	resume := grpcbackoff.Resume(func(_ *testgrpc.StreamingOutputCallRequest, last *testgrpc.StreamingOutputCallResponse) (*testgrpc.StreamingOutputCallRequest, bool) {
		n, err := strconv.Atoi(string(last.GetPayload().GetBody()))
		return from(n + 1), err == nil
	})
	stream, err := client.StreamingOutputCall(ctx, from(0), resume)
	if err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "stream: event %s\n", m.GetPayload().GetBody())
	}
	return nil
}

func from(n int) *testgrpc.StreamingOutputCallRequest {
	return &testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(strconv.Itoa(n))}}
}

// flaky is the server: it fails the first seven unary calls, and breaks
// each stream after three events.
type flaky struct {
	testgrpc.UnimplementedTestServiceServer
	w     io.Writer
	since func() time.Duration

	mu    sync.Mutex
	calls int
}

func (f *flaky) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	md, _ := metadata.FromIncomingContext(ctx)
	previous := "-"
	if v := md.Get(grpcbackoff.PreviousAttemptsHeader); len(v) > 0 {
		previous = v[0]
	}
	fmt.Fprintf(f.w, "server: unary call %d at %v, previous attempts: %s", f.calls, f.since().Round(time.Millisecond), previous)
	if f.calls <= 7 {
		fmt.Fprintln(f.w, ": UNAVAILABLE")
		return nil, status.Error(codes.Unavailable, "warming up")
	}
	fmt.Fprintln(f.w, ": OK")
	return &testgrpc.SimpleResponse{Username: "hello"}, nil
}

func (f *flaky) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
	n, _ := strconv.Atoi(string(req.GetPayload().GetBody()))
	for i := n; i < 10; i++ {
		if i == n+3 {
			return status.Error(codes.Unavailable, "connection lost")
		}
		if err := ss.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte(strconv.Itoa(i))}}); err != nil {
			return err
		}
	}
	return nil
}

// lockedWriter serialises the writes of the client and the server's
// handlers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
