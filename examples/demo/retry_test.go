package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRetryDemo pins the numbers the retry timeline exists to show.
func TestRetryDemo(t *testing.T) {
	var out bytes.Buffer
	retryDemo(&out)
	for _, want := range []string{
		"1        0s     connection refused  10ms",
		"5        150ms  connection refused  -",
		"after 5 attempts: attempts exhausted",
		".Step(): 1s (Steps 9), 2s (Steps 0), 3s (Steps 0), 3s (Steps 0)",
		"ExponentialBackoff: checks at 0s, 1s; returns at 3s",
		"attempts at 0s, 1s, 3s, 6s, 9s, 12s, 15s, 18s, 21s, 24s",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the retry timeline lacks %q:\n%s", want, out.String())
		}
	}
}
