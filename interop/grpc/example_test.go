package grpcbackoff_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/backofftest"
	grpcbackoff "github.com/retrykit/backoff/interop/grpc"
)

// flakyServer fails its first three unary calls, the second with a
// pushback, and breaks each stream after two messages until the tenth.
type flakyServer struct {
	testgrpc.UnimplementedTestServiceServer
	calls int
}

func (s *flakyServer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.calls++
	md, _ := metadata.FromIncomingContext(ctx)
	fmt.Printf("server: call %d, previous attempts %q\n", s.calls, md.Get(grpcbackoff.PreviousAttemptsHeader))
	switch s.calls {
	case 1, 3:
		return nil, status.Error(codes.Unavailable, "restarting")
	case 2:
		_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcbackoff.PushbackTrailer, "1500"))
		return nil, status.Error(codes.ResourceExhausted, "quota")
	}
	return &testgrpc.SimpleResponse{Username: "done"}, nil
}

func (s *flakyServer) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
	from, _ := strconv.Atoi(string(req.GetPayload().GetBody()))
	for i := from; i < 10; i++ {
		if i > from+1 {
			return status.Error(codes.Unavailable, "connection lost")
		}
		if err := ss.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte(strconv.Itoa(i))}}); err != nil {
			return err
		}
	}
	return nil
}

// exampleClient serves srv over an in-memory listener and returns a client
// whose calls go through r's interceptors, with the function that stops both.
func exampleClient(srv testgrpc.TestServiceServer, r *grpcbackoff.Retrier) (testgrpc.TestServiceClient, func()) {
	lis := bufconn.Listen(1 << 20)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, srv)
	go s.Serve(lis)
	cc, err := grpc.NewClient("passthrough:///example",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(), // retries are the interceptors'
		grpc.WithChainUnaryInterceptor(r.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(r.StreamClientInterceptor()))
	if err != nil {
		panic(err)
	}
	return testgrpc.NewTestServiceClient(cc), func() { cc.Close(); s.Stop() }
}

// A unary call retried on UNAVAILABLE, and on RESOURCE_EXHAUSTED after the
// server's pushback, on a clock that takes no time to wait.
func ExampleRetrier_UnaryClientInterceptor() {
	clk := backofftest.NewAutoStepClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Steps: 10},
		backoff.WithClock(clk),
		backoff.WithNotify(func(attempt int, err error, next time.Duration) {
			fmt.Printf("client: attempt %d: %v; next in %v\n", attempt, status.Code(err), next)
		}))
	client, stop := exampleClient(&flakyServer{}, r)
	defer stop()

	resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	fmt.Println(resp.GetUsername(), err, "after", clk.Since(start))
	// Output:
	// server: call 1, previous attempts []
	// client: attempt 1: Unavailable; next in 100ms
	// server: call 2, previous attempts ["1"]
	// client: attempt 2: ResourceExhausted; next in 1.5s
	// server: call 3, previous attempts ["2"]
	// client: attempt 3: Unavailable; next in 400ms
	// server: call 4, previous attempts ["3"]
	// done <nil> after 2s
}

// A server stream that breaks every two messages, resumed from the last
// message received: each message arrives once.
func ExampleResume() {
	clk := backofftest.NewAutoStepClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Cap: time.Second},
		backoff.WithClock(clk))
	client, stop := exampleClient(&flakyServer{}, r)
	defer stop()

	resume := grpcbackoff.Resume(func(_ *testgrpc.StreamingOutputCallRequest, last *testgrpc.StreamingOutputCallResponse) (*testgrpc.StreamingOutputCallRequest, bool) {
		i, err := strconv.Atoi(string(last.GetPayload().GetBody()))
		return &testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(strconv.Itoa(i + 1))}}, err == nil
	})
	stream, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{}, resume)
	if err != nil {
		panic(err)
	}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Print(string(m.GetPayload().GetBody()), " ")
	}
	fmt.Println()
	// Output: 0 1 2 3 4 5 6 7 8 9
}
