package redis

import (
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/retrykit/backoff"
	"k8s.io/utils/clock"
)

// Defaults of the options.
const (
	// DefaultPrefix starts every key this package writes.
	DefaultPrefix = "backoff:"
	// DefaultTimeout bounds every call to Redis.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultProbeInterval is how often, while Redis is unavailable, one
	// decision tries Redis again instead of the local fallback.
	DefaultProbeInterval = 250 * time.Millisecond
	// DefaultFallbackKeys bounds the keys a keyed limiter's local fallback
	// remembers.
	DefaultFallbackKeys = 10000
)

// Option configures a limiter of this package.
type Option func(*config)

type config struct {
	prefix        string
	timeout       time.Duration
	probeInterval time.Duration
	replicas      int
	failClosed    bool
	logger        *slog.Logger
	clock         clock.WithDelayedExecution
	onStateChange func(available bool, err error)
	fallbackKeys  int
	failureTTL    time.Duration
	spreadKeys    bool
	syncInterval  time.Duration // a SharedRate's
	timeoutSet    bool          // WithTimeout was given
	initialRate   float64       // a SharedRate's
}

func newConfig(opts []Option) config {
	c := config{
		prefix:        DefaultPrefix,
		timeout:       DefaultTimeout,
		probeInterval: DefaultProbeInterval,
		replicas:      1,
		logger:        slog.Default(),
		clock:         clock.RealClock{},
		fallbackKeys:  DefaultFallbackKeys,
		syncInterval:  DefaultSyncInterval,
		initialRate:   backoff.DefaultInitialRate,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithPrefix sets the text that starts every key the limiter writes
// (default [DefaultPrefix]), so that several applications can share one
// Redis. WithPrefix panics if prefix contains '{' or '}': those would change
// the key's Cluster hash tag.
func WithPrefix(prefix string) Option {
	if strings.ContainsAny(prefix, "{}") {
		badArgument("WithPrefix", "prefix must not contain '{' or '}'", prefix)
	}
	return func(c *config) { c.prefix = prefix }
}

// WithTimeout bounds every call to Redis (default [DefaultTimeout], and
// [DefaultSharedRateTimeout] for a [SharedRate], whose calls no request
// waits for): a call that has no answer by then counts as a failure, and the
// decision is made by the fallback. A caller's context with an earlier deadline bounds the call
// further. WithTimeout panics if d is not positive.
func WithTimeout(d time.Duration) Option {
	if d <= 0 {
		badArgument("WithTimeout", "d must be positive", d)
	}
	return func(c *config) { c.timeout, c.timeoutSet = d, true }
}

// WithProbeInterval sets how often, while Redis is unavailable, one decision
// tries Redis again (default [DefaultProbeInterval]); the others go straight
// to the fallback, so that an outage costs at most one timeout per interval,
// not one per call. WithProbeInterval panics if d is not positive.
func WithProbeInterval(d time.Duration) Option {
	if d <= 0 {
		badArgument("WithProbeInterval", "d must be positive", d)
	}
	return func(c *config) { c.probeInterval = d }
}

// WithExpectedReplicas sets how many processes share the limit (default 1).
// While Redis is unavailable, each process falls back to a local limiter
// whose rate is the shared rate divided by n and whose burst is the shared
// burst divided by n (rounded down, at least 1), so that n processes together
// stay near the shared limit. WithExpectedReplicas panics if n < 1.
func WithExpectedReplicas(n int) Option {
	if n < 1 {
		badArgument("WithExpectedReplicas", "n must be at least 1", n)
	}
	return func(c *config) { c.replicas = n }
}

// WithFailClosed makes decisions fail while Redis is unavailable instead of
// falling back to a local limiter: Allow returns false, AllowN, ReserveN,
// WaitN and AllowBatch return an error that wraps [ErrUnavailable], and a
// requeue limiter's When returns its maxDelay. Use it when exceeding the
// shared limit costs more than refusing work.
func WithFailClosed() Option {
	return func(c *config) { c.failClosed = true }
}

// WithLogger sets where state changes (Redis became unavailable, Redis is
// back) are logged, once per change (default slog.Default()). A nil logger
// disables logging.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithClock sets the local clock, which times Wait, the probes and the local
// fallback (default the real clock). Shared decisions use the Redis server's
// clock whatever this option says. WithClock panics if clk is nil, a typed
// nil (a nil *testing.FakeClock) included.
func WithClock(clk clock.WithDelayedExecution) Option {
	if clk == nil {
		badArgument("WithClock", "clk must not be nil", nil)
	}
	if v := reflect.ValueOf(clk); v.Kind() == reflect.Pointer && v.IsNil() {
		badArgument("WithClock", "clk must not be nil", typedNil{clk})
	}
	return func(c *config) { c.clock = clk }
}

// WithOnStateChange registers f, called once each time Redis becomes
// unavailable (available false, err the failure) or available again
// (available true, err nil), on the goroutine whose call noticed the change.
// f must be fast and must not call the limiter.
func WithOnStateChange(f func(available bool, err error)) Option {
	return func(c *config) { c.onStateChange = f }
}

// WithFallbackKeys bounds how many keys a [KeyedLimiter]'s local fallback
// remembers (default [DefaultFallbackKeys]), as the library's
// backoff.WithMaxKeys does for its KeyedLimiter, which the fallback is: when
// the bound is reached, keys whose bucket has refilled are dropped; if none
// has, the keys the fallback does not know share one bucket of a key's
// limit, never admitted unlimited. WithFallbackKeys panics if n < 1.
func WithFallbackKeys(n int) Option {
	if n < 1 {
		badArgument("WithFallbackKeys", "n must be at least 1", n)
	}
	return func(c *config) { c.fallbackKeys = n }
}

// WithFailureTTL sets how long the requeue limiter remembers an item's
// failure count after its latest failure (default twice maxDelay, at least
// one minute): an item that is neither retried nor forgotten within the TTL
// starts again at baseDelay. WithFailureTTL panics if d is below one
// millisecond, Redis's finest expiry.
func WithFailureTTL(d time.Duration) Option {
	if d < time.Millisecond {
		badArgument("WithFailureTTL", "d must be at least 1ms", d)
	}
	return func(c *config) { c.failureTTL = d }
}

// WithSpreadKeys gives each key of a [KeyedLimiter], and each item of an
// [ItemExponentialFailureRateLimiter], a Cluster hash tag of its own:
// <prefix>{<name>:<key>} instead of <prefix>{<name>}:<key>. By default a
// limiter's keys share the tag {<name>}, so a Redis Cluster keeps them all
// in one slot, on one master, however busy the limiter; spread, they are
// spread over the masters as any keys are. [KeyedLimiter.AllowBatch], and
// the decisions that concurrent callers send together, then make one script
// call per key, pipelined through the Cluster client: one round trip per
// master, to the masters at once, rather than one script call. On a single
// server it changes the key names and nothing else. A [Limiter] has one
// key, which it ignores the option for.
//
// Every process that shares a limiter must pass the same layout: processes
// with different layouts keep different keys, and do not share. Changing it
// in a running deployment starts every key's bucket full and its failure
// count at zero.
func WithSpreadKeys() Option {
	return func(c *config) { c.spreadKeys = true }
}

// WithSyncInterval sets how often a [SharedRate] makes a round trip to
// Redis (default [DefaultSyncInterval]): how soon the replicas hear of one
// that joined, and of each other's demand. A replica's lease lasts three
// intervals. Cuts do not wait for it. WithSyncInterval panics if d is below
// 10 ms.
func WithSyncInterval(d time.Duration) Option {
	if d < 10*time.Millisecond {
		badArgument("WithSyncInterval", "d must be at least 10ms", d)
	}
	return func(c *config) { c.syncInterval = d }
}

// WithInitialRate sets the estimate, in requests per second for all
// replicas together, that a [SharedRate]'s record starts its slow start at
// when no replica has made it yet (default backoff.DefaultInitialRate). Give
// it when the quota is roughly known: the estimate doubles every 250 ms from
// it until the first throttling answer. WithInitialRate panics if r is not
// a positive finite number.
func WithInitialRate(r float64) Option {
	if !(r > 0) || math.IsInf(r, 1) {
		badArgument("WithInitialRate", "r must be a positive finite number of requests per second", r)
	}
	return func(c *config) { c.initialRate = r }
}

// msgPrefix begins the package's errors, panics and log messages. It is not
// the package's name, "redis", which go-redis's own messages begin with: a
// message of ours must not read as one of go-redis's.
const msgPrefix = "backoff/redis: "

// badArgument panics with the library's message for an argument outside its
// domain (the bad-input rule of github.com/retrykit/backoff). A string is
// quoted, so that an empty one reads got "".
func badArgument(where, problem string, got any) {
	if s, ok := got.(string); ok {
		got = strconv.Quote(s)
	}
	panic(fmt.Sprintf(msgPrefix+"%s: %s, got %v", where, problem, got))
}

// typedNil prints a non-nil interface that holds a nil pointer, for a panic
// message: "a nil *redis.Client".
type typedNil struct{ v any }

func (n typedNil) String() string { return fmt.Sprintf("a nil %T", n.v) }

// mustBeClient panics if client is nil, a typed nil (a nil *goredis.Client)
// included, which would otherwise crash on the first decision.
func mustBeClient(where string, client goredis.UniversalClient) {
	if client == nil {
		badArgument(where, "client must not be nil", nil)
	}
	if v := reflect.ValueOf(client); v.Kind() == reflect.Pointer && v.IsNil() {
		badArgument(where, "client must not be nil", typedNil{client})
	}
}
