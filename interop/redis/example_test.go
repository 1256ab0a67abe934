package redis_test

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/retrykit/backoff"
	"github.com/retrykit/backoff/httpretry"
	backoffredis "github.com/retrykit/backoff/interop/redis"
)

// Four replicas share a partner API's 100 requests/s. Each replica builds
// the same limiter; while Redis is unavailable each falls back to 25/s.
// (Not run: it needs a Redis.)
func ExampleNewLimiter() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	api := backoffredis.NewLimiter(rdb, "partner-api", 100, 10, backoffredis.WithExpectedReplicas(4))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := api.Wait(ctx); err != nil {
		fmt.Println("gave up:", err)
		return
	}
	// call the API
}

// Fifty replicas of a service call an API whose quota for the whole account
// is unknown and which answers 429 beyond it. Each replica paces its
// requests with its SharedRate's Pacer: the replicas learn the quota
// together, and each sends its share of it. (Not run: it needs a Redis.)
func ExampleNewSharedRate() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	quota := backoffredis.NewSharedRate(rdb, "partner-api")
	defer quota.Close()

	client := httpretry.NewClient(backoff.Schedule{Duration: 100 * time.Millisecond, Factor: 2, Cap: 10 * time.Second, Jitter: 0.1},
		backoff.WithPacer(quota.Pacer()))
	resp, err := client.Get("https://partner.example/v1/items")
	if err != nil {
		fmt.Println("gave up:", err)
		return
	}
	defer resp.Body.Close()
	fmt.Printf("%s; the replicas' estimate of the quota: %.0f/s\n", resp.Status, quota.Estimate())
}

// A controller's queue whose per-item backoff survives a leader failover,
// combined with an overall bucket as backoff.DefaultControllerRateLimiter
// does. (Not run: it needs a Redis.)
func ExampleNewItemExponentialFailureRateLimiter() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	shared := backoffredis.NewItemExponentialFailureRateLimiter[string](rdb, "pods", 5*time.Millisecond, 1000*time.Second)
	q := backoff.NewRateLimitingQueue(backoff.NewMaxOfRateLimiter[string](shared,
		backoff.NewBucketRateLimiter[string](10, 100)))
	defer q.ShutDown()
	q.AddRateLimited("ns/web-1")
}

// During an outage go-redis logs every failed dial itself, to stderr, on top
// of the limiter's one line per change of state. A program quiets those lines
// once, at start-up, before it builds its clients. (Not run: it changes
// go-redis's logger for the whole process.)
func Example_goRedisDialLogs() {
	goredis.SetLogger(logging.NewBlacklistLogger([]string{"failed to dial"}))
}
