package bench

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/retrykit/backoff"
	grpcbackoff "github.com/retrykit/backoff/interop/grpc"
)

// These tests put our unary interceptor and grpc-go's own retry (gRFC A6's
// retryPolicy in the service config) side by side, each configured from the
// same grpcPolicy, against a server that fails its first calls as each case
// says. They run in a synctest bubble: grpc-go's retry timers and ours (the
// real clock, which the bubble fakes) both wait on the bubble's clock, so
// the time between two calls reaching the server is exactly the wait the
// client chose, and a case of minutes of waits runs in milliseconds.

// grpcWait is a wait expected between two calls: the schedule's, d before
// its ±20% jitter, or a pushback's, exactly d.
type grpcWait struct {
	d        time.Duration
	jittered bool
}

func aboutWait(d time.Duration) grpcWait { return grpcWait{d: d, jittered: true} }
func exactWait(d time.Duration) grpcWait { return grpcWait{d: d} }

// jitteredMs returns the schedule's waits of ms milliseconds, one each,
// before their jitter.
func jitteredMs(ms ...int) []grpcWait {
	ws := make([]grpcWait, len(ms))
	for i, m := range ms {
		ws[i] = aboutWait(time.Duration(m) * time.Millisecond)
	}
	return ws
}

// grpcOutcome is what a client did in one case: the calls that reached the
// server, the code the caller got, the waits between the calls.
type grpcOutcome struct {
	calls int
	code  codes.Code
	waits []grpcWait
}

var (
	grpcUnavailable = grpcFailure{code: codes.Unavailable}
	grpcInternal    = grpcFailure{code: codes.Internal}
)

// withPushback returns f with the pushback v.
func withPushback(f grpcFailure, v string) grpcFailure {
	f.pushback = v
	return f
}

// grpcPolicyWith returns the retry policy of the cases, changed by change
// unless nil: 5 attempts, waits of 100 ms doubling up to 1 s, UNAVAILABLE
// retried.
func grpcPolicyWith(change func(*grpcPolicy)) grpcPolicy {
	p := grpcPolicy{maxAttempts: 5, initial: 100 * time.Millisecond, max: time.Second, multiplier: 2,
		codes: []codes.Code{codes.Unavailable}}
	if change != nil {
		change(&p)
	}
	return p
}

