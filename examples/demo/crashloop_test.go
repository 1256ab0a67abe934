package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTickerGatedGaps(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	gaps := func(runs []tickerRun) []time.Duration {
		var out []time.Duration
		for _, r := range runs {
			out = append(out, r.gap)
		}
		return out
	}
	assert.Equal(t, []time.Duration{1 * s, 5 * s, 10 * s, 20 * s, 40 * s, 60 * s, 60 * s}, gaps(tickerGated(0, 7)))
	assert.Equal(t, []time.Duration{1 * s, 6*s - ms, 11*s - ms, 21*s - ms, 41*s - ms, 61*s - ms}, gaps(tickerGated(ms, 6)))
}

func TestCrashLoopWaits(t *testing.T) {
	s := time.Second
	var waited, backoffs []time.Duration
	var attempts []int
	for _, r := range crashLoop(crashLoopRuns) {
		waited = append(waited, r.waited)
		backoffs = append(backoffs, r.backoff)
		attempts = append(attempts, r.attempts)
	}
	assert.Equal(t, []time.Duration{0, 10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s, 300 * s, 0, 10 * s, 20 * s}, waited)
	assert.Equal(t, []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s, 300 * s, 300 * s, 10 * s, 20 * s, 40 * s}, backoffs)
	assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3}, attempts)
}

func TestBackoffTimelinesPrint(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"backoff-ticker", "    7     196       60           60\n"},
		{"kubelet-crashloop", "        9    1511           0           10         1  crashes at once\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var first, second bytes.Buffer
			require.NoError(t, runTimelines(&first, tt.name, false))
			require.NoError(t, runTimelines(&second, tt.name, false))
			out := first.String()
			assert.True(t, strings.HasPrefix(out, "== "+tt.name+": "), out)
			assert.Contains(t, out, tt.want)
			assert.Equal(t, out, second.String(), "deterministic")
		})
	}
}
