package redis_test

import (
	"math"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	testclock "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff/interop/redis"
)

// TestBadArgumentsPanicWithThePackagesMessage: every constructor and option
// of the package panics on an argument outside its domain with a message
// that begins with the package's own prefix, "backoff/redis: ", never
// go-redis's "redis: " nor the library's "backoff: " (the requeue limiter's
// delays used to be checked by the library's constructor, whose message named
// another package), names the function and the parameter, and quotes a
// string, so that an empty name reads got "". No Redis is needed: the
// arguments are checked before the client is used.
func TestBadArgumentsPanicWithThePackagesMessage(t *testing.T) {
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	var nilClient *goredis.Client
	var nilClock *testclock.FakeClock
	tests := []struct {
		call func()
		want string
	}{
		{func() { redis.NewLimiter(nil, "api", 10, 1) }, "NewLimiter: client must not be nil, got <nil>"},
		{func() { redis.NewLimiter(nilClient, "api", 10, 1) }, "NewLimiter: client must not be nil, got a nil *redis.Client"},
		{func() { redis.NewLimiter(client, "", 10, 1) }, `NewLimiter: name must be non-empty and contain no '{' or '}', got ""`},
		{func() { redis.NewLimiter(client, "a{b}", 10, 1) }, `NewLimiter: name must be non-empty and contain no '{' or '}', got "a{b}"`},
		{func() { redis.NewLimiter(client, "api", 0, 1) }, "NewLimiter: r must be positive, got 0"},
		{func() { redis.NewLimiter(client, "api", math.NaN(), 1) }, "NewLimiter: r must be positive, got NaN"},
		{func() { redis.NewLimiter(client, "api", 10, 0) }, "NewLimiter: burst must be at least 1, got 0"},
		{func() { redis.NewKeyedLimiter(nil, "api", 10, 1) }, "NewKeyedLimiter: client must not be nil, got <nil>"},
		{func() { redis.NewSharedRate(nil, "api") }, "NewSharedRate: client must not be nil, got <nil>"},
		{func() { redis.NewSharedRate(nilClient, "api") }, "NewSharedRate: client must not be nil, got a nil *redis.Client"},
		{func() { redis.NewSharedRate(client, "a}") }, `NewSharedRate: name must be non-empty and contain no '{' or '}', got "a}"`},
		{func() { redis.WithSyncInterval(time.Millisecond) }, "WithSyncInterval: d must be at least 10ms, got 1ms"},
		{func() { redis.WithInitialRate(0) }, "WithInitialRate: r must be a positive finite number of requests per second, got 0"},
		{func() { redis.WithInitialRate(math.Inf(1)) }, "WithInitialRate: r must be a positive finite number of requests per second, got +Inf"},
		{func() { redis.WithInitialRate(math.NaN()) }, "WithInitialRate: r must be a positive finite number of requests per second, got NaN"},
		{func() { redis.NewKeyedLimiter(client, "", 10, 1) }, `NewKeyedLimiter: name must be non-empty and contain no '{' or '}', got ""`},
		{func() { redis.NewKeyedLimiter(client, "api", -1, 1) }, "NewKeyedLimiter: r must be positive, got -1"},
		{func() { redis.NewKeyedLimiter(client, "api", 10, -1) }, "NewKeyedLimiter: burst must be at least 1, got -1"},
		{func() { redis.NewItemExponentialFailureRateLimiter[string](nil, "q", time.Second, time.Minute) },
			"NewItemExponentialFailureRateLimiter: client must not be nil, got <nil>"},
		{func() { redis.NewItemExponentialFailureRateLimiter[string](client, "", time.Second, time.Minute) },
			`NewItemExponentialFailureRateLimiter: name must be non-empty and contain no '{' or '}', got ""`},
		{func() { redis.NewItemExponentialFailureRateLimiter[string](client, "q", 0, time.Minute) },
			"NewItemExponentialFailureRateLimiter: baseDelay must be positive, got 0s"},
		{func() { redis.NewItemExponentialFailureRateLimiter[string](client, "q", time.Second, -time.Second) },
			"NewItemExponentialFailureRateLimiter: maxDelay must not be less than baseDelay 1s, got -1s"},
		{func() { redis.NewItemExponentialFailureRateLimiter[string](client, "q", time.Second, time.Millisecond) },
			"NewItemExponentialFailureRateLimiter: maxDelay must not be less than baseDelay 1s, got 1ms"},
		{func() { redis.WithPrefix("a}") }, `WithPrefix: prefix must not contain '{' or '}', got "a}"`},
		{func() { redis.WithTimeout(0) }, "WithTimeout: d must be positive, got 0s"},
		{func() { redis.WithProbeInterval(-time.Second) }, "WithProbeInterval: d must be positive, got -1s"},
		{func() { redis.WithExpectedReplicas(0) }, "WithExpectedReplicas: n must be at least 1, got 0"},
		{func() { redis.WithFallbackKeys(0) }, "WithFallbackKeys: n must be at least 1, got 0"},
		{func() { redis.WithFailureTTL(time.Microsecond) }, "WithFailureTTL: d must be at least 1ms, got 1µs"},
		{func() { redis.WithClock(nil) }, "WithClock: clk must not be nil, got <nil>"},
		{func() { redis.WithClock(nilClock) }, "WithClock: clk must not be nil, got a nil *testing.FakeClock"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.PanicsWithValue(t, "backoff/redis: "+tt.want, tt.call)
		})
	}
}
