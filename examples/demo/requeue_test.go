package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimiterSeriesMatchesControllerRuntime(t *testing.T) {
	const ms = time.Millisecond
	var delays []time.Duration
	for _, s := range limiterSeries(22) {
		delays = append(delays, s.delay)
	}
	want := make([]time.Duration, 0, 22)
	for n := 0; n < 18; n++ {
		want = append(want, 5*ms<<n) // 5 ms … 655.36 s, exact
	}
	for len(want) < 22 {
		want = append(want, 1000*time.Second)
	}
	assert.Equal(t, want, delays)
	assert.Equal(t, 655360*ms, delays[17])
}

func TestObservedLogMatchesControllerRuntime(t *testing.T) {
	const ms = time.Millisecond
	failures := observedLog(17)
	require.Len(t, failures, 17)
	assert.Zero(t, failures[0])
	var gaps []time.Duration
	for i := 1; i < len(failures); i++ {
		gaps = append(gaps, failures[i]-failures[i-1])
	}
	s := time.Second
	assert.Equal(t, []time.Duration{s, s, s, s, s, s, s, s,
		1280 * ms, 2560 * ms, 5120 * ms, 10240 * ms, 20480 * ms, 40960 * ms, 81920 * ms, 163840 * ms}, gaps)
}

func TestPodBackoffMatchesScheduler(t *testing.T) {
	const ms = time.Millisecond
	attempts := podBackoff(7, 300*ms)
	var backoffs []time.Duration
	for _, a := range attempts {
		backoffs = append(backoffs, a.backoff)
		assert.Equal(t, a.failedAt+a.backoff, a.readyAt, "attempt %d: ready exactly at the expiry", a.attempt)
		assert.GreaterOrEqual(t, a.flushAt, a.readyAt)
		assert.Less(t, a.flushAt-a.readyAt, time.Second)
	}
	s := time.Second
	assert.Equal(t, []time.Duration{s, 2 * s, 4 * s, 8 * s, 10 * s, 10 * s, 10 * s}, backoffs)
	assert.Equal(t, 1300*ms, attempts[0].readyAt)
	assert.Equal(t, 2*s, attempts[0].flushAt)
}

func TestRequeueTimelinesPrint(t *testing.T) {
	var out bytes.Buffer
	runLimiterSeries(&out)
	runObservedLog(&out)
	runPodBackoff(&out)
	for _, line := range []string{
		"18     655.36      1310.715",
		"19       1000      2310.715",
		"9       8                   1               0.64  Until's 1 s period",
		"17   334.4              163.84             163.84         the limiter",
		"5           16.5           10          26.5                27",
	} {
		assert.Contains(t, out.String(), line)
	}
}