// grpcOverlap are the cases where grpc-go's retry and ours must agree: the
// same attempts, the same waits (up to their jitter), the same answer.
var grpcOverlap = []struct {
	name     string
	policy   grpcPolicy
	failures []grpcFailure
	want     grpcOutcome
}{
	{name: "no failure", policy: grpcPolicyWith(nil),
		want: grpcOutcome{calls: 1, code: codes.OK}},
	{name: "UNAVAILABLE twice, then the answer", policy: grpcPolicyWith(nil), failures: grpcRepeat(2, grpcUnavailable),
		want: grpcOutcome{calls: 3, code: codes.OK, waits: jitteredMs(100, 200)}},
	{name: "UNAVAILABLE 4 times: the 5th and last attempt answers", policy: grpcPolicyWith(nil), failures: grpcRepeat(4, grpcUnavailable),
		want: grpcOutcome{calls: 5, code: codes.OK, waits: jitteredMs(100, 200, 400, 800)}},
	{name: "UNAVAILABLE 9 times: 5 attempts, then UNAVAILABLE", policy: grpcPolicyWith(nil), failures: grpcRepeat(9, grpcUnavailable),
		want: grpcOutcome{calls: 5, code: codes.Unavailable, waits: jitteredMs(100, 200, 400, 800)}},
	{name: "maxAttempts 3", policy: grpcPolicyWith(func(p *grpcPolicy) { p.maxAttempts = 3 }), failures: grpcRepeat(9, grpcUnavailable),
		want: grpcOutcome{calls: 3, code: codes.Unavailable, waits: jitteredMs(100, 200)}},
	{name: "waits capped by maxBackoff", policy: grpcPolicyWith(func(p *grpcPolicy) { p.multiplier, p.max = 10, 300*time.Millisecond }), failures: grpcRepeat(3, grpcUnavailable),
		want: grpcOutcome{calls: 4, code: codes.OK, waits: jitteredMs(100, 300, 300)}},
	{name: "a code outside the set is not retried", policy: grpcPolicyWith(nil), failures: grpcRepeat(3, grpcInternal),
		want: grpcOutcome{calls: 1, code: codes.Internal}},
	{name: "a set of two codes", policy: grpcPolicyWith(func(p *grpcPolicy) { p.codes = []codes.Code{codes.Unavailable, codes.Aborted} }),
		failures: []grpcFailure{{code: codes.Aborted}, grpcUnavailable},
		want:     grpcOutcome{calls: 3, code: codes.OK, waits: jitteredMs(100, 200)}},
	{name: "a pushback replaces the wait", policy: grpcPolicyWith(func(p *grpcPolicy) { p.multiplier = 1 }),
		failures: []grpcFailure{withPushback(grpcUnavailable, "1500"), withPushback(grpcUnavailable, "250")},
		want:     grpcOutcome{calls: 3, code: codes.OK, waits: []grpcWait{exactWait(1500 * time.Millisecond), exactWait(250 * time.Millisecond)}}},
	{name: "a pushback beyond maxBackoff is waited in full", policy: grpcPolicyWith(func(p *grpcPolicy) { p.multiplier = 1 }),
		failures: []grpcFailure{withPushback(grpcUnavailable, "60000")},
		want:     grpcOutcome{calls: 2, code: codes.OK, waits: []grpcWait{exactWait(time.Minute)}}},
	{name: "RESOURCE_EXHAUSTED in the set, with a pushback",
		policy:   grpcPolicyWith(func(p *grpcPolicy) { p.codes = []codes.Code{codes.Unavailable, codes.ResourceExhausted} }),
		failures: []grpcFailure{withPushback(grpcFailure{code: codes.ResourceExhausted}, "700")},
		want:     grpcOutcome{calls: 2, code: codes.OK, waits: []grpcWait{exactWait(700 * time.Millisecond)}}},
	{name: "a negative pushback stops", policy: grpcPolicyWith(nil), failures: []grpcFailure{withPushback(grpcUnavailable, "-1")},
		want: grpcOutcome{calls: 1, code: codes.Unavailable}},
	{name: "an unparsable pushback stops", policy: grpcPolicyWith(nil), failures: []grpcFailure{withPushback(grpcUnavailable, "soon")},
		want: grpcOutcome{calls: 1, code: codes.Unavailable}},
	{name: "a pushback does not make a code retryable", policy: grpcPolicyWith(nil), failures: []grpcFailure{withPushback(grpcInternal, "10")},
		want: grpcOutcome{calls: 1, code: codes.Internal}},
}

func TestGrpcRetryMatchesGrpcGo(t *testing.T) {
	for _, tc := range grpcOverlap {
		t.Run(tc.name, func(t *testing.T) {
			for _, impl := range []string{"grpcgo", "ours"} {
				t.Run("impl="+impl, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						callGrpc(t, impl, tc.policy, tc.failures).check(t, tc.want)
					})
				})
			}
		})
	}
}

