// Package optionhook lets package httpretry use what package backoff's Retry
// alone would otherwise read: the notify hook of its options, for a retry
// that httpretry skips without calling Retry's loop, and Retry's rule for a
// Schedule, which httpretry applies when a Transport is built. Only package
// backoff can decode its options and Schedules; it sets the hooks when it is
// initialised.
package optionhook

import (
	"context"
	"time"
)

// Notify calls the notify hook that opts, a []backoff.Option, carries (the
// last backoff.WithNotify among them), if any, with attempt, err and next.
var Notify func(opts any, attempt int, err error, next time.Duration)

// ScheduleProblem says why backoff.Retry would refuse s, a backoff.Schedule,
// with the value at fault ("s.Jitter must be at most 10, got 100"), or
// returns "" when Retry accepts it.
var ScheduleProblem func(s any) string

// AttemptTimeout returns the attempt timeout that opts, a []backoff.Option,
// carry (backoff.WithAttemptTimeout's; 0 for none), and a function that
// derives an attempt's context from parent: one that also ends, with
// context.DeadlineExceeded, when the timeout has passed on the options'
// clock, with the function that releases it.
var AttemptTimeout func(opts any) (time.Duration, func(parent context.Context) (context.Context, func()))

// Pacer returns the pacer that opts, a []backoff.Option, carry (the last
// backoff.WithPacer's), or nil.
var Pacer func(opts any) any

// Hedged reports whether opts, a []backoff.Option, make backoff.Retry hedge
// its attempts (a backoff.WithHedge with a positive delay, the last one
// given).
var Hedged func(opts any) bool
