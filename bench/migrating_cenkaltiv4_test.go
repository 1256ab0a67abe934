package bench

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// This file imports cenkalti/backoff v4 under its own name, backoff, as the
// guide's block does; migrating_test.go has v5 under that name.

// errV4 is an operation's failure in the checks of cenkalti/backoff v4.
var errV4 = errors.New("unavailable")

// beforeCenkaltiV4 is the twin of the guide's cenkalti/backoff v4 send, with
// the first wait shortened two-hundredfold: the waits are real time.
func beforeCenkaltiV4(ctx context.Context, send func(context.Context, string) error, msg string, logger *log.Logger) error {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(time.Millisecond), // README: backoff.WithInitialInterval(200*time.Millisecond),
		backoff.WithMaxElapsedTime(time.Minute),
	)
	err := backoff.RetryNotify(func() error {
		return send(ctx, msg)
	}, backoff.WithContext(backoff.WithMaxRetries(b, 5), ctx), func(err error, d time.Duration) {
		logger.Printf("send failed, retrying in %v: %v", d, err) // README: log.Printf("send failed, retrying in %v: %v", d, err)
	})
	return err
}

// TestBeforeCenkaltiV4 runs the guide's v4 send: WithMaxRetries(b, 5) makes
// six attempts, notify is not called for the last, and the last error comes
// back as it is.
func TestBeforeCenkaltiV4(t *testing.T) {
	tests := []struct {
		name     string
		failures int   // sends that fail before one succeeds
		fail     error // what a failed send returns
		calls    int
		err      error
		logged   int // retries logged
	}{
		{"two failures, then sent", 2, errV4, 3, nil, 2},
		{"failures outlast the retries", 100, errV4, 6, errV4, 5},
		{"a Permanent error ends at once", 100, backoff.Permanent(ErrNotFound), 1, ErrNotFound, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			send := func(_ context.Context, msg string) error {
				calls++
				if msg != "hello" {
					t.Errorf("send got %q", msg)
				}
				if calls <= tt.failures {
					return tt.fail
				}
				return nil
			}
			var logged strings.Builder
			err := beforeCenkaltiV4(context.Background(), send, "hello", log.New(&logged, "", 0))
			if err != tt.err || calls != tt.calls {
				t.Errorf("err = %v after %d sends, want %v after %d", err, calls, tt.err, tt.calls)
			}
			if n := strings.Count(logged.String(), "send failed, retrying in "); n != tt.logged {
				t.Errorf("%d retries logged, want %d:\n%s", n, tt.logged, logged.String())
			}
		})
	}
}

// TestCenkaltiV4AsTheGuideSays checks, row by row, what the guide's v4 table
// says cenkalti/backoff v4 does.
func TestCenkaltiV4AsTheGuideSays(t *testing.T) {
	fast := func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }
	t.Run("a Permanent error: the error inside, without what wraps it", func(t *testing.T) {
		err := backoff.Retry(func() error { return backoff.Permanent(ErrNotFound) }, fast())
		if err != ErrNotFound {
			t.Errorf("err = %#v, want ErrNotFound itself", err)
		}
		err = backoff.Retry(func() error { return fmt.Errorf("get: %w", backoff.Permanent(ErrNotFound)) }, fast())
		if err != ErrNotFound {
			t.Errorf("wrapped: err = %v, want ErrNotFound itself", err)
		}
	})
	t.Run("errors.Is(err, &PermanentError{}) holds for any permanent error", func(t *testing.T) {
		for _, err := range []error{backoff.Permanent(errV4), fmt.Errorf("get: %w", backoff.Permanent(ErrNotFound))} {
			if !errors.Is(err, &backoff.PermanentError{}) {
				t.Errorf("errors.Is(%v, &PermanentError{}) is false", err)
			}
		}
		if errors.Is(errV4, &backoff.PermanentError{}) {
			t.Error("errors.Is holds for an unmarked error")
		}
	})
	t.Run("the attempts run out: the last error itself; WithMaxRetries(b, 3) makes 4 attempts", func(t *testing.T) {
		calls := 0
		err := backoff.Retry(func() error { calls++; return fmt.Errorf("attempt %d: %w", calls, errV4) },
			backoff.WithMaxRetries(fast(), 3))
		if calls != 4 || err == nil || err.Error() != "attempt 4: unavailable" {
			t.Errorf("err = %v after %d calls, want the fourth attempt's error after 4", err, calls)
		}
	})
	t.Run("jitter and defaults: 500 ms ±50%, ×1.5, at most 60 s, 15 minutes", func(t *testing.T) {
		b := backoff.NewExponentialBackOff()
		if b.InitialInterval != 500*time.Millisecond || b.Multiplier != 1.5 || b.MaxInterval != time.Minute ||
			b.RandomizationFactor != 0.5 || b.MaxElapsedTime != 15*time.Minute {
			t.Fatalf("defaults %+v", *b)
		}
		below := 0
		for range 200 {
			b.Reset()
			d := b.NextBackOff()
			if d < 250*time.Millisecond || d > 750*time.Millisecond {
				t.Fatalf("first wait %v outside 500ms ±50%%", d)
			}
			if d < 500*time.Millisecond {
				below++
			}
		}
		if below < 50 {
			t.Errorf("%d of 200 first waits below 500ms: the jitter should shorten waits too", below)
		}
	})
	t.Run("elapsed time: an ExponentialBackOff stops after 15 minutes, other backoffs never", func(t *testing.T) {
		// A first wait of 16 minutes would end past the default limit:
		// Retry gives up at once, without waiting.
		calls := 0
		err := backoff.Retry(func() error { calls++; return errV4 },
			backoff.NewExponentialBackOff(backoff.WithInitialInterval(16*time.Minute), backoff.WithRandomizationFactor(0)))
		if err != errV4 || calls != 1 {
			t.Errorf("err = %v after %d calls, want errV4 after 1", err, calls)
		}
		c := backoff.NewConstantBackOff(16 * time.Minute)
		for i := range 1000 {
			if d := c.NextBackOff(); d != 16*time.Minute {
				t.Fatalf("ConstantBackOff's wait %d = %v", i, d)
			}
		}
	})
	t.Run("ctx already done: op runs once, ctx.Err() is returned, the cause lost", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errors.New("shutting down"))
		calls := 0
		err := backoff.Retry(func() error { calls++; return errV4 }, backoff.WithContext(fast(), ctx))
		if calls != 1 || err != context.Canceled {
			t.Errorf("%d calls, err %v; want 1 call and context.Canceled", calls, err)
		}
	})
	t.Run("ctx ends during a wait: ctx.Err() alone, the last error lost", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		err := backoff.RetryNotify(func() error { return errV4 },
			backoff.WithContext(backoff.NewConstantBackOff(10*time.Minute), ctx),
			func(error, time.Duration) { cancel() })
		if err != context.Canceled || errors.Is(err, errV4) {
			t.Errorf("err = %v, want context.Canceled alone", err)
		}
	})
}
