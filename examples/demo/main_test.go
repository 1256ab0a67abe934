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
