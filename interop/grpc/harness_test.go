package grpcbackoff_test

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	grpcbackoff "github.com/retrykit/backoff/interop/grpc"
)

// transports are the two ways the tests reach their server: grpc-go's
// in-memory listener, and the loopback interface.
var transports = []string{"bufconn", "tcp"}

// testServer is grpc-go's test service with handlers that each test sets.
// It records the grpc-previous-rpc-attempts metadata of every call.
type testServer struct {
	testgrpc.UnimplementedTestServiceServer
	unary  func(ctx context.Context, n int, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error)
	stream func(n int, req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error

	mu       sync.Mutex
	previous []string // grpc-previous-rpc-attempts of each call, "" when absent
	lis      *trackingListener
}

func (s *testServer) call(ctx context.Context) int {
	md, _ := metadata.FromIncomingContext(ctx)
	v := ""
	if p := md.Get(grpcbackoff.PreviousAttemptsHeader); len(p) > 0 {
		v = p[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.previous = append(s.previous, v)
	return len(s.previous)
}

func (s *testServer) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.previous...)
}

func (s *testServer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return s.unary(ctx, s.call(ctx), req)
}

func (s *testServer) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
	return s.stream(s.call(ss.Context()), req, ss)
}

// trackingListener keeps the connections it accepted, so that a handler can
// break them: a real disconnection.
type trackingListener struct {
	net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.accepted++
		l.mu.Unlock()
	}
	return c, err
}

// disconnect closes every connection accepted so far.
func (l *trackingListener) disconnect() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// dial starts srv on transport and returns a client of it whose calls go
// through r's interceptors, with grpc-go's own retry off. Both stop when the
// test ends.
func dial(t *testing.T, transport string, srv *testServer, r *grpcbackoff.Retrier) testgrpc.TestServiceClient {
	t.Helper()
	return dialWith(t, transport, srv,
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(r.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(r.StreamClientInterceptor()))
}

// dialWith starts srv on transport and returns a client of it dialled with
// opts.
func dialWith(t *testing.T, transport string, srv *testServer, opts ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	var (
		lis    net.Listener
		target string
	)
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	switch transport {
	case "bufconn":
		bl := bufconn.Listen(1 << 20)
		lis, target = bl, "passthrough:///bufconn"
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return bl.DialContext(ctx)
		}))
	case "tcp":
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis, target = tl, "passthrough:///"+tl.Addr().String()
	}
	srv.lis = &trackingListener{Listener: lis}
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(srv.lis)
	}()
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		s.Stop()
		<-served
	})
	return testgrpc.NewTestServiceClient(cc)
}

// forEachTransport runs test once per transport.
func forEachTransport(t *testing.T, test func(t *testing.T, transport string)) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { test(t, tr) })
	}
}

// connections returns how many connections the listener accepted.
func (l *trackingListener) connections() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}