// grpcBeyond are cases where the two differ, each outcome as it is.
var grpcBeyond = []struct {
	name         string
	policy       grpcPolicy
	failures     []grpcFailure
	grpcgo, ours grpcOutcome
}{
	{
		// grpc-go caps maxAttempts at 5 (grpc-go#4615); a Schedule's Steps
		// is the only cap of ours.
		name:     "more than 5 attempts: ours answers, grpc-go gives up",
		policy:   grpcPolicyWith(func(p *grpcPolicy) { p.maxAttempts, p.multiplier = 10, 1 }),
		failures: grpcRepeat(7, grpcUnavailable),
		grpcgo:   grpcOutcome{calls: 5, code: codes.Unavailable, waits: repeatGrpcWait(4, aboutWait(100*time.Millisecond))},
		ours:     grpcOutcome{calls: 8, code: codes.OK, waits: repeatGrpcWait(7, aboutWait(100*time.Millisecond))},
	},
	{
		// After a pushback, grpc-go's schedule starts over from
		// initialBackoff; ours goes on as if the pushback had been a wait
		// of the schedule.
		name:     "after a pushback, grpc-go's waits start over",
		policy:   grpcPolicyWith(nil),
		failures: []grpcFailure{grpcUnavailable, withPushback(grpcUnavailable, "50"), grpcUnavailable},
		grpcgo:   grpcOutcome{calls: 4, code: codes.OK, waits: []grpcWait{aboutWait(100 * time.Millisecond), exactWait(50 * time.Millisecond), aboutWait(100 * time.Millisecond)}},
		ours:     grpcOutcome{calls: 4, code: codes.OK, waits: []grpcWait{aboutWait(100 * time.Millisecond), exactWait(50 * time.Millisecond), aboutWait(400 * time.Millisecond)}},
	},
	{
		// grpc-go waits any pushback; ours bounds it with
		// backoff.WithMaxRetryAfter, backoff.DefaultMaxRetryAfter (5 min)
		// by default.
		name:     "a pushback of 10 minutes",
		policy:   grpcPolicyWith(nil),
		failures: []grpcFailure{withPushback(grpcUnavailable, "600000")},
		grpcgo:   grpcOutcome{calls: 2, code: codes.OK, waits: []grpcWait{exactWait(10 * time.Minute)}},
		ours:     grpcOutcome{calls: 2, code: codes.OK, waits: []grpcWait{exactWait(backoff.DefaultMaxRetryAfter)}},
	},
	{
		// A pushback of 0 is a wait of 0 to grpc-go; ours reads it as no
		// hint, and waits the schedule's.
		name:     "a pushback of 0",
		policy:   grpcPolicyWith(nil),
		failures: []grpcFailure{withPushback(grpcUnavailable, "0")},
		grpcgo:   grpcOutcome{calls: 2, code: codes.OK, waits: []grpcWait{exactWait(0)}},
		ours:     grpcOutcome{calls: 2, code: codes.OK, waits: jitteredMs(100)},
	},
}

func TestGrpcRetryBeyondTheOverlap(t *testing.T) {
	for _, tc := range grpcBeyond {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				impl string
				want grpcOutcome
			}{{"grpcgo", tc.grpcgo}, {"ours", tc.ours}} {
				t.Run("impl="+c.impl, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						callGrpc(t, c.impl, tc.policy, tc.failures).check(t, c.want)
					})
				})
			}
		})
	}
	t.Run("hedging", testGrpcHedging)
}

