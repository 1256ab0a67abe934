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
		"1        0       connection refused  0.01",
		"5        0.15    connection refused  -",
		"after 5 attempts: attempts exhausted",
		".Step(): 1 s (Steps 9), 2 s (Steps 0), 3 s (Steps 0), 3 s (Steps 0)",
		"ExponentialBackoff: checks at 0, 1 s; returns at 3 s",
		"attempts at 0, 1, 3, 6, 9, 12, 15, 18, 21, 24 s",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the retry timeline lacks %q:\n%s", want, out.String())
		}
	}
}
