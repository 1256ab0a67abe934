package backoff

// retryConfig holds the options that Retry reads. Its zero value is the
// default. (Stub: Retry lands here.)
type retryConfig struct{}
