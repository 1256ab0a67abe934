package bench

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/avast/retry-go/v4"
)

// This file imports avast/retry-go under its own name, retry, as the guide's
// block does; sethvargo/go-retry and client-go's util/retry have that name
// in their files.

// ErrNoSuchReport is the guide's error for a report that does not exist.
var ErrNoSuchReport = errors.New("no such report")

// beforeAvast is the twin of the guide's avast/retry-go fetch, with waits
// shortened a hundredfold (MaxJitter too, from its default of 100 ms): they
// are real time.
func beforeAvast(ctx context.Context, fetchReport func(context.Context, string) ([]byte, error), id string, logger *log.Logger) ([]byte, error) {
	report, err := retry.DoWithData(func() ([]byte, error) {
		return fetchReport(ctx, id)
	},
		retry.Context(ctx),
		retry.Attempts(5),
		retry.Delay(2*time.Millisecond),     // README: retry.Delay(200*time.Millisecond),
		retry.MaxDelay(50*time.Millisecond), // README: retry.MaxDelay(5*time.Second),
		retry.MaxJitter(time.Millisecond),
		retry.RetryIf(func(err error) bool { return !errors.Is(err, ErrNoSuchReport) }),
		retry.OnRetry(func(n uint, err error) { logger.Printf("attempt %d failed: %v", n+1, err) }), // README: retry.OnRetry(func(n uint, err error) { log.Printf("attempt %d failed: %v", n+1, err) }),
		retry.LastErrorOnly(true),
	)
	return report, err
}

// TestBeforeAvast runs the guide's avast fetch: a report after two
// failures; ErrNoSuchReport at once, unlogged; five failures, all five
// logged (OnRetry sees the last too), the fifth returned as it is.
func TestBeforeAvast(t *testing.T) {
	errBusy := errors.New("busy")
	tests := []struct {
		name    string
		results []error // the i-th fetch's error; a report once they end
		report  string
		err     error
		logged  []string
	}{
		{"two failures, then the report", []error{errBusy, errBusy}, "report", nil,
			[]string{"attempt 1 failed: busy", "attempt 2 failed: busy"}},
		{"no such report ends at once", []error{ErrNoSuchReport}, "", ErrNoSuchReport, nil},
		{"failures outlast the attempts", []error{errBusy, errBusy, errBusy, errBusy, errBusy, errBusy}, "", errBusy,
			[]string{"attempt 1 failed: busy", "attempt 2 failed: busy", "attempt 3 failed: busy", "attempt 4 failed: busy", "attempt 5 failed: busy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			fetch := func(_ context.Context, id string) ([]byte, error) {
				calls++
				if id != "r1" {
					t.Errorf("fetch got %q", id)
				}
				if calls <= len(tt.results) {
					return nil, tt.results[calls-1]
				}
				return []byte("report"), nil
			}
			var logged strings.Builder
			report, err := beforeAvast(context.Background(), fetch, "r1", log.New(&logged, "", 0))
			if string(report) != tt.report || err != tt.err {
				t.Errorf("got %q, %v; want %q, %v", report, err, tt.report, tt.err)
			}
			var lines []string
			if text := strings.TrimSpace(logged.String()); text != "" {
				lines = strings.Split(text, "\n")
			}
			if fmt.Sprint(lines) != fmt.Sprint(tt.logged) {
				t.Errorf("logged %q, want %q", lines, tt.logged)
			}
		})
	}
}

// instantTimer is a retry.Timer that records each wait and ends it at once.
type instantTimer struct{ waits []time.Duration }

func (t *instantTimer) After(d time.Duration) <-chan time.Time {
	t.waits = append(t.waits, d)
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}

