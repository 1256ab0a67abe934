package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sethvargo/go-retry"
)

// This file imports sethvargo/go-retry under its own name, retry, as the
// guide's block does; avast/retry-go and client-go's util/retry have that
// name in their files.

// errBusy is the transient failure of the sethvargo checks.
var errBusy = errors.New("busy")

// beforeSethvargo is the twin of the guide's sethvargo/go-retry ping, with
// waits shortened a hundredfold: they are real time.
func beforeSethvargo(ctx context.Context, ping func(context.Context) error, isTransient func(error) bool) error {
	b := retry.NewExponential(time.Millisecond) // README: b := retry.NewExponential(100 * time.Millisecond)
	b = retry.WithJitterPercent(10, b)
	b = retry.WithCappedDuration(20*time.Millisecond, b) // README: b = retry.WithCappedDuration(2*time.Second, b)
	b = retry.WithMaxRetries(4, b)
	err := retry.Do(ctx, b, func(ctx context.Context) error {
		err := ping(ctx)
		if isTransient(err) {
			return retry.RetryableError(err)
		}
		return err
	})
	return err
}

// TestBeforeSethvargo runs the guide's ping: transient failures are
// retried, up to five attempts (WithMaxRetries(4, b)), and the last comes
// back without its mark; any other error ends at once.
func TestBeforeSethvargo(t *testing.T) {
	errDown := errors.New("down")
	tests := []struct {
		name    string
		results []error // the i-th ping's error; nil once they end
		calls   int
		err     error
	}{
		{"two transient failures, then up", []error{errBusy, errBusy}, 3, nil},
		{"a failure not transient ends at once", []error{errDown}, 1, errDown},
		{"transient failures outlast the retries", []error{errBusy, errBusy, errBusy, errBusy, errBusy, errBusy}, 5, errBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			ping := func(context.Context) error {
				calls++
				if calls <= len(tt.results) {
					return tt.results[calls-1]
				}
				return nil
			}
			err := beforeSethvargo(context.Background(), ping, func(err error) bool { return errors.Is(err, errBusy) })
			if err != tt.err || calls != tt.calls {
				t.Errorf("err = %v after %d pings, want %v after %d", err, calls, tt.err, tt.calls)
			}
		})
	}
}

// TestSethvargoAsTheGuideSays checks, row by row, what the guide's table
// says sethvargo/go-retry does.
func TestSethvargoAsTheGuideSays(t *testing.T) {
	ctx := context.Background()
	fast := func() retry.Backoff { return retry.NewConstant(time.Millisecond) }
	t.Run("only errors marked retryable are retried", func(t *testing.T) {
		calls := 0
		err := retry.Do(ctx, fast(), func(context.Context) error { calls++; return errBusy })
		if err != errBusy || calls != 1 {
			t.Errorf("err = %v after %d calls, want errBusy after 1", err, calls)
		}
	})
	t.Run("the attempts run out: the error inside the mark", func(t *testing.T) {
		calls := 0
		err := retry.Do(ctx, retry.WithMaxRetries(2, fast()), func(context.Context) error {
			calls++
			return retry.RetryableError(errBusy)
		})
		if err != errBusy || calls != 3 {
			t.Errorf("err = %v after %d calls, want errBusy itself after 3", err, calls)
		}
	})
	t.Run("ctx ends: the cause alone, fn not called again", func(t *testing.T) {
		cctx, cancel := context.WithCancelCause(ctx)
		errShutdown := errors.New("shutting down")
		calls := 0
		err := retry.Do(cctx, retry.NewConstant(10*time.Minute), func(context.Context) error {
			calls++
			cancel(errShutdown)
			return retry.RetryableError(errBusy)
		})
		if err != errShutdown || calls != 1 {
			t.Errorf("err = %v after %d calls, want the cause alone after 1", err, calls)
		}
	})
	t.Run("a backoff used twice goes on from where it stopped", func(t *testing.T) {
		b := retry.WithMaxRetries(2, fast())
		for i, want := range []int{3, 1} {
			calls := 0
			_ = retry.Do(ctx, b, func(context.Context) error { calls++; return retry.RetryableError(errBusy) })
			if calls != want {
				t.Errorf("Do %d: %d calls, want %d", i+1, calls, want)
			}
		}
	})
	t.Run("WithMaxDuration shortens the last wait to the time left", func(t *testing.T) {
		b := retry.WithMaxDuration(time.Hour, retry.NewConstant(2*time.Hour))
		d, stop := b.Next()
		if stop || d > time.Hour || d < 59*time.Minute {
			t.Errorf("Next() = %v, %v; want about an hour, not stop", d, stop)
		}
	})
	t.Run("jitter spreads both ways", func(t *testing.T) {
		b := retry.WithJitterPercent(50, retry.NewConstant(100*time.Millisecond))
		below, above := 0, 0
		for range 200 {
			d, _ := b.Next()
			if d < 50*time.Millisecond || d > 150*time.Millisecond {
				t.Fatalf("wait %v outside 100ms ±50%%", d)
			}
			if d < 100*time.Millisecond {
				below++
			} else if d > 100*time.Millisecond {
				above++
			}
		}
		if below < 50 || above < 50 {
			t.Errorf("%d waits below 100ms, %d above, of 200", below, above)
		}
	})
	t.Run("cap and jitter: the wrappers' order decides", func(t *testing.T) {
		capOutside := retry.WithCappedDuration(100*time.Millisecond, retry.WithJitter(50*time.Millisecond, retry.NewConstant(100*time.Millisecond)))
		capInside := retry.WithJitter(50*time.Millisecond, retry.WithCappedDuration(100*time.Millisecond, retry.NewConstant(100*time.Millisecond)))
		over := 0
		for range 200 {
			if d, _ := capOutside.Next(); d > 100*time.Millisecond {
				t.Fatalf("cap outside the jitter: wait %v above the cap", d)
			}
			if d, _ := capInside.Next(); d > 100*time.Millisecond {
				over++
			}
		}
		if over < 50 {
			t.Errorf("cap inside the jitter: %d of 200 waits above the cap", over)
		}
	})
	t.Run("a base of 0 panics", func(t *testing.T) {
		for name, build := range map[string]func(){
			"NewConstant(0)":    func() { retry.NewConstant(0) },
			"NewExponential(0)": func() { retry.NewExponential(0) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s did not panic", name)
					}
				}()
				build()
			}()
		}
	})
}
