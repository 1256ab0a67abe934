package redis

import (
	"context"
	"math"
	"sync"
	"time"
)

// InfDuration is what Reservation.Delay returns for a reservation that is
// not OK, as x/time/rate does.
const InfDuration = time.Duration(math.MaxInt64)

// Reservation holds events admitted for a time that may be in the future, as
// returned by Reserve. It is safe for concurrent use.
type Reservation struct {
	l      *gcra
	key    string
	n      int
	d      decision
	at     time.Time // local clock when the decision arrived
	cancel sync.Once
}

// OK reports whether the events were admitted. A reservation is not OK when
// n exceeds the burst, when its wait would exceed the longest wait asked for,
// or when Redis was unavailable and the limiter fails closed.
func (r *Reservation) OK() bool { return r.d.Allowed }

// Delay returns how long from now the caller must wait before the events may
// happen: 0 if they may happen now, [InfDuration] if the reservation is not
// OK. It is measured on the limiter's local clock from the moment the
// decision arrived.
func (r *Reservation) Delay() time.Duration {
	if !r.d.Allowed {
		return InfDuration
	}
	return max(0, r.d.delay-r.l.clock.Since(r.at))
}

// Shared reports whether Redis made the decision (true) or the local
// fallback did.
func (r *Reservation) Shared() bool { return r.d.Shared }

// Cancel gives the reserved events back, as far as they are still to come,
// so that other callers may use them; call it when the caller will not act
// on the reservation after all. A shared reservation is given back in Redis,
// within the limiter's timeout; if Redis does not answer, the events stay
// spent (erring on the side of the limit). Cancel of a reservation that is
// not OK, or a second Cancel, does nothing.
func (r *Reservation) Cancel() {
	if !r.d.Allowed {
		return
	}
	r.cancel.Do(func() { r.l.cancel(r.key, r.n, &r.d) })
}

// reserve is ReserveN's engine, shared by Limiter and KeyedLimiter.
func (l *gcra) reserve(ctx context.Context, key string, n int, maxWait time.Duration) (*Reservation, error) {
	if n <= 0 {
		return &Reservation{l: l, key: key, d: decision{Result: Result{Allowed: true, Shared: true}}, at: l.clock.Now()}, nil
	}
	var d [1]decision
	if err := l.decide(ctx, []string{key}, n, maxWait, d[:]); err != nil {
		return &Reservation{l: l, key: key, n: n, d: decision{Result: Result{RetryAfter: -1}}}, err
	}
	return &Reservation{l: l, key: key, n: n, d: d[0], at: l.clock.Now()}, nil
}

// wait is WaitN's engine: it reserves no further ahead than ctx's deadline,
// then waits on the local clock, cancelling the reservation if ctx ends
// first.
func (l *gcra) wait(ctx context.Context, key string, n int) error {
	if err := l.checkN(key, n); err != nil {
		return err
	}
	maxWait := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		maxWait = max(0, dl.Sub(l.clock.Now()))
	}
	r, err := l.reserve(ctx, key, n, maxWait)
	if err != nil {
		return err
	}
	if !r.OK() {
		return ErrWouldExceedDeadline
	}
	delay := r.Delay()
	if delay == 0 {
		return nil
	}
	t := l.clock.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		r.Cancel()
		return context.Cause(ctx)
	}
}

// allow is AllowN's engine.
func (l *gcra) allow(ctx context.Context, key string, n int) (Result, error) {
	if n <= 0 {
		return Result{Allowed: true, Shared: true}, nil
	}
	var d [1]decision
	if err := l.decide(ctx, []string{key}, n, 0, d[:]); err != nil {
		return Result{RetryAfter: -1}, err
	}
	return d[0].Result, nil
}
