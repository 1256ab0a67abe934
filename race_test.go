//go:build race

package backoff_test

// raceEnabled says that the tests run under the race detector, under which
// sync.Pool drops items at random: a test of what pooling spares skips then.
const raceEnabled = true
