//go:build !race

package backoff_test

const raceEnabled = false
