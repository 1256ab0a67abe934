package grpcbackoff_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
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

// Messages of the stream tests carry their sequence number in their body,
// and a request the number to start from.

func seq(i int) *testgrpc.StreamingOutputCallResponse {
	return &testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte(strconv.Itoa(i))}}
}

func seqOf(t *testing.T, m *testgrpc.StreamingOutputCallResponse) int {
	t.Helper()
	i, err := strconv.Atoi(string(m.GetPayload().GetBody()))
	if err != nil {
		t.Fatalf("message %v: %v", m, err)
	}
	return i
}

func startOf(req *testgrpc.StreamingOutputCallRequest) int {
	i, _ := strconv.Atoi(string(req.GetPayload().GetBody()))
	return i
}

func fromSeq(i int) *testgrpc.StreamingOutputCallRequest {
	return &testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(strconv.Itoa(i))}}
}

// resumeAfterLast is the Resume of the tests: ask for the messages after the
// last one received.
var resumeAfterLast = grpcbackoff.Resume(func(_ *testgrpc.StreamingOutputCallRequest, last *testgrpc.StreamingOutputCallResponse) (*testgrpc.StreamingOutputCallRequest, bool) {
	i, err := strconv.Atoi(string(last.GetPayload().GetBody()))
	return fromSeq(i + 1), err == nil
})

// recvAll receives until the stream ends and returns the sequence numbers
// and the error that ended it (nil for io.EOF).
func recvAll(t *testing.T, stream testgrpc.TestService_StreamingOutputCallClient) ([]int, error) {
	t.Helper()
	var got []int
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, seqOf(t, m))
	}
}

func TestStreamRetriedUntilTheFirstMessage(t *testing.T) {
	forEachTransport(t, func(t *testing.T, transport string) {
		clk := backofftest.NewAutoStepClock(epoch)
		srv := &testServer{stream: func(call int, req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			if call <= 2 {
				return status.Error(codes.Unavailable, "not yet")
			}
			for i := startOf(req); i < 3; i++ {
				if err := ss.Send(seq(i)); err != nil {
					return err
				}
			}
			return nil
		}}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Factor: 2, Steps: 5}, backoff.WithClock(clk))
		stream, err := dial(t, transport, srv, r).StreamingOutputCall(context.Background(), fromSeq(0))
		if err != nil {
			t.Fatal(err)
		}
		got, err := recvAll(t, stream)
		if err != nil || !slices.Equal(got, []int{0, 1, 2}) {
			t.Fatalf("received %v, %v; want 0 1 2 and the end", got, err)
		}
		if got, want := srv.calls(), []string{"", "1", "2"}; !slices.Equal(got, want) {
			t.Errorf("calls %q, want %q", got, want)
		}
		if clk.Since(epoch) != 3*time.Second {
			t.Errorf("waited %v, want 1+2 s", clk.Since(epoch))
		}
	})
}

func TestStreamNotResumedWithoutResume(t *testing.T) {
	forEachTransport(t, func(t *testing.T, transport string) {
		srv := &testServer{stream: func(_ int, _ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			if err := ss.Send(seq(0)); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "broke")
		}}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Steps: 5},
			backoff.WithClock(backofftest.NewAutoStepClock(epoch)))
		stream, err := dial(t, transport, srv, r).StreamingOutputCall(context.Background(), fromSeq(0))
		if err != nil {
			t.Fatal(err)
		}
		got, err := recvAll(t, stream)
		if !slices.Equal(got, []int{0}) || status.Code(err) != codes.Unavailable {
			t.Fatalf("received %v, %v; want 0, then the break", got, err)
		}
		if n := len(srv.calls()); n != 1 {
			t.Errorf("%d calls, want 1: a committed stream is not retried", n)
		}
	})
}

