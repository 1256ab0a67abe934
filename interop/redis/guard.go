package redis

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
)

// ErrUnavailable is wrapped by the errors of calls that could not reach Redis
// while the limiter was built [WithFailClosed].
var ErrUnavailable = errors.New(msgPrefix + "Redis unavailable")

// Stats counts a limiter's decisions since it was created. The counters only
// grow; read them again to compute rates.
type Stats struct {
	// Shared counts decisions made by Redis.
	Shared uint64
	// Fallback counts decisions made by the local fallback because Redis was
	// unavailable.
	Fallback uint64
	// Refused counts calls refused because Redis was unavailable and the
	// limiter fails closed.
	Refused uint64
	// Errors counts calls to Redis that failed or timed out.
	Errors uint64
	// Outages counts the times Redis became unavailable.
	Outages uint64
	// Available says whether the latest call to Redis succeeded.
	Available bool
}

// guard runs calls to Redis under a deadline and keeps the state "Redis is
// available" or not. While it is not, one call per probe interval tries
// Redis; the others go to the fallback at once, so that an outage costs one
// timeout per interval, not one per call. No goroutine is started: the probe
// is made by the call that wins the compare-and-swap on nextProbe.
type guard struct {
	what          string // names the limiter in logs
	timeout       time.Duration
	probeInterval time.Duration
	failClosed    bool
	logger        *slog.Logger
	clock         clock.PassiveClock
	onStateChange func(bool, error)
	// onFailure, when set, is called after each failed call: a Cluster
	// client's, which reloads the client's map of the slots (see
	// newGuard).
	onFailure func()

	down      atomic.Bool
	nextProbe atomic.Int64 // local clock, UnixNano; meaningful while down
	changeMu  sync.Mutex   // orders state changes, so that each is logged once

	shared, fallback, refused, errs, outages atomic.Uint64
}

// newGuard returns the guard of a limiter of client. For a Cluster client,
// each failed call asks the client to reload its map of the slots: go-redis
// learns that a replica took over a dead master's slots only from a MOVED
// reply, which a dead master never sends, or from its periodic reload
// (ClusterStateReloadInterval, a minute by default), and until then it sends
// every call for those slots to the dead master. The reload runs on go-redis's
// goroutine, at most one at a time.
func newGuard(what string, client goredis.UniversalClient, c config) *guard {
	g := &guard{
		what:          what,
		timeout:       c.timeout,
		probeInterval: c.probeInterval,
		failClosed:    c.failClosed,
		logger:        c.logger,
		clock:         c.clock,
		onStateChange: c.onStateChange,
	}
	if cl, ok := client.(*goredis.ClusterClient); ok {
		g.onFailure = func() { cl.ReloadState(context.Background()) }
	}
	return g
}

// tryRedis reports whether this call should go to Redis: always while Redis
// is available, and for one call per probe interval while it is not.
func (g *guard) tryRedis() bool {
	if !g.down.Load() {
		return true
	}
	next := g.nextProbe.Load()
	now := g.clock.Now().UnixNano()
	if now < next {
		return false
	}
	return g.nextProbe.CompareAndSwap(next, now+int64(g.probeInterval))
}

// begin returns the context of one call to Redis: ctx bounded by the
// timeout. The caller passes the call's error to end.
//
// When ctx's own deadline comes no later than the timeout would, ctx is the
// bound already and is used as it is: a derived context costs a timer and
// five allocations per call (see BenchmarkAllowParallel/deadline=caller).
// A context's deadline is an instant of real time, so it is compared with
// time.Now, not with the limiter's clock, which may be a fake one.
func (g *guard) begin(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && !dl.After(time.Now().Add(g.timeout)) {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, g.timeout)
}

func noCancel() {}

// end records the outcome of a call begun with begin. It returns nil if the
// call succeeded; the caller's context error if the caller's context ended
// (which says nothing about Redis); and otherwise err, after recording the
// failure.
func (g *guard) end(ctx context.Context, cancel context.CancelFunc, err error) error {
	cancel()
	if err == nil {
		g.shared.Add(1)
		if g.down.Load() {
			g.markUp()
		}
		return nil
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	g.errs.Add(1)
	if g.onFailure != nil {
		g.onFailure()
	}
	g.markDown(err)
	return err
}

// run calls f with a context bounded by the timeout; see end.
func (g *guard) run(ctx context.Context, f func(context.Context) error) error {
	callCtx, cancel := g.begin(ctx)
	return g.end(ctx, cancel, f(callCtx))
}

func (g *guard) markDown(err error) {
	g.changeMu.Lock()
	defer g.changeMu.Unlock()
	g.nextProbe.Store(g.clock.Now().UnixNano() + int64(g.probeInterval))
	if g.down.Load() {
		return
	}
	g.down.Store(true)
	g.outages.Add(1)
	if g.logger != nil {
		mode := "deciding locally"
		if g.failClosed {
			mode = "refusing"
		}
		g.logger.Warn(msgPrefix+"Redis unavailable, "+mode+" until it answers again",
			slog.String("limiter", g.what), slog.Any("error", err))
	}
	if g.onStateChange != nil {
		g.onStateChange(false, err)
	}
}

func (g *guard) markUp() {
	g.changeMu.Lock()
	defer g.changeMu.Unlock()
	if !g.down.Load() {
		return
	}
	g.down.Store(false)
	if g.logger != nil {
		g.logger.Info(msgPrefix+"Redis available again, decisions are shared",
			slog.String("limiter", g.what))
	}
	if g.onStateChange != nil {
		g.onStateChange(true, nil)
	}
}

// unavailable counts a decision that Redis could not make and returns the
// error of a fail-closed limiter, or nil when the caller should fall back.
func (g *guard) unavailable(cause error) error {
	if g.failClosed {
		g.refused.Add(1)
		if cause == nil {
			return ErrUnavailable
		}
		return &unavailableError{cause: cause}
	}
	g.fallback.Add(1)
	return nil
}

func (g *guard) stats() Stats {
	return Stats{
		Shared:    g.shared.Load(),
		Fallback:  g.fallback.Load(),
		Refused:   g.refused.Load(),
		Errors:    g.errs.Load(),
		Outages:   g.outages.Load(),
		Available: !g.down.Load(),
	}
}

// unavailableError is ErrUnavailable with the failure that caused it.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string { return ErrUnavailable.Error() + ": " + e.cause.Error() }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the failure.
func (e *unavailableError) Unwrap() error { return e.cause }
