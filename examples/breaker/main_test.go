package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/retrykit/backoff/internal/sim"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// targetSeeds is how many seeds the target tests play, from seed 1: three
// in the long mode (BACKOFF_LONG=1, which CI runs without -race), one
// otherwise, so that the README's test command stays quick under -race,
// where a simulation runs some fifteen times slower. TestProgram checks
// seed 1's figures exactly in both.
func targetSeeds() uint64 {
	if os.Getenv("BACKOFF_LONG") == "1" {
		return 3
	}
	return 1
}

// TestStragglersTargets: for seeds 1–3 (seed 1 outside the long mode: see
// targetSeeds), hedging after the learned p98 sends at most 3% more
// attempts, and cuts the p99.9 latency by at least 6×. The target of 20× is
// printed, missed: with stragglers at 20× the median, a hedge that answers
// after the delay (above the p97) plus the median cannot do better than
// about 6.6× (see the report). The bound asserted is what the library
// reaches, so that a regression fails.
func TestStragglersTargets(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= targetSeeds(); seed++ {
		s := stragglers{sim.DefaultStragglers}
		s.Seed = seed
		f := s.figures()
		t.Logf("seed %d: p99.9 %v without hedging, %v with (%.1f×), %.2f%% extra attempts", seed, f.plain, f.hedged, f.ratio, 100*f.extra)
		assert.GreaterOrEqual(t, f.ratio, 6.0, "seed %d: p99.9 without hedging ÷ with", seed)
		assert.True(t, f.extraOK, "seed %d: %.2f%% extra attempts, want ≤ 3%%", seed, 100*f.extra)
	}
}

// TestOutageTargets: for seeds 1–3 (seed 1 outside the long mode: see
// targetSeeds), while the backend is down, retries and hedges under the
// budget send at most 1.10× the first attempts; with the breaker, at most 5%
// of the calls reach it; full traffic comes back within 5 s of the recovery.
func TestOutageTargets(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= targetSeeds(); seed++ {
		s := outage{sim.DefaultOutage}
		s.Seed = seed
		f := s.figures()
		t.Logf("seed %d: %.3f× offered, %.2f%% reached with the breaker, back after %v", seed, f.offered, 100*f.reachedShare, f.back)
		assert.True(t, f.offeredOK, "seed %d: offered %.3f×, want ≤ 1.10×", seed, f.offered)
		assert.True(t, f.reachedOK, "seed %d: %.2f%% of calls reached the backend, want ≤ 5%%", seed, 100*f.reachedShare)
		assert.True(t, f.backOK, "seed %d: full traffic %v after the recovery, want ≤ 5s", seed, f.back)
		assert.Greater(t, f.trips, 0, "seed %d: the breaker tripped", seed)
	}
}

// TestBlipTargets: for seeds 1–3 (seed 1 outside the long mode: see
// targetSeeds), a blip of 0.14% timeouts at 840 calls/s trips no breaker and
// has at most 0.2% of calls rejected locally.
func TestBlipTargets(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= targetSeeds(); seed++ {
		s := blip{sim.DefaultBlip}
		s.Seed = seed
		f := s.figures()
		assert.True(t, f.tripsOK, "seed %d: %d trips, want 0", seed, f.trips)
		assert.True(t, f.rejectedOK, "seed %d: %.3f%% rejected, want ≤ 0.2%%", seed, 100*f.rejectedShare)
		assert.Greater(t, sumInts(f.run.Sent), sumInts(f.run.Calls), "seed %d: the timeouts were retried or hedged", seed)
	}
}

// TestSparseTargets: for seeds 1–3 (seed 1 outside the long mode: see
// targetSeeds), a failure every 19 s trips the breaker on the 5th failure in
// a row, and a breaker with the ratio rule alone never trips.
func TestSparseTargets(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= targetSeeds(); seed++ {
		s := sparse{sim.DefaultSparse}
		s.Seed = seed
		f := s.figures()
		assert.True(t, f.tripOK, "seed %d: tripped at %v after %d failures, want on the 5th", seed, f.trip, f.before)
		assert.Zero(t, f.ratioTrips, "seed %d: the ratio rule alone", seed)
	}
}

func sumInts(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestProgram runs the program with seed 1 and -svg: the figures, and an
// SVG that is well-formed, with a chart per scenario. The outage, the one
// that involves every type, run twice gives the same figures and SVG;
// another seed draws other figures.
func TestProgram(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := runProgram(t, "-svg", filepath.Join(dir, "all.svg"))
	for _, figure := range []string{
		"200ms ÷ 32.82ms = 6.1×",
		"1.91%",
		"32732 ÷ 29766 = 1.100×",
		"64 of 29766 = 0.21%",
		"0 of 33338 = 0.000%",
		"at 95.05s, on failure 5 in a row",
		"targets: 7 met, 1 missed",
	} {
		assert.Contains(t, out, figure)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "all.svg"))
	require.NoError(t, err)
	checkSVG(t, svg)

	first, second := filepath.Join(dir, "first.svg"), filepath.Join(dir, "second.svg")
	once := runProgram(t, "-scenario", "outage", "-svg", first)
	assert.Equal(t, once, runProgram(t, "-seed", "1", "-scenario", "outage", "-svg", second), "the figures are deterministic")
	a, err := os.ReadFile(first)
	require.NoError(t, err)
	b, err := os.ReadFile(second)
	require.NoError(t, err)
	assert.Equal(t, string(a), string(b), "the SVG is deterministic")

	// The stragglers, not the outage: a third of its cost under -race.
	other := runProgram(t, "-seed", "2", "-scenario", "stragglers")
	assert.Contains(t, other, "seed 2")
	assert.NotContains(t, other, "200ms ÷ 32.82ms")
}

// checkSVG checks that data is a well-formed SVG document with a chart per
// scenario.
func checkSVG(t *testing.T, data []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	elements := map[string]int{}
	titles := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the SVG is well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			elements[tok.Name.Local]++
		case xml.CharData:
			for _, p := range []string{"stragglers:", "outage:", "blip:", "slow and sparse:"} {
				if strings.HasPrefix(string(tok), p) {
					titles++
				}
			}
		}
	}
	assert.Equal(t, 1, elements["svg"])
	assert.Equal(t, 4, titles, "a title per panel")
	assert.GreaterOrEqual(t, elements["polyline"], 10, "a line per series")
}

// TestScenarioFlag: -scenario selects by a prefix of a name or of a word
// of it, and rejects what matches nothing.
func TestScenarioFlag(t *testing.T) {
	t.Parallel()
	out := runProgram(t, "-scenario", "sparse")
	assert.Contains(t, out, "== slow and sparse")
	assert.NotContains(t, out, "== outage")
	assert.Contains(t, out, "targets: 1 met, 0 missed")

	err := run([]string{"-scenario", "nothing"}, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "stragglers, outage, blip, slow-sparse")
	assert.Error(t, run([]string{"extra"}, io.Discard, io.Discard))
	assert.True(t, errors.Is(run([]string{"-h"}, io.Discard, io.Discard), flag.ErrHelp))
}

// runProgram runs the program with args and returns what it printed.
func runProgram(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(args, &out, io.Discard))
	return out.String()
}
