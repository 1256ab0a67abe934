package grpcbackoff

import (
	"context"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/retrykit/backoff"
)

// Resume returns a call option that lets [Retrier.StreamClientInterceptor]
// continue a server-streaming call whose stream broke after its first
// message: next returns the request that asks the server for the rest,
// given the call's request (the last one sent) and the last message
// received, typically a copy of req with the resume token that last carries.
// With false, the stream ends with the error that broke it. Pass it with
// the call:
//
//	stream, err := client.Watch(ctx, req, grpcbackoff.Resume(
//		func(req *pb.WatchRequest, last *pb.Event) (*pb.WatchRequest, bool) {
//			return &pb.WatchRequest{After: last.Token}, true
//		}))
//
// last is the value passed to the RecvMsg (or the generated Recv) that
// received it, so it stays valid if each Recv returns a new message, as
// generated code does. It is the zero Resp when the stream broke before its
// first message, after Header committed it. A request or message of
// another type than Req and Resp is not resumed. next runs on the
// goroutine that called RecvMsg. Without a grpc.ClientConn interceptor of
// this package, the option does nothing.
func Resume[Req, Resp any](next func(req Req, last Resp) (Req, bool)) grpc.CallOption {
	if next == nil {
		panic("grpcbackoff: Resume: next must not be nil")
	}
	return resumeOption{next: func(req, last any) (any, bool) {
		r, ok := req.(Req)
		if !ok {
			return nil, false
		}
		var l Resp
		if last != nil {
			if l, ok = last.(Resp); !ok {
				return nil, false
			}
		}
		return next(r, l)
	}}
}

// resumeOption is the call option of Resume: it changes nothing in grpc-go's
// call, and carries next to the interceptor.
type resumeOption struct {
	grpc.EmptyCallOption
	next func(req, last any) (any, bool)
}

// StreamClientInterceptor returns the interceptor that retries
// server-streaming calls; it passes client-streaming and bidirectional calls
// through unchanged. Install it with grpc.WithChainStreamInterceptor (or
// grpc.WithStreamInterceptor).
//
// The stream it returns sends the request, and receives the first message,
// on the first RecvMsg (or Header), retrying as backoff.Retry says until a
// message arrives, the stream ends without one (RecvMsg returns io.EOF), or
// an error is not retried; this is gRFC A6's commit point. Header, called
// first, commits the stream when the server's header arrives, as grpc-go
// does.
//
// After the commit, an error that breaks the stream is returned as is,
// unless the call has a [Resume] option and the error would be retried:
// then the stream is opened again with the request Resume returns, the
// break counting as a failed attempt of a new backoff.Retry (so the first
// reconnection waits the Schedule's first wait, or the server's pushback),
// and RecvMsg returns the first message of the new stream. A stream may be
// resumed any number of times; each reconnection that succeeds received a
// message, so a call that keeps breaking keeps making progress.
//
// The stream is safe to use as grpc-go's streams are: one goroutine may call
// RecvMsg while another calls Header, Trailer or Context. Each attempt's
// stream lives under the call's context; backoff.WithAttemptTimeout bounds
// an attempt until its first message, and not the stream after it.
func (r *Retrier) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		if !desc.ServerStreams || desc.ClientStreams {
			return streamer(ctx, desc, cc, method, callOpts...)
		}
		s := &retryStream{r: r, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, callOpts: callOpts}
		for _, o := range callOpts {
			if ro, ok := o.(resumeOption); ok {
				s.resume = ro.next
			}
		}
		return s, nil
	}
}

// retryStream is the stream of a server-streaming call: the attempts before
// its commit, then the committed stream, reopened on a break when the call
// can be resumed.
type retryStream struct {
	r        *Retrier
	ctx      context.Context // the caller's
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	callOpts []grpc.CallOption
	resume   func(req, last any) (any, bool)

	opening sync.Mutex // held while a stream is opened, by RecvMsg or Header

	mu   sync.Mutex
	req  any            // the request to send
	cur  *attemptStream // the committed stream; nil before the commit
	last any            // the last message received
	err  error          // the stream's end, once it ended
}

