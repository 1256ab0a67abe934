package backoff

import "log/slog"

// The options of the queues; WithMetrics is in metrics.go.

// WithName names a queue. The name is attached, as the attribute "queue", to
// what [RunWorkers] logs about the queue's items; the empty name (the
// default) attaches nothing.
func WithName(name string) Option {
	return func(c *config) { c.queue.name = name }
}

// WithLogger makes [RunWorkers] log the failures of a queue's items (handler
// errors, permanent errors, panics) to l instead of slog.Default(). To
// silence it, pass a logger whose handler discards records. The queue itself
// never logs.
//
// WithLogger panics if l is nil.
func WithLogger(l *slog.Logger) Option {
	mustNotBeNil("WithLogger", "l", l == nil)
	return func(c *config) { c.queue.logger = l }
}
