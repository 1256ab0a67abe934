package backoff

// backoffConfig holds the options that Backoff reads. Its zero value is the
// default. (Stub: the per-key Backoff lands here.)
type backoffConfig struct{}