func TestStreamGivesUpBeforeTheFirstMessage(t *testing.T) {
	srv := &testServer{stream: func(int, *testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
		return status.Error(codes.Unavailable, "down")
	}}
	r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Steps: 3},
		backoff.WithClock(backofftest.NewAutoStepClock(epoch)))
	stream, err := dial(t, "bufconn", srv, r).StreamingOutputCall(context.Background(), fromSeq(0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	var re *backoff.RetryError
	if status.Code(err) != codes.Unavailable || !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("error %v: want Unavailable after 3 attempts", err)
	}
	if _, again := stream.Recv(); again != err {
		t.Errorf("second Recv: %v, want the same error", again)
	}
}

// TestStreamResumesAcrossDisconnects breaks the stream 1,000 times, after 0
// to 4 messages each time: mostly with UNAVAILABLE from the handler, every
// tenth time by closing the connection under it (the client reconnects).
// With a Resume that asks for the messages after the last one received,
// each message arrives exactly once, in order.
func TestStreamResumesAcrossDisconnects(t *testing.T) {
	const (
		breaks = 1000
		total  = 3000
	)
	forEachTransport(t, func(t *testing.T, transport string) {
		rng := rand.New(rand.NewPCG(1, 2))
		injected := 0
		var srv *testServer
		srv = &testServer{stream: func(_ int, req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			// Calls of one client's stream are sequential: injected needs no lock.
			k := total
			if injected < breaks {
				k = rng.IntN(5)
			}
			for i := startOf(req); i < total; i++ {
				if k == 0 {
					injected++
					if injected%10 == 0 {
						srv.lis.disconnect()
						<-ss.Context().Done()
						return ss.Context().Err()
					}
					return status.Error(codes.Unavailable, "injected")
				}
				k--
				if err := ss.Send(seq(i)); err != nil {
					return err
				}
			}
			return nil
		}}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Millisecond, Factor: 2, Cap: time.Second},
			backoff.WithClock(backofftest.NewAutoStepClock(epoch)))
		stream, err := dial(t, transport, srv, r).StreamingOutputCall(context.Background(), fromSeq(0), resumeAfterLast)
		if err != nil {
			t.Fatal(err)
		}
		got, err := recvAll(t, stream)
		if err != nil {
			t.Fatalf("after %d messages: %v", len(got), err)
		}
		for i, s := range got {
			if s != i {
				t.Fatalf("message %d has sequence number %d: lost or duplicated", i, s)
			}
		}
		if len(got) != total || injected != breaks {
			t.Errorf("%d messages over %d breaks, want %d over %d", len(got), injected, total, breaks)
		}
		if n := srv.lis.connections(); n != 1+breaks/10 {
			t.Errorf("%d connections, want %d: one, and one more after each disconnection", n, 1+breaks/10)
		}
	})
}

func TestStreamHeaderCommits(t *testing.T) {
	forEachTransport(t, func(t *testing.T, transport string) {
		srv := &testServer{stream: func(call int, _ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			if call == 1 {
				return status.Error(codes.Unavailable, "no header yet")
			}
			if err := ss.SendHeader(metadata.Pairs("call", strconv.Itoa(call))); err != nil {
				return err
			}
			for i := range 2 {
				if err := ss.Send(seq(i)); err != nil {
					return err
				}
			}
			return status.Error(codes.Unavailable, "broke after the commit")
		}}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Steps: 5},
			backoff.WithClock(backofftest.NewAutoStepClock(epoch)))
		stream, err := dial(t, transport, srv, r).StreamingOutputCall(context.Background(), fromSeq(0))
		if err != nil {
			t.Fatal(err)
		}
		md, err := stream.Header()
		if err != nil || !slices.Equal(md.Get("call"), []string{"2"}) {
			t.Fatalf("Header: %v, %v; want the second call's", md, err)
		}
		got, err := recvAll(t, stream)
		if !slices.Equal(got, []int{0, 1}) || status.Code(err) != codes.Unavailable {
			t.Fatalf("received %v, %v; want 0 1 and the break: Header committed the stream", got, err)
		}
		if n := len(srv.calls()); n != 2 {
			t.Errorf("%d calls, want 2", n)
		}
	})
}

