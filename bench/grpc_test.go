package bench

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/retrykit/backoff"
	grpcbackoff "github.com/retrykit/backoff/interop/grpc"
)

// grpcPolicy is one retry policy said both ways: as gRFC A6's retryPolicy
// in grpc-go's service config, and as our Retrier. grpc-go v1.85 waits
// min(initial·multiplier^k, max) times a random factor in [0.8, 1.2) before
// retry k+1; so does a Schedule{Duration: initial, Factor: multiplier, Cap:
// max, Jitter: 0.2} with backoff.SymmetricJitter, and maxAttempts is Steps.
// grpc-go has no codes retried only on a pushback, so the Retrier gets none.
type grpcPolicy struct {
	maxAttempts int
	initial     time.Duration
	max         time.Duration
	multiplier  float64
	codes       []codes.Code
}

// serviceConfig returns p as grpc-go's service config for every method of
// grpc.testing.TestService.
func (p grpcPolicy) serviceConfig() string {
	names := make([]string, len(p.codes))
	for i, c := range p.codes {
		names[i] = `"` + codeName(c) + `"`
	}
	return fmt.Sprintf(`{"methodConfig": [{
		"name": [{"service": "grpc.testing.TestService"}],
		"retryPolicy": {
			"maxAttempts": %d, "initialBackoff": "%gs", "maxBackoff": "%gs",
			"backoffMultiplier": %g, "retryableStatusCodes": [%s]
		}}]}`, p.maxAttempts, p.initial.Seconds(), p.max.Seconds(), p.multiplier, strings.Join(names, ", "))
}

// codeName is c's name in the service config: UNAVAILABLE for Unavailable,
// RESOURCE_EXHAUSTED for ResourceExhausted, OK for OK.
func codeName(c codes.Code) string {
	var b strings.Builder
	lower := false
	for _, r := range c.String() {
		upper := r >= 'A' && r <= 'Z'
		if upper && lower {
			b.WriteByte('_')
		}
		lower = !upper
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// retrier returns p as our Retrier.
func (p grpcPolicy) retrier() *grpcbackoff.Retrier {
	r := grpcbackoff.NewRetrier(
		backoff.Schedule{Duration: p.initial, Factor: p.multiplier, Cap: p.max, Jitter: 0.2, Steps: p.maxAttempts},
		backoff.WithJitterKind(backoff.SymmetricJitter))
	r.RetryableCodes = p.codes
	r.PushbackCodes = []codes.Code{}
	return r
}

// defaultGrpcPolicy is what our Retrier does with default options
// (backoff.DefaultRetry, UNAVAILABLE), as grpc-go's service config.
var defaultGrpcPolicy = grpcPolicy{
	maxAttempts: backoff.DefaultRetry.Steps,
	initial:     backoff.DefaultRetry.Duration,
	max:         backoff.DefaultRetry.Duration,
	multiplier:  1,
	codes:       []codes.Code{codes.Unavailable},
}

// grpcClientImpls are the ways a client calls, each as the dial options of
// its grpc.ClientConn given a policy (nil: the defaults):
//   - nointerceptor: grpc-go with its own retry off (grpc.WithDisableRetry)
//     and no interceptor, the floor;
//   - ours: our unary interceptor, with grpc-go's retry off as our README
//     says; with a nil policy, NewRetrier(backoff.Schedule{}) and no option;
//   - grpcgo: grpc-go's own retry, the policy in the service config.
var grpcClientImpls = []impl[func(p *grpcPolicy) []grpc.DialOption]{
	{"nointerceptor", func(*grpcPolicy) []grpc.DialOption {
		return []grpc.DialOption{grpc.WithDisableRetry()}
	}},
	{"ours", func(p *grpcPolicy) []grpc.DialOption {
		r := grpcbackoff.NewRetrier(backoff.Schedule{})
		if p != nil {
			r = p.retrier()
		}
		return []grpc.DialOption{grpc.WithDisableRetry(), grpc.WithChainUnaryInterceptor(r.UnaryClientInterceptor())}
	}},
	{"grpcgo", func(p *grpcPolicy) []grpc.DialOption {
		if p == nil {
			p = &defaultGrpcPolicy
		}
		return []grpc.DialOption{grpc.WithDefaultServiceConfig(p.serviceConfig())}
	}},
}

// grpcServer is grpc-go's test service whose EmptyCall runs answer, given
// the call's number (from 1). It records when each call arrived and its
// grpc-previous-rpc-attempts metadata.
type grpcServer struct {
	testgrpc.UnimplementedTestServiceServer
	answer func(ctx context.Context, call int) error

	mu       sync.Mutex
	arrived  []time.Time
	previous []string // "" when absent
}

func (s *grpcServer) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	var call int
	if s.answer != nil {
		md, _ := metadata.FromIncomingContext(ctx)
		s.mu.Lock()
		s.arrived = append(s.arrived, time.Now())
		s.previous = append(s.previous, strings.Join(md.Get(grpcbackoff.PreviousAttemptsHeader), ","))
		call = len(s.arrived)
		s.mu.Unlock()
		if err := s.answer(ctx, call); err != nil {
			return nil, err
		}
	}
	return &testgrpc.Empty{}, nil
}

// calls returns the arrival time and grpc-previous-rpc-attempts of every call.
func (s *grpcServer) calls() ([]time.Time, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.arrived...), append([]string(nil), s.previous...)
}

