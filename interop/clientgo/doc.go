// Package clientgobackoff gives a client-go client a request rate learned
// from the API server's answers instead of a fixed one: a
// flowcontrol.RateLimiter (what rest.Config.RateLimiter takes) backed by a
// backoff.AdaptiveRate, and a transport wrapper that reports every answer
// to it.
//
// client-go's default is a fixed 5 queries per second with bursts of 10 for
// every client. Since API Priority and Fairness (APF) the server protects
// itself: it queues requests per priority level and answers 429 with a
// Retry-After when a level's seats and queues are full. The fixed client
// limit then only slows clients down while the server has room
// (kubernetes#111880), and disabling it (cert-manager PR #8757) leaves
// nothing to slow them when the server has none. With [Configure], a
// client sends without a rate limit until the server's first 429, then paces
// at the rate the server granted, held for its Retry-After, and probes
// upward again as the answers stay good (see backoff.AdaptiveRate); and it
// has at most 10 requests in flight at first (client-go's default burst),
// a limit learned from then on from the server's latency and 429s (see
// backoff.AdaptiveLimiter), so that many goroutines starting together do not
// overflow APF's queue before the first 429 comes back.
//
//	cfg, err := rest.InClusterConfig() // or clientcmd...
//	clientgobackoff.Configure(cfg)
//	clientset, err := kubernetes.NewForConfig(cfg)
//
// With controller-runtime, configure the rest.Config before building the
// manager: ctrl.NewManager(cfg, options) keeps its RateLimiter and
// WrapTransport, and so does every client the manager builds from it.
package clientgobackoff
