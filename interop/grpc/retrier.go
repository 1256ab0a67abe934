package grpcbackoff

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/retrykit/backoff"
)

// Retrier retries gRPC calls with backoff.Retry, on a Schedule and options
// given to [NewRetrier]; its interceptors are installed on a
// grpc.ClientConn. Its fields choose the codes retried.
//
// A Retrier is safe for concurrent use by multiple goroutines, as long as its
// fields are not changed once its interceptors are in use. Each call retries
// on its own goroutine: its waits are its own. The zero Retrier retries as
// NewRetrier(backoff.Schedule{}) does: on backoff.DefaultRetry (5 attempts,
// 10 ms apart), with no options.
type Retrier struct {
	// RetryableCodes are the codes retried whatever the server says, as
	// gRFC A6's retryableStatusCodes. nil means UNAVAILABLE alone; an empty
	// slice that is not nil, none.
	RetryableCodes []codes.Code

	// PushbackCodes are the codes retried only when the server sent a valid
	// pushback (see [PushbackTrailer]). nil means RESOURCE_EXHAUSTED alone:
	// a server that has run out of a resource is asked again only when it
	// says when. An empty slice that is not nil, none.
	PushbackCodes []codes.Code

	schedule backoff.Schedule
	opts     []backoff.Option
}

// NewRetrier returns a Retrier whose calls are retried with
// backoff.Retry(ctx, s, attempt, opts...), where ctx is the call's context:
// the Schedule's waits and attempts (s.Steps, the first included; no other
// cap), and every option Retry reads (WithClock, WithJitterKind,
// WithMaxElapsedTime, WithRetryBudget, WithPacer, WithAttemptTimeout,
// WithMinAttemptTime, WithNotify, WithMaxRetryAfter...) mean what they mean
// for Retry. As for Retry, a Schedule with neither Steps nor Duration (the
// zero Schedule among them) means backoff.DefaultRetry. opts are kept as
// given; do not change the slice's elements afterwards.
//
// The interceptor decides which errors are retried (see the fields) and
// marks the others backoff.Permanent; a backoff.WithRetryable among opts
// can only narrow that choice further. The hooks of opts run on the
// goroutine of the call they concern.
//
// NewRetrier panics, with backoff.Retry's message, on a Schedule that Retry
// refuses (an infinite s.Factor without s.Cap, an s.Jitter above
// backoff.MaxRetryJitter), so that the mistake shows when the Retrier is
// built rather than in a call.
func NewRetrier(s backoff.Schedule, opts ...backoff.Option) *Retrier {
	checkSchedule(s)
	return &Retrier{schedule: s, opts: slices.Clip(opts)}
}

// checkSchedule panics, as NewRetrier, on a Schedule that backoff.Retry
// refuses: Retry checks it before its first attempt, so a call of a function
// that succeeds at once asks it, here once instead of in every gRPC call.
func checkSchedule(s backoff.Schedule) {
	defer func() {
		if p := recover(); p != nil {
			panic(fmt.Sprintf("grpcbackoff: NewRetrier: %v", p))
		}
	}()
	_ = backoff.Retry(context.Background(), s, func(context.Context) error { return nil })
}

// UnaryClientInterceptor returns the interceptor that retries unary calls,
// as the package documentation says. Install it with
// grpc.WithChainUnaryInterceptor (or grpc.WithUnaryInterceptor).
//
// The call options are passed to every attempt, with a grpc.Trailer option
// of the interceptor's to read the pushback. The reply is decoded into the
// caller's message by the first attempt; a later one decodes into a new
// message of the same type when the reply is a protocol buffer (so that
// attempts in flight at once never write the same message), copied into the
// caller's on success. A call whose first attempt succeeds, with at most
// three call options (generated code passes one, grpc.StaticMethod),
// allocates twice more than without the interceptor (the call's state, and
// the attempt function that backoff.Retry keeps on the heap since a hedge
// may call it from another goroutine), besides grpc-go's copy of the
// trailer that the grpc.Trailer option asks for.
func (r *Retrier) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		// The call's allocations of its own: c (see unaryCall) and the
		// method value c.attempt, which escapes into Retry (its hedges may
		// call it); Retry itself allocates nothing more when the first
		// attempt succeeds.
		c := &unaryCall{r: r, ctx: ctx, method: method, req: req, reply: reply, cc: cc, invoker: invoker, callOpts: callOpts}
		err := backoff.Retry(ctx, r.schedule, c.attempt, r.opts...)
		if dst, ok := reply.(proto.Message); ok && err == nil {
			if src := c.winner.(proto.Message); src != dst {
				proto.Reset(dst)
				proto.Merge(dst, src)
			}
		}
		return callError(err)
	}
}