// attemptStream is one attempt's stream and what it received.
type attemptStream struct {
	cs     grpc.ClientStream
	cancel context.CancelFunc
	msg    any  // what the first RecvMsg decoded into
	eof    bool // the stream ended without a message
}

// SendMsg keeps the request, sent by every attempt; after the commit it
// goes to the stream.
func (s *retryStream) SendMsg(m any) error {
	s.mu.Lock()
	cur := s.cur
	if cur == nil {
		s.req = m
	}
	s.mu.Unlock()
	if cur != nil {
		return cur.cs.SendMsg(m)
	}
	return nil
}

// CloseSend does nothing: every attempt closes its side after the request.
func (s *retryStream) CloseSend() error { return nil }

// Context returns the committed stream's context, or the call's before the
// commit.
func (s *retryStream) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return s.cur.cs.Context()
	}
	return s.ctx
}

// Trailer returns the committed stream's trailer, or nil before the commit.
func (s *retryStream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return s.cur.cs.Trailer()
	}
	return nil
}

// Header commits the stream, if it is not yet, and returns its header.
func (s *retryStream) Header() (metadata.MD, error) {
	cur, err := s.committed(nil)
	if err != nil {
		return nil, err
	}
	return cur.cs.Header()
}

// committed returns the committed stream, opening it first if need be: with
// m, until its first message, which it decodes into m; with m nil, until
// its header.
func (s *retryStream) committed(m any) (*attemptStream, error) {
	s.opening.Lock()
	defer s.opening.Unlock()
	s.mu.Lock()
	cur, err := s.cur, s.err
	s.mu.Unlock()
	if cur != nil || err != nil {
		return cur, err
	}
	return s.open(m, nil)
}

// RecvMsg receives the next message into m: the first one opens the stream
// (see StreamClientInterceptor), and a break after it is resumed when it
// can be.
func (s *retryStream) RecvMsg(m any) error {
	s.opening.Lock()
	s.mu.Lock()
	cur, err := s.cur, s.err
	s.mu.Unlock()
	if err != nil {
		s.opening.Unlock()
		return err
	}
	if cur == nil {
		cur, err = s.open(m, nil)
		s.opening.Unlock()
		if err != nil {
			return err
		}
		if cur.eof {
			return s.end(io.EOF)
		}
		s.received(m)
		return nil
	}
	s.opening.Unlock()
	err = cur.cs.RecvMsg(m)
	switch {
	case err == nil:
		s.received(m)
		return nil
	case err == io.EOF:
		return s.end(io.EOF)
	}
	return s.reopen(m, cur, err)
}

// reopen resumes the stream that broke with err, when the call can be
// resumed and err would be retried, receiving the new stream's first
// message into m; otherwise the stream ends with err.
func (s *retryStream) reopen(m any, broken *attemptStream, err error) error {
	if s.resume == nil || s.ctx.Err() != nil {
		return s.end(err)
	}
	judged := s.r.judge(s.ctx, s.ctx, err, broken.cs.Trailer())
	if backoff.IsPermanent(judged) {
		return s.end(err)
	}
	s.mu.Lock()
	req, last := s.req, s.last
	s.mu.Unlock()
	next, ok := s.resume(req, last)
	if !ok {
		return s.end(err)
	}
	broken.cancel()
	s.opening.Lock()
	defer s.opening.Unlock()
	s.mu.Lock()
	s.req, s.cur = next, nil
	s.mu.Unlock()
	cur, err := s.open(m, judged)
	if err != nil {
		return err
	}
	if cur.eof {
		return s.end(io.EOF)
	}
	s.received(m)
	return nil
}

// received records m as the last message received.
func (s *retryStream) received(m any) {
	s.mu.Lock()
	s.last = m
	s.mu.Unlock()
}

