package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAgendaRunsEventsByInstantThenInSchedulingOrder(t *testing.T) {
	var q Agenda
	for id, at := range []time.Duration{3 * time.Second, time.Second, 3 * time.Second, time.Second, 2 * time.Second} {
		q.Schedule(at, 0, id)
	}
	var got []int
	for q.Len() > 0 {
		got = append(got, q.Next().ID)
	}
	assert.Equal(t, []int{1, 3, 4, 0, 2}, got)
}

func TestStatistics(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	assert.Equal(t, time.Duration(9), Percentile(ds, 0.9))
	assert.Equal(t, time.Duration(10), Percentile(ds, 0.99))
	assert.Equal(t, time.Duration(0), Percentile(nil, 0.5), "no samples")

	var counts []int
	Count(&counts, 2)
	Count(&counts, 2)
	Count(&counts, 4)
	assert.Equal(t, []int{0, 0, 2, 0, 1}, counts)
	assert.Equal(t, 2, Sum(counts, time.Second, 3*time.Second), "seconds 1 and 2")
	assert.InDelta(t, 0.3, PerSecond(counts, 0, 10*time.Second), 1e-12, "past the counts, seconds count as empty")
}
