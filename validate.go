package backoff

import (
	"fmt"
	"math"
	"time"
)

// The package's bad-input policy (see the package documentation): constructors
// and Option functions panic on arguments outside their domain, with a message
// that names the function and the parameter; values that arrive at call time
// are clamped. The helpers below are the only way the package panics on input,
// so that every such message has one shape:
//
//	backoff: NewBackOff: initial must be positive, got -1s

// badArgument panics with the package's message for an argument outside its
// domain. where names the function, problem says which parameter and what it
// must be.
func badArgument(where, problem string, got any) {
	panic(fmt.Sprintf("backoff: %s: %s, got %v", where, problem, got))
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
