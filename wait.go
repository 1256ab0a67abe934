package backoff

// loopConfig holds the options that the loop helpers read. Its zero value is
// the default. (Stub: the loop helpers land here.)
type loopConfig struct{}