// grpcFailure is how a call fails: its code, and the pushback trailer's
// value unless "".
type grpcFailure struct {
	code     codes.Code
	pushback string
}

// grpcFailing returns an answer that fails the calls with fs, one each, and
// answers the calls after them.
func grpcFailing(fs ...grpcFailure) func(ctx context.Context, call int) error {
	return func(ctx context.Context, call int) error {
		if call > len(fs) {
			return nil
		}
		f := fs[call-1]
		if f.pushback != "" {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcbackoff.PushbackTrailer, f.pushback))
		}
		return status.Errorf(f.code, "failure %d", call)
	}
}

// grpcRepeat returns n copies of f.
func grpcRepeat(n int, f grpcFailure) []grpcFailure {
	fs := make([]grpcFailure, n)
	for i := range fs {
		fs[i] = f
	}
	return fs
}

// dialGrpc serves srv over bufconn and returns a client of it dialled with
// opts. Both stop when tb ends.
func dialGrpc(tb testing.TB, srv *grpcServer, opts ...grpc.DialOption) testgrpc.TestServiceClient {
	tb.Helper()
	lis := bufconn.Listen(1 << 20)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(lis)
	}()
	opts = append(opts,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	cc, err := grpc.NewClient("passthrough:///bufconn", opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cc.Close()
		s.Stop()
		<-served
	})
	return testgrpc.NewTestServiceClient(cc)
}

// BenchmarkGrpcUnary measures a unary gRPC call that succeeds at once, over
// bufconn, to a server that answers EmptyCall with nothing: the cost a
// retry layer adds when nothing is retried, against the same call with no
// retry layer at all (impl=nointerceptor), our interceptor with default
// options (impl=ours) and grpc-go's own retry, configured alike in the
// service config (impl=grpcgo). One op is one call, on one goroutine;
// allocs/op counts the client's and the server's allocations, as both run
// in the process.
func BenchmarkGrpcUnary(b *testing.B) {
	forEach(b, grpcClientImpls, func(b *testing.B, dialOpts func(*grpcPolicy) []grpc.DialOption) {
		client := dialGrpc(b, &grpcServer{}, dialOpts(nil)...)
		ctx, req := context.Background(), &testgrpc.Empty{}
		// The first call connects.
		if _, err := client.EmptyCall(ctx, req); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := client.EmptyCall(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
