// Program grpc is the release rehearsal's user of the module
// github.com/retrykit/backoff/interop/grpc: a unary call, through the
// Retrier's interceptor, to an in-memory server that answers UNAVAILABLE
// twice before OK.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/retrykit/backoff"
	grpcbackoff "github.com/retrykit/backoff/interop/grpc"
)

type server struct {
	testgrpc.UnimplementedTestServiceServer
	calls int
}

func (s *server) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.calls++
	if s.calls <= 2 {
		return nil, status.Error(codes.Unavailable, "warming up")
	}
	return &testgrpc.SimpleResponse{Username: "ok"}, nil
}

func main() {
	lis := bufconn.Listen(1 << 20)
	srv := &server{}
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, srv)
	go s.Serve(lis)
	defer s.Stop()

	r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Millisecond, Steps: 5})
	cc, err := grpc.NewClient("passthrough:///rehearsal",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(r.UnaryClientInterceptor()))
	if err != nil {
		fail("dial: %v", err)
	}
	defer cc.Close()
	resp, err := testgrpc.NewTestServiceClient(cc).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	if err != nil || resp.GetUsername() != "ok" || srv.calls != 3 {
		fail("got %v, %v after %d calls; want ok after 3", resp, err, srv.calls)
	}
	fmt.Println("grpcbackoff: UNAVAILABLE twice, then OK on the third attempt")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "grpc: "+format+"\n", args...)
	os.Exit(1)
}
