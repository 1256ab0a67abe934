package backoff

import "time"

// A Reservation is the answer of [Limiter.ReserveN] or [KeyedLimiter.Reserve]:
// tokens taken now for events that may happen after [Reservation.Delay].
// It mirrors x/time/rate's Reservation, returned as a value so that
// reserving allocates nothing: keep it in a variable to call Cancel.
//
// A Reservation may be read by several goroutines, but Cancel must not race
// with another Cancel of the same Reservation. Its zero value is a
// reservation that is not OK.
type Reservation struct {
	owner     reservationOwner
	timeToAct time.Duration // the instant the events may happen
	limit     float64       // the limit when the tokens were taken
	tokens    int           // taken, and not yet given back
	ok        bool
}

// reservationOwner is the limiter a Reservation came from.
type reservationOwner interface {
	// instant is the owner's current instant, as its reservations count time.
	instant() time.Duration
	// cancelReservation gives r's tokens back at now.
	cancelReservation(r *Reservation, now time.Duration)
}

// OK reports whether the limiter granted the tokens. A reservation is not OK
// when it asked for more than the burst; its Delay is then the largest
// time.Duration and its Cancel does nothing.
func (r Reservation) OK() bool { return r.ok }

// Delay returns how long from now the caller must wait before the reserved
// events may happen: 0 when they may happen at once, never negative, and the
// largest time.Duration (x/time/rate's InfDuration) when the reservation is
// not OK or the limit is zero. It reads the limiter's clock.
func (r Reservation) Delay() time.Duration {
	if !r.ok || r.timeToAct == maxDuration {
		// A saturated time-to-act stands for "never" (a zero limit).
		return maxDuration
	}
	return max(r.timeToAct-r.owner.instant(), 0)
}

// Cancel gives the reserved tokens back, as far as that is still possible,
// by x/time/rate's rule: nothing once the reservation's time has come, and
// otherwise the tokens minus those that later reservations have already
// counted on, so those are not delayed. A second Cancel, and a Cancel of a
// reservation that is not OK, does nothing.
func (r *Reservation) Cancel() {
	if !r.ok || r.tokens == 0 {
		return
	}
	r.owner.cancelReservation(r, r.owner.instant())
	r.tokens = 0
}
