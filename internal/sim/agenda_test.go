package sim

import (
	"math/rand/v2"
	"slices"
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

// TestAgendaAgreesWithASortedList: events scheduled at random instants,
// some shared, with removals interleaved, come out by instant and then in
// scheduling order, as a stable sort of what is scheduled would give them.
func TestAgendaAgreesWithASortedList(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var q Agenda
	var model []Event // pending events, kept sorted stably by instant
	for id := range 5000 {
		at := time.Duration(r.IntN(300))
		q.Schedule(at, 0, id)
		i, _ := slices.BinarySearchFunc(model, at+1, func(e Event, t time.Duration) int { return int(e.At - t) })
		model = slices.Insert(model, i, Event{At: at, ID: id})
		for r.IntN(3) == 0 && q.Len() > 0 {
			e := q.Next()
			if e.At != model[0].At || e.ID != model[0].ID {
				t.Fatalf("got event %d at %v, want %d at %v", e.ID, e.At, model[0].ID, model[0].At)
			}
			model = model[1:]
		}
	}
	for q.Len() > 0 {
		e := q.Next()
		assert.Equal(t, model[0].ID, e.ID)
		model = model[1:]
	}
	assert.Empty(t, model)
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
