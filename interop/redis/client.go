package redis

import (
	"log/slog"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// checkClient warns, once per limiter, when client would not honour the
// per-call deadline: go-redis ignores a context's deadline unless its options
// say ContextTimeoutEnabled, and then waits for its own ReadTimeout (3 s by
// default) on a stalled server, which no caller of a limiter expects.
func checkClient(client goredis.UniversalClient, c config, what string) {
	enabled, read := true, time.Duration(0)
	switch cl := client.(type) {
	case *goredis.Client:
		enabled, read = cl.Options().ContextTimeoutEnabled, cl.Options().ReadTimeout
	case *goredis.ClusterClient:
		enabled, read = cl.Options().ContextTimeoutEnabled, cl.Options().ReadTimeout
	}
	if enabled || (read > 0 && read <= c.timeout) || c.logger == nil {
		return
	}
	c.logger.Warn(msgPrefix+"the client's options lack ContextTimeoutEnabled: true, so a stalled Redis can block a decision for the client's ReadTimeout instead of the limiter's timeout",
		slog.String("limiter", what), slog.Duration("timeout", c.timeout))
}
