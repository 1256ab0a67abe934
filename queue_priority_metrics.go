package backoff

import "strconv"

// PriorityDepthMetrics is implemented by a [QueueMetrics] that also wants
// the depth of a queue per priority: controller-runtime's
// workqueue_depth with a priority label. A queue given such metrics with
// [WithMetrics] calls SetPriorityDepth, with its lock held, each time the
// number of ready items of a priority changes, besides SetDepth.
//
// The priority is a label: the decimal priority for the first
// [MaxPriorityLabels] distinct priorities the queue sees, and
// [OtherPriorityLabel] for all the others together, so that the number of
// series per queue stays bounded whatever priorities callers use
// (controller-runtime#3396).
type PriorityDepthMetrics interface {
	SetPriorityDepth(priority string, n int)
}

const (
	// MaxPriorityLabels is how many distinct priorities a queue reports
	// under labels of their own.
	MaxPriorityLabels = 16
	// OtherPriorityLabel is the label of the priorities beyond the first
	// MaxPriorityLabels.
	OtherPriorityLabel = "other"
)

// priorityDepths counts the ready items per priority label, for
// PriorityDepthMetrics.
type priorityDepths struct {
	m      PriorityDepthMetrics
	labels map[int]string
	depths map[string]int
}

// initPriorityDepths sets up the per-priority depths if m wants them.
func (q *Queue[T]) initPriorityDepths(m QueueMetrics) {
	if pm, ok := m.(PriorityDepthMetrics); ok {
		q.prioDepths = &priorityDepths{m: pm, labels: map[int]string{}, depths: map[string]int{}}
	}
}

// label returns the label of prio.
func (d *priorityDepths) label(prio int) string {
	if s, ok := d.labels[prio]; ok {
		return s
	}
	if len(d.labels) >= MaxPriorityLabels {
		return OtherPriorityLabel
	}
	s := strconv.Itoa(prio)
	d.labels[prio] = s
	return s
}

// add changes the depth of prio by delta and reports it.
func (d *priorityDepths) add(prio, delta int) {
	l := d.label(prio)
	n := d.depths[l] + delta
	d.depths[l] = n
	d.m.SetPriorityDepth(l, n)
}
