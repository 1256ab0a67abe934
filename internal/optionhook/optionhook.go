// Package optionhook lets package httpretry use a setting of the options of
// package backoff that Retry alone would otherwise read: the notify hook,
// for a retry that httpretry skips without calling Retry's loop. Only
// package backoff can decode its options; it sets Notify when it is
// initialised.
package optionhook

import "time"

// Notify calls the notify hook that opts, a []backoff.Option, carries (the
// last backoff.WithNotify among them), if any, with attempt, err and next.
var Notify func(opts any, attempt int, err error, next time.Duration)