// firstAttemptOptions is how many call options the first attempt of a call
// passes without allocating: the interceptor's grpc.Trailer and three of
// the caller's (generated code passes grpc.StaticMethod, and the caller's
// own after it).
const firstAttemptOptions = 4

// unaryCall is one call of the unary interceptor: what its attempts share,
// and the first attempt's trailer and call options, so that a call whose
// first attempt succeeds allocates this struct alone. It is on the heap
// because grpc-go writes the trailer through the pointer the grpc.Trailer
// option holds. Attempts after the first get a trailer and an option slice
// of their own, since attempts in flight at once (a hedge) must not share
// them; those are retries, not the path of a call that succeeds at once.
type unaryCall struct {
	r            *Retrier
	ctx          context.Context
	method       string
	req, reply   any
	cc           *grpc.ClientConn
	invoker      grpc.UnaryInvoker
	callOpts     []grpc.CallOption
	sent         atomic.Int32 // attempts started
	winner       any          // the reply of the attempt that succeeded
	firstTrailer metadata.MD
	firstOpts    [firstAttemptOptions]grpc.CallOption
}

// attempt is one attempt of the call, for backoff.Retry. The first decodes
// the reply into the caller's message; a later one into a new message of the
// same type when the reply is a protocol buffer, and sends
// grpc-previous-rpc-attempts.
func (c *unaryCall) attempt(actx context.Context) error {
	n := c.sent.Add(1)
	out := c.reply
	trailer := &c.firstTrailer
	var opts []grpc.CallOption
	if n == 1 {
		opts = append(c.firstOpts[:0], c.callOpts...) // allocates only past firstAttemptOptions-1 options
	} else {
		actx = metadata.AppendToOutgoingContext(actx, PreviousAttemptsHeader, strconv.Itoa(int(n-1)))
		if m, ok := c.reply.(proto.Message); ok {
			out = m.ProtoReflect().New().Interface()
		}
		trailer = new(metadata.MD)
		opts = slices.Clip(c.callOpts) // the append below must not write into the caller's array
	}
	// grpc.Trailer is how a unary interceptor reads the pushback; grpc-go
	// allocates a copy of the trailer for it.
	err := c.invoker(actx, c.method, c.req, out, c.cc, append(opts, grpc.Trailer(trailer))...)
	if err != nil {
		return c.r.judge(c.ctx, actx, err, *trailer)
	}
	c.winner = out
	return nil
}

// judge returns the error an attempt made under actx, within a call made
// under ctx, gives Retry: classified for the pacers (Classify), with the
// pushback as a backoff.RetryAfter hint, and marked backoff.Permanent when
// it is not to be retried.
func (r *Retrier) judge(ctx, actx context.Context, err error, trailer metadata.MD) error {
	if ctx.Err() != nil {
		return err // the caller's end: Retry stops and reports it
	}
	switch actx.Err() {
	case nil:
	case context.DeadlineExceeded:
		// The attempt's own timeout: retried whatever the code grpc-go
		// gave the attempt, and a timeout to the pacers.
		return &timeoutError{err: err}
	default:
		return err // Retry ended the attempt (a hedge that lost): it discards it
	}
	code := status.Code(err)
	ms, present, valid := pushback(trailer)
	classified := Classify(err)
	switch {
	case present && !valid:
		return backoff.Permanent(classified) // the server asks for no retry
	case r.retryable(code):
	case valid && r.retryableOnPushback(code):
	default:
		return backoff.Permanent(classified)
	}
	if valid {
		// A pushback of 0 is no hint to backoff.RetryAfter: the Schedule's
		// wait applies.
		return backoff.RetryAfter(msDuration(ms), classified)
	}
	return classified
}

func (r *Retrier) retryable(c codes.Code) bool {
	if r.RetryableCodes == nil {
		return c == codes.Unavailable
	}
	return slices.Contains(r.RetryableCodes, c)
}

func (r *Retrier) retryableOnPushback(c codes.Code) bool {
	if r.PushbackCodes == nil {
		return c == codes.ResourceExhausted
	}
	return slices.Contains(r.PushbackCodes, c)
}