// TestAvastAsTheGuideSays checks, row by row, what the guide's avast table
// says avast/retry-go v4 does; waits are recorded, not slept.
func TestAvastAsTheGuideSays(t *testing.T) {
	errBusy := errors.New("busy")
	failing := func(calls *int) func() (int, error) {
		return func() (int, error) { *calls++; return 0, fmt.Errorf("attempt %d: %w", *calls, errBusy) }
	}
	t.Run("defaults: 10 attempts, 100 ms doubling plus up to 100 ms, no cap", func(t *testing.T) {
		timer := &instantTimer{}
		calls := 0
		_, _ = retry.DoWithData(failing(&calls), retry.WithTimer(timer))
		if calls != 10 || len(timer.waits) != 9 {
			t.Fatalf("%d calls, %d waits; want 10 and 9", calls, len(timer.waits))
		}
		for i, d := range timer.waits {
			base := 100 * time.Millisecond << i
			if d < base || d >= base+100*time.Millisecond {
				t.Errorf("wait %d = %v, want in [%v, %v)", i+1, d, base, base+100*time.Millisecond)
			}
		}
	})
	t.Run("MaxDelay caps the wait after the jitter is added", func(t *testing.T) {
		timer := &instantTimer{}
		calls := 0
		_, _ = retry.DoWithData(failing(&calls), retry.WithTimer(timer), retry.Attempts(5),
			retry.Delay(100*time.Millisecond), retry.MaxDelay(150*time.Millisecond))
		for i, d := range timer.waits {
			if d > 150*time.Millisecond || (i >= 1 && d != 150*time.Millisecond) {
				t.Errorf("wait %d = %v, want at most 150ms, exactly 150ms from the second", i+1, d)
			}
		}
	})
	t.Run("the attempts run out: an Error holding every attempt's error", func(t *testing.T) {
		calls := 0
		first := errors.New("first")
		_, err := retry.DoWithData(func() (int, error) {
			calls++
			if calls == 1 {
				return 0, first
			}
			return 0, errBusy
		}, retry.WithTimer(&instantTimer{}), retry.Attempts(3))
		var all retry.Error
		if !errors.As(err, &all) || len(all.WrappedErrors()) != 3 || !errors.Is(err, first) || !errors.Is(err, errBusy) {
			t.Errorf("err = %#v, want an Error of 3 that matches the first attempt's error too", err)
		}
		if want := "All attempts fail:\n#1: first\n#2: busy\n#3: busy"; err.Error() != want {
			t.Errorf("message %q, want %q", err.Error(), want)
		}
	})
	t.Run("LastErrorOnly(true): the last error itself", func(t *testing.T) {
		_, err := retry.DoWithData(func() (int, error) { return 0, errBusy },
			retry.WithTimer(&instantTimer{}), retry.Attempts(3), retry.LastErrorOnly(true))
		if err != errBusy {
			t.Errorf("err = %#v, want errBusy itself", err)
		}
	})
	t.Run("an Unrecoverable error ends at once, inside an Error without the mark, or alone", func(t *testing.T) {
		calls := 0
		_, err := retry.DoWithData(func() (int, error) { calls++; return 0, retry.Unrecoverable(ErrNotFound) },
			retry.WithTimer(&instantTimer{}))
		var all retry.Error
		if calls != 1 || !errors.As(err, &all) || len(all) != 1 || all[0] != ErrNotFound {
			t.Errorf("%d calls, err %#v; want 1 call and Error{ErrNotFound}", calls, err)
		}
		_, err = retry.DoWithData(func() (int, error) { return 0, retry.Unrecoverable(ErrNotFound) },
			retry.WithTimer(&instantTimer{}), retry.LastErrorOnly(true))
		if err != ErrNotFound {
			t.Errorf("LastErrorOnly: err = %#v, want ErrNotFound itself", err)
		}
	})
	t.Run("a RetryIf of your own retries an Unrecoverable error", func(t *testing.T) {
		calls := 0
		_, _ = retry.DoWithData(func() (int, error) { calls++; return 0, retry.Unrecoverable(ErrNotFound) },
			retry.WithTimer(&instantTimer{}), retry.Attempts(3), retry.RetryIf(func(error) bool { return true }))
		if calls != 3 {
			t.Errorf("%d calls, want 3", calls)
		}
	})
	t.Run("OnRetry: after every failure, the last included, counting from 0", func(t *testing.T) {
		var ns []uint
		calls := 0
		_, _ = retry.DoWithData(failing(&calls), retry.WithTimer(&instantTimer{}), retry.Attempts(3),
			retry.OnRetry(func(n uint, _ error) { ns = append(ns, n) }))
		if fmt.Sprint(ns) != "[0 1 2]" {
			t.Errorf("OnRetry saw %v, want [0 1 2]", ns)
		}
	})
	t.Run("ctx ends: the Error with the cause appended, or the cause alone", func(t *testing.T) {
		errShutdown := errors.New("shutting down")
		run := func(opts ...retry.Option) error {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			_, err := retry.DoWithData(func() (int, error) { return 0, errBusy }, append(opts,
				retry.Context(ctx), retry.Delay(10*time.Minute),
				retry.OnRetry(func(uint, error) { cancel(errShutdown) }))...)
			return err
		}
		var all retry.Error
		if err := run(); !errors.As(err, &all) || fmt.Sprint(all.WrappedErrors()) != "[busy shutting down]" {
			t.Errorf("err = %#v, want Error{errBusy, the cause}", err)
		}
		if err := run(retry.LastErrorOnly(true)); err != errShutdown {
			t.Errorf("LastErrorOnly: err = %#v, want the cause alone", err)
		}
		if err := run(retry.Attempts(0)); err != errShutdown {
			t.Errorf("Attempts(0): err = %#v, want the cause alone", err)
		}
	})
	t.Run("ctx done on entry: fn is never called", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		calls := 0
		_, err := retry.DoWithData(failing(&calls), retry.Context(ctx))
		if calls != 0 || err != context.Canceled {
			t.Errorf("%d calls, err %v; want none and context.Canceled", calls, err)
		}
	})
}
