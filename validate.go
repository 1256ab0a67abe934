package backoff

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"

	"github.com/retrykit/backoff/internal/optionhook"
)

// The package's bad-input policy (see the package documentation): constructors,
// Option functions and the entry points of the helpers panic on arguments
// outside their domain (a nil function or context included), on the caller's
// goroutine, with a message that names the function and the parameter; values
// that arrive at call time are clamped. The helpers below are the only way the
// package panics on input, so that every such message has one shape:
//
//	backoff: NewBackOff: initial must be positive, got -1s
//	backoff: Retry: fn must not be nil, got <nil>
//
// (an invariant check that reports a bug of the package itself is not input,
// and says "internal error" instead).

// badArgument panics with the package's message for an argument outside its
// domain. where names the function, problem says which parameter and what it
// must be. A string is quoted, so that an empty one reads got "".
func badArgument(where, problem string, got any) {
	if s, ok := got.(string); ok {
		got = strconv.Quote(s)
	}
	panic(fmt.Sprintf("backoff: %s: %s, got %v", where, problem, got))
}

// badUse panics with the package's message for a call the package cannot
// serve, such as a method called on an unusable zero value: "backoff: where:
// problem".
func badUse(where, problem string) {
	panic(fmt.Sprintf("backoff: %s: %s", where, problem))
}

// raiseAgain panics with p, what a caller's function panicked with on
// another goroutine (a hedge of Retry's), so that the panic reaches the
// caller's goroutine as it would have without the goroutine. It is neither
// bad input nor an internal error: the panic is the caller's own.
func raiseAgain(p any) {
	panic(p)
}

// mustNotBeNil panics with "name must not be nil" if isNil is set. The caller
// tests its own argument (fn == nil), so that a func or context is not
// converted to an interface, which could make it escape on a hot path.
func mustNotBeNil(where, name string, isNil bool) {
	if isNil {
		badArgument(where, name+" must not be nil", nil)
	}
}

// isNilValue reports whether v is nil or holds a nil pointer, func, map,
// slice, channel or interface: a typed nil, which passes a plain v == nil test
// and crashes on first use.
func isNilValue(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// mustBePositive panics unless d > 0.
func mustBePositive(where, name string, d time.Duration) {
	if d <= 0 {
		badArgument(where, name+" must be positive", d)
	}
}

// mustNotBeNegative panics if d < 0.
func mustNotBeNegative(where, name string, d time.Duration) {
	if d < 0 {
		badArgument(where, name+" must not be negative", d)
	}
}

// mustBeFactor panics unless f is a finite number ≥ 0: NaN, ±Inf and negative
// values have no meaning as a jitter or growth factor.
func mustBeFactor(where, name string, f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		badArgument(where, name+" must be a finite number ≥ 0", f)
	}
}

// retryScheduleProblem says why [Retry] refuses s, with the field's value, or
// returns "" when Retry accepts it. It is Retry's one rule for a Schedule,
// which httpretry's constructors apply too (through optionhook), so that a
// Transport refuses at construction what Retry would refuse on every
// request. A Schedule that Retry replaces with DefaultRetry is accepted
// whatever its other fields say.
func retryScheduleProblem(s Schedule) (problem string, got float64) {
	if s.Steps <= 0 && s.Duration <= 0 {
		return "", 0
	}
	if math.IsInf(s.Factor, 1) && s.Cap <= 0 {
		return "s.Factor must be finite when s.Cap is not set", s.Factor
	}
	if s.Jitter > MaxRetryJitter {
		return "s.Jitter must be at most " + strconv.Itoa(MaxRetryJitter), s.Jitter
	}
	return "", 0
}

func init() {
	optionhook.ScheduleProblem = func(s any) string {
		problem, got := retryScheduleProblem(s.(Schedule))
		if problem == "" {
			return ""
		}
		return fmt.Sprintf("%s, got %v", problem, got)
	}
}