// TestStreamAttemptTimeoutEndsAtTheCommit: backoff.WithAttemptTimeout bounds
// the wait for the first message, and not the stream after it.
func TestStreamAttemptTimeoutEndsAtTheCommit(t *testing.T) {
	forEachTransport(t, func(t *testing.T, transport string) {
		clk := testclock.NewFakeClock(epoch)
		arrived, proceed := make(chan struct{}), make(chan struct{})
		srv := &testServer{stream: func(call int, _ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			if call == 1 {
				close(arrived)
				<-ss.Context().Done() // stalls until the client gives the attempt up
				return ss.Context().Err()
			}
			if err := ss.Send(seq(0)); err != nil {
				return err
			}
			<-proceed
			return ss.Send(seq(1))
		}}
		r := grpcbackoff.NewRetrier(backoff.Schedule{Steps: 3},
			backoff.WithClock(clk), backoff.WithAttemptTimeout(2*time.Second))
		stream, err := dial(t, transport, srv, r).StreamingOutputCall(context.Background(), fromSeq(0))
		if err != nil {
			t.Fatal(err)
		}
		stepped := make(chan struct{})
		go func() {
			defer close(stepped)
			<-arrived // the attempt's timer is set before the stream opens
			clk.Step(2 * time.Second)
		}()
		m, err := stream.Recv()
		<-stepped
		if err != nil || seqOf(t, m) != 0 {
			t.Fatalf("first Recv: %v, %v; want message 0 of the second attempt", m, err)
		}
		clk.Step(time.Hour) // past any attempt timeout: the committed stream lives on
		close(proceed)
		got, err := recvAll(t, stream)
		if err != nil || !slices.Equal(got, []int{1}) {
			t.Fatalf("then received %v, %v; want 1 and the end", got, err)
		}
		if got, want := srv.calls(), []string{"", "1"}; !slices.Equal(got, want) {
			t.Errorf("calls %q, want %q", got, want)
		}
	})
}

// TestStreamBreakNotResumed: with a Resume, a break is resumed only when
// its error would be retried and Resume says so.
func TestStreamBreakNotResumed(t *testing.T) {
	refuse := grpcbackoff.Resume(func(*testgrpc.StreamingOutputCallRequest, *testgrpc.StreamingOutputCallResponse) (*testgrpc.StreamingOutputCallRequest, bool) {
		return nil, false
	})
	for _, tc := range []struct {
		name    string
		code    codes.Code
		trailer metadata.MD
		resume  grpc.CallOption
	}{
		{name: "a code not retried", code: codes.InvalidArgument, resume: resumeAfterLast},
		{name: "a negative pushback", code: codes.Unavailable, trailer: metadata.Pairs(grpcbackoff.PushbackTrailer, "-1"), resume: resumeAfterLast},
		{name: "Resume refuses", code: codes.Unavailable, resume: refuse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &testServer{stream: func(_ int, _ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
				if err := ss.Send(seq(0)); err != nil {
					return err
				}
				if tc.trailer != nil {
					ss.SetTrailer(tc.trailer)
				}
				return status.Error(tc.code, "broke")
			}}
			r := grpcbackoff.NewRetrier(backoff.Schedule{Duration: time.Second, Steps: 5},
				backoff.WithClock(backofftest.NewAutoStepClock(epoch)))
			stream, err := dial(t, "bufconn", srv, r).StreamingOutputCall(context.Background(), fromSeq(0), tc.resume)
			if err != nil {
				t.Fatal(err)
			}
			got, err := recvAll(t, stream)
			if !slices.Equal(got, []int{0}) || status.Code(err) != tc.code || status.Convert(err).Message() != "broke" {
				t.Fatalf("received %v, %v; want 0, then the break as the server sent it", got, err)
			}
			if n := len(srv.calls()); n != 1 {
				t.Errorf("%d calls, want 1", n)
			}
		})
	}
}
