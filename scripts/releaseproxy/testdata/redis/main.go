// Program redis is the release rehearsal's user of the module
// github.com/retrykit/backoff/interop/redis. It runs no Redis server: the
// limiter's client points at a closed port, so its decision is made by the
// local fallback, as during an outage.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	goredis "github.com/redis/go-redis/v9"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

func main() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	api := backoffredis.NewLimiter(rdb, "partner-api", 100, 10,
		backoffredis.WithLogger(nil), backoffredis.WithTimeout(100*time.Millisecond))

	res, err := api.AllowN(context.Background(), 1)
	if err != nil {
		fail("AllowN: %v", err)
	}
	if !res.Allowed || res.Shared {
		fail("AllowN: allowed %v, shared %v; want allowed by the local fallback", res.Allowed, res.Shared)
	}
	if st := api.Stats(); st.Fallback != 1 || st.Available {
		fail("Stats: %+v; want 1 fallback decision and Redis unavailable", st)
	}
	fmt.Printf("redis.Limiter %s: allowed by the local fallback while Redis is unreachable\n", api.Key())
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "redis: "+format+"\n", args...)
	os.Exit(1)
}
