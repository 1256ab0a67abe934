package backoff

// Permanent marks err as not worth retrying: [Retry] returns it at once when
// fn returns it, mark included (see Retry for why), and the queue's worker
// loop forgets the item instead of requeueing it. Permanent(nil) is nil, so
// that
//
//	return backoff.Permanent(err)
//
// is safe whether or not err is set. The mark survives wrapping with
// fmt.Errorf("...: %w", err), and errors.Is and errors.As see through it to
// err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// PermanentError is the error [Permanent] returns. Match it with errors.As,
// or test for it with [IsPermanent]; errors.Is(err, &PermanentError{}) is
// false, as for any pointer that is not in err's chain.
type PermanentError struct {
	Err error // the error that is not to be retried
}

// Error returns the message of the wrapped error, unchanged.
func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error, for errors.Is and errors.As.
func (e *PermanentError) Unwrap() error { return e.Err }

// IsPermanent reports whether err, or any error it wraps, was marked with
// [Permanent]: whether errors.As finds a *PermanentError in err's chain
// (through As methods too). [Retry] and [RunWorkers] classify errors the same
// way, so an error IsPermanent reports is never retried.
func IsPermanent(err error) bool {
	permanent, _, _ := inspectError(err)
	return permanent
}
