package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the run if a demo leaves a goroutine running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runDemo runs the timelines as the command would and returns what it printed.
func runDemo(t *testing.T, only string, list bool) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, runTimelines(&out, only, list))
	return out.String()
}

func TestEveryTimelineRunsAndIsListed(t *testing.T) {
	listing := runDemo(t, "", true)
	all := runDemo(t, "", false)
	for _, tl := range timelines {
		assert.Contains(t, listing, tl.name)
		assert.Contains(t, all, "== "+tl.name+": "+tl.title)
	}
}

func TestOnlyRunsOneTimeline(t *testing.T) {
	saved := timelines
	t.Cleanup(func() { timelines = saved })
	timelines = nil
	register("b", "second", func(w io.Writer) { io.WriteString(w, "ran b\n") })
	register("a", "first", func(w io.Writer) { io.WriteString(w, "ran a\n") })

	assert.Equal(t, "== a: first\nran a\n\n== b: second\nran b\n\n", runDemo(t, "", false), "sorted by name")
	assert.Equal(t, "== b: second\nran b\n\n", runDemo(t, "b", false))

	err := runTimelines(io.Discard, "nope", false)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), `"nope"`))
}

// TestOnlyAcceptsPrefixes: -only selects by a prefix of the name or of a
// word of it (before, only exact names: -only requeue failed).
func TestOnlyAcceptsPrefixes(t *testing.T) {
	for only, want := range map[string][]string{
		"requeue":    {"controller-requeue"},
		"controller": {"controller-ratelimiter", "controller-requeue", "controller-runtime-log"},
		"kubelet":    {"kubelet-crashloop"},
		"crash":      {"kubelet-crashloop"},
		"sched":      {"scheduler-podbackoff"},
		"retry":      {"retry"},
	} {
		out := runDemo(t, only, true)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			got = append(got, strings.Fields(line)[0])
		}
		assert.Equal(t, want, got, "-only %s", only)
	}
}

// TestListIsAligned: every title starts in the same column (before, a name
// longer than the padding pushed its title right).
func TestListIsAligned(t *testing.T) {
	lines := strings.Split(strings.TrimSpace(runDemo(t, "", true)), "\n")
	require.Len(t, lines, len(timelines))
	column := -1
	for i, line := range lines {
		title := strings.Index(line, timelines[i].title)
		require.Positive(t, title, line)
		if column < 0 {
			column = title
		}
		assert.Equal(t, column, title, "title column of %q", timelines[i].name)
	}
}

// TestNoInternalNames: the output speaks of Kubernetes components, not of
// this project's files (before: crashloop-001, "the seed's log").
func TestNoInternalNames(t *testing.T) {
	out := runDemo(t, "", false) + runDemo(t, "", true)
	for _, word := range []string{"seed", "-00"} {
		assert.NotContains(t, out, word)
	}
	assert.Equal(t, 7, strings.Count(out, "\nNumbers: "), "every timeline says where its numbers come from")
}