// end ends the stream with err, releasing the committed stream's context.
func (s *retryStream) end(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	if s.cur != nil {
		s.cur.cancel()
	}
	return s.err
}

// open opens the stream with backoff.Retry until it commits: until its first
// message, decoded into m, or with m nil, until its header. A broken error
// is the failed attempt the retries start from (a committed stream that
// broke). Called with s.opening held.
func (s *retryStream) open(m any, broken error) (*attemptStream, error) {
	var calls atomic.Int32
	var mu sync.Mutex
	var opened []*attemptStream
	s.mu.Lock()
	req := s.req
	s.mu.Unlock()
	winner, err := backoff.RetryValue(s.ctx, s.r.schedule, func(actx context.Context) (*attemptStream, error) {
		n := calls.Add(1)
		if n == 1 && broken != nil {
			return nil, broken
		}
		sctx, cancel := context.WithCancel(s.ctx)
		a := &attemptStream{cancel: cancel, msg: m}
		mu.Lock()
		opened = append(opened, a)
		mu.Unlock()
		if n > 1 {
			sctx = metadata.AppendToOutgoingContext(sctx, PreviousAttemptsHeader, strconv.Itoa(int(n-1)))
			if pm, ok := m.(proto.Message); ok {
				// Attempts in flight at once (hedges) never share a message.
				a.msg = pm.ProtoReflect().New().Interface()
			}
		}
		// Until the commit, the attempt's end (its timeout, a lost hedge)
		// ends its stream; after it, the stream lives with the call.
		stop := context.AfterFunc(actx, cancel)
		cs, err := s.streamer(sctx, s.desc, s.cc, s.method, s.callOpts...)
		if err == nil {
			a.cs = cs
			err = s.first(cs, req, a)
		}
		if !stop() {
			cancel()
			if s.ctx.Err() == nil && actx.Err() == context.DeadlineExceeded {
				err = status.FromContextError(actx.Err()).Err() // the attempt's timeout
			}
			return nil, s.r.judge(s.ctx, actx, orCanceled(err), nil)
		}
		if err != nil {
			var trailer metadata.MD
			if cs != nil {
				trailer = cs.Trailer()
			}
			cancel()
			return nil, s.r.judge(s.ctx, actx, err, trailer)
		}
		return a, nil
	}, s.r.opts...)
	mu.Lock()
	for _, a := range opened {
		if a != winner {
			a.cancel()
		}
	}
	mu.Unlock()
	if err != nil {
		return nil, s.end(callError(err))
	}
	if dst, ok := m.(proto.Message); ok && !winner.eof {
		if src := winner.msg.(proto.Message); src != dst {
			proto.Reset(dst)
			proto.Merge(dst, src)
		}
	}
	s.mu.Lock()
	s.cur = winner
	s.mu.Unlock()
	return winner, nil
}

// first sends req on cs and waits for what commits it: a message decoded
// into a.msg (or the end of the stream), or with a.msg nil, the header.
func (s *retryStream) first(cs grpc.ClientStream, req any, a *attemptStream) error {
	err := cs.SendMsg(req)
	if err != nil && err != io.EOF { // io.EOF: RecvMsg reads the status
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	if a.msg == nil {
		md, err := cs.Header()
		if err != nil || md != nil {
			return err
		}
		// The stream ended without a header; RecvMsg reads its status. It
		// has no message left to decode.
		if err := cs.RecvMsg(&emptypb.Empty{}); err != nil && err != io.EOF {
			return err
		}
		a.eof = true
		return nil
	}
	err = cs.RecvMsg(a.msg)
	if err == io.EOF {
		a.eof = true
		return nil
	}
	return err
}

// orCanceled returns err, or when the attempt ended without one, the error
// of an attempt cut short.
func orCanceled(err error) error {
	if err != nil {
		return err
	}
	return context.Canceled
}