// testGrpcHedging is the hedging comparison: a hedge sent after 50 ms to a
// fast replica answers a call whose first attempt went to a slow one.
// grpc-go does not implement hedging (grpc-go#2823): it accepts A6's
// hedgingPolicy in the service config and sends one attempt. Ours, with
// backoff.WithHedge, sends the hedge, answers after 50 ms, and cancels the
// slow attempt.
func testGrpcHedging(t *testing.T) {
	const hedgingConfig = `{"methodConfig": [{
		"name": [{"service": "grpc.testing.TestService"}],
		"hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.05s", "nonFatalStatusCodes": ["UNAVAILABLE"]}
	}]}`
	slowFirst := func(ctx context.Context, call int) error {
		if call == 1 {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
		return nil
	}
	t.Run("impl=grpcgo", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &grpcServer{answer: slowFirst}
			client := dialGrpc(t, srv, grpc.WithDefaultServiceConfig(hedgingConfig))
			start := time.Now()
			if _, err := client.EmptyCall(context.Background(), &testgrpc.Empty{}); err != nil {
				t.Fatal(err)
			}
			arrived, _ := srv.calls()
			if len(arrived) != 1 || time.Since(start) != time.Second {
				t.Errorf("%d calls, answered after %v; want 1 call, answered by the slow replica after 1s", len(arrived), time.Since(start))
			}
		})
	})
	t.Run("impl=ours", func(t *testing.T) {
		// The same policy as ours: a hedge after 50 ms, up to 2 hedges (3
		// attempts in flight), on the bubble's clock.
		synctest.Test(t, func(t *testing.T) {
			var lost atomic.Bool // the slow replica's call was cancelled
			srv := &grpcServer{answer: func(ctx context.Context, call int) error {
				err := slowFirst(ctx, call)
				if call == 1 {
					lost.Store(ctx.Err() != nil)
				}
				return err
			}}
			r := grpcbackoff.NewRetrier(backoff.Schedule{Steps: 3},
				backoff.WithHedge(50*time.Millisecond), backoff.WithMaxHedges(2))
			client := dialGrpc(t, srv, grpc.WithDisableRetry(), grpc.WithChainUnaryInterceptor(r.UnaryClientInterceptor()))
			start := time.Now()
			if _, err := client.EmptyCall(context.Background(), &testgrpc.Empty{}); err != nil {
				t.Fatal(err)
			}
			answered := time.Since(start)
			synctest.Wait() // the slow replica's handler sees its cancellation and returns
			arrived, previous := srv.calls()
			if len(arrived) != 2 || answered != 50*time.Millisecond {
				t.Errorf("%d calls, answered after %v; want 2 calls, answered by the hedge after 50ms", len(arrived), answered)
			}
			if !lost.Load() {
				t.Error("the slow replica's call was not cancelled when the hedge won")
			}
			if len(previous) == 2 && previous[1] != "1" {
				t.Errorf("the hedge's grpc-previous-rpc-attempts %q, want \"1\"", previous[1])
			}
		})
	})
}

// repeatGrpcWait returns n copies of w.
func repeatGrpcWait(n int, w grpcWait) []grpcWait {
	ws := make([]grpcWait, n)
	for i := range ws {
		ws[i] = w
	}
	return ws
}

// callGrpc makes one call with the client impl (of grpcClientImpls)
// configured with p, to a server that fails with failures, and returns what
// happened. It runs in a synctest bubble.
func callGrpc(t *testing.T, impl string, p grpcPolicy, failures []grpcFailure) grpcOutcome {
	t.Helper()
	var dialOpts []grpc.DialOption
	for _, im := range grpcClientImpls {
		if im.name == impl {
			dialOpts = im.make(&p)
		}
	}
	if dialOpts == nil {
		t.Fatalf("no client %q", impl)
	}
	srv := &grpcServer{answer: grpcFailing(failures...)}
	_, err := dialGrpc(t, srv, dialOpts...).EmptyCall(context.Background(), &testgrpc.Empty{})
	arrived, previous := srv.calls()
	for i, v := range previous {
		// Both send gRFC A6's count of the attempts before this one.
		if want := strconv.Itoa(i); (i == 0 && v != "") || (i > 0 && v != want) {
			t.Errorf("call %d: grpc-previous-rpc-attempts %q, want %q", i+1, v, want)
		}
	}
	out := grpcOutcome{calls: len(arrived), code: status.Code(err)}
	for i := 1; i < len(arrived); i++ {
		out.waits = append(out.waits, exactWait(arrived[i].Sub(arrived[i-1])))
	}
	return out
}

// check compares what happened, o, with what was expected: a jittered wait
// must lie in [0.8, 1.2) times the schedule's.
func (o grpcOutcome) check(t *testing.T, want grpcOutcome) {
	t.Helper()
	if o.calls != want.calls || o.code != want.code {
		t.Fatalf("%d calls, code %v; want %d, %v", o.calls, o.code, want.calls, want.code)
	}
	if len(want.waits) != len(o.waits) {
		t.Fatalf("the case expects %d waits between %d calls", len(want.waits), o.calls)
	}
	for i, w := range want.waits {
		got := o.waits[i].d
		lo, hi := w.d, w.d
		if w.jittered {
			lo, hi = w.d*8/10, w.d*12/10-1
		}
		if got < lo || got > hi {
			t.Errorf("wait %d: %v, want %v (in [%v, %v])", i+1, got, w.d, lo, hi)
		}
	}
}
