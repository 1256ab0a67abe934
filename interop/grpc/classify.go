package grpcbackoff

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrykit/backoff"
)

// PushbackTrailer is the trailer in which a server tells the client how long
// to wait before the next attempt, in milliseconds (gRFC A6): a
// non-negative integer is a backoff.RetryAfter hint, and a negative or
// unparsable value asks the client not to retry.
const PushbackTrailer = "grpc-retry-pushback-ms"

// PreviousAttemptsHeader is the metadata key that every attempt after the
// first carries, with the number of attempts of the call sent before it
// (gRFC A6), so that a server can tell a retry from a first attempt.
const PreviousAttemptsHeader = "grpc-previous-rpc-attempts"

// Classify returns err marked with what its gRPC status says about the
// server, for the outcome rules of backoff's pacers (backoff.WithPacer) and
// Retry: UNAVAILABLE and RESOURCE_EXHAUSTED are wrapped so that
// errors.Is(err, backoff.ErrOverloaded) holds, and DEADLINE_EXCEEDED so that
// the chain holds an error whose Timeout method returns true. Every other
// error is returned as is, and nil is nil. The marked error keeps err's
// message, status (status.FromError, status.Code) and chain (errors.Is,
// errors.As).
//
// A CANCELED attempt needs no mark: when the caller's context ended, Retry
// and the pacers count the attempt as neutral, whatever its error. The
// interceptors classify every attempt themselves; Classify is for code that
// calls backoff.Retry around a gRPC call of its own. It is safe for
// concurrent use and allocates only for the codes it marks.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted:
		e := &overloadError{err: err}
		e.chain = [2]error{err, backoff.ErrOverloaded}
		return e
	case codes.DeadlineExceeded:
		return &timeoutError{err: err}
	}
	return err
}

// overloadError is an attempt's error that signals overload: its chain holds
// the error and backoff.ErrOverloaded.
type overloadError struct {
	err   error
	chain [2]error // err, ErrOverloaded: Unwrap's answer, without allocating
}

func (e *overloadError) Error() string              { return e.err.Error() }
func (e *overloadError) Unwrap() []error            { return e.chain[:] }
func (e *overloadError) GRPCStatus() *status.Status { return status.Convert(e.err) }
func (e *overloadError) original() error            { return e.err }

// timeoutError is an attempt's error that is a timeout: the pacers look for
// the Timeout method.
type timeoutError struct{ err error }

func (e *timeoutError) Error() string              { return e.err.Error() }
func (e *timeoutError) Unwrap() error              { return e.err }
func (e *timeoutError) Timeout() bool              { return true }
func (e *timeoutError) GRPCStatus() *status.Status { return status.Convert(e.err) }
func (e *timeoutError) original() error            { return e.err }

// original returns the error the attempt returned, without the marks that
// Classify and the retry decision added.
func original(err error) error {
	for {
		switch e := err.(type) {
		case *backoff.PermanentError:
			err = e.Err
		case *backoff.RetryAfterError:
			err = e.Err
		case interface{ original() error }:
			return e.original()
		default:
			return err
		}
	}
}

// pushback reads the server's pushback from an attempt's trailer: present
// reports whether there is one, and ok whether it is valid (a non-negative
// integer of milliseconds).
func pushback(trailer metadata.MD) (ms int64, present, ok bool) {
	v := trailer.Get(PushbackTrailer)
	if len(v) == 0 {
		return 0, false, false
	}
	ms, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || ms < 0 {
		return 0, true, false
	}
	return ms, true, true
}

// retryError is the error of a call whose retries stopped: the status the
// caller sees, and the *backoff.RetryError in its chain.
type retryError struct {
	st  *status.Status
	err *backoff.RetryError
}

func (e *retryError) Error() string              { return e.st.Err().Error() }
func (e *retryError) Unwrap() error              { return e.err }
func (e *retryError) GRPCStatus() *status.Status { return e.st }

// callError turns Retry's answer into the call's: nil, the last attempt's
// error as grpc-go returned it when it was not retried, or a status error
// around the *backoff.RetryError when the retries stopped (see the package
// documentation).
func callError(err error) error {
	if err == nil {
		return nil
	}
	re, ok := err.(*backoff.RetryError)
	if !ok {
		return original(err) // not retried: as the attempt returned it
	}
	code := codes.Unavailable // a refusal of a pacer: nothing was sent
	switch {
	case errors.Is(re.Reason, context.Canceled):
		code = codes.Canceled
	case errors.Is(re.Reason, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case re.Last != nil:
		if st, ok := status.FromError(original(re.Last)); ok {
			code = st.Code()
		}
	}
	return &retryError{st: status.New(code, re.Error()), err: re}
}

// msDuration converts a pushback in milliseconds to a duration, saturating
// instead of overflowing (backoff.WithMaxRetryAfter bounds it anyway).
func msDuration(ms int64) time.Duration {
	const most = int64(math.MaxInt64 / int64(time.Millisecond))
	if ms > most {
		ms = most
	}
	return time.Duration(ms) * time.Millisecond
}
