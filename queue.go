package backoff

// queueConfig holds the options that the queues read. Its zero value is the
// default. (Stub: the queues land here.)
type queueConfig struct{}
