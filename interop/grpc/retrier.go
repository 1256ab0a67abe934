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
// caller's on success.
func (r *Retrier) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		var sent atomic.Int32
		callOpts = slices.Clip(callOpts)
		winner, err := backoff.RetryValue(ctx, r.schedule, func(actx context.Context) (any, error) {
			n := sent.Add(1)
			out := reply
			if n > 1 {
				actx = metadata.AppendToOutgoingContext(actx, PreviousAttemptsHeader, strconv.Itoa(int(n-1)))
				if m, ok := reply.(proto.Message); ok {
					out = m.ProtoReflect().New().Interface()
				}
			}
			var trailer metadata.MD
			err := invoker(actx, method, req, out, cc, append(callOpts, grpc.Trailer(&trailer))...)
			if err != nil {
				return nil, r.judge(ctx, actx, err, trailer)
			}
			return out, nil
		}, r.opts...)
		if dst, ok := reply.(proto.Message); ok && err == nil {
			if src := winner.(proto.Message); src != dst {
				proto.Reset(dst)
				proto.Merge(dst, src)
			}
		}
		return callError(err)
	}
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
