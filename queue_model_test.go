package backoff_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff"
)

// queueModel is a plain sequential model of a RateLimitingQueue, written from
// the documented semantics: the queue under test must agree with it after
// every operation.
type queueModel struct {
	now     time.Duration
	ready   []int
	dirty   map[int]bool
	proc    map[int]bool
	waiting map[int]modelWait
	seq     int
	shut    bool
	fails   map[int]int
	delay   func(n int) time.Duration
}

type modelWait struct {
	at  time.Duration
	seq int
}

func newQueueModel(delay func(n int) time.Duration) *queueModel {
	return &queueModel{dirty: map[int]bool{}, proc: map[int]bool{}, waiting: map[int]modelWait{},
		fails: map[int]int{}, delay: delay}
}

// waitingInOrder returns the waiting items, earliest first.
func (m *queueModel) waitingInOrder() []int {
	var items []int
	for x := range m.waiting {
		items = append(items, x)
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := m.waiting[items[i]], m.waiting[items[j]]
		return a.at < b.at || (a.at == b.at && a.seq < b.seq)
	})
	return items
}

// promote queues the due items: every operation does it first.
func (m *queueModel) promote() {
	if m.shut {
		return
	}
	for _, x := range m.waitingInOrder() {
		if m.waiting[x].at <= m.now {
			delete(m.waiting, x)
			m.enqueue(x)
		}
	}
}

func (m *queueModel) enqueue(x int) {
	if m.dirty[x] {
		return
	}
	m.dirty[x] = true
	if !m.proc[x] {
		m.ready = append(m.ready, x)
	}
}

func (m *queueModel) add(x int) {
	if m.shut {
		return
	}
	m.promote()
	delete(m.waiting, x)
	m.enqueue(x)
}

func (m *queueModel) addAfter(x int, d time.Duration) {
	if m.shut {
		return
	}
	m.promote()
	if d <= 0 {
		m.add(x)
		return
	}
	if w, ok := m.waiting[x]; !ok || m.now+d < w.at {
		m.waiting[x] = modelWait{m.now + d, m.seq}
		m.seq++
	}
}

func (m *queueModel) addRateLimited(x int) {
	if m.shut {
		return
	}
	m.promote()
	if _, waits := m.waiting[x]; waits || m.dirty[x] {
		return
	}
	d := m.delay(m.fails[x])
	m.fails[x]++
	m.addAfter(x, d)
}

func (m *queueModel) get() (int, bool) {
	m.promote()
	if len(m.ready) == 0 {
		return 0, true
	}
	x := m.ready[0]
	m.ready = m.ready[1:]
	m.dirty[x] = false
	m.proc[x] = true
	return x, false
}

func (m *queueModel) done(x int) {
	m.promote()
	if !m.proc[x] {
		return
	}
	delete(m.proc, x)
	if m.dirty[x] {
		m.ready = append(m.ready, x)
	}
}

func (m *queueModel) length() int {
	m.promote()
	return len(m.ready)
}

func (m *queueModel) takeWaiting() []int {
	m.promote()
	items := m.waitingInOrder()
	m.waiting = map[int]modelWait{}
	return items
}

func TestQueueAgreesWithModel(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			delay := func(n int) time.Duration { return time.Duration(1+n%4) * 10 * time.Millisecond }
			fc := newQueueClock()
			q := backoff.NewRateLimitingQueue[int](newQLimiter[int](delay), backoff.WithClock(fc))
			defer q.ShutDown()
			m := newQueueModel(delay)
			var log []string // the operations so far, for the failure message
			for op := 0; op < 400; op++ {
				x := rng.IntN(6)
				d := time.Duration(rng.IntN(8)-2) * 10 * time.Millisecond // -20ms..50ms, many ties
				var name string
				switch r := rng.IntN(100); {
				case r < 15:
					name = fmt.Sprintf("Add(%d)", x)
					q.Add(x)
					m.add(x)
				case r < 35:
					name = fmt.Sprintf("AddAfter(%d, %v)", x, d)
					q.AddAfter(x, d)
					m.addAfter(x, d)
				case r < 45:
					name = fmt.Sprintf("AddRateLimited(%d)", x)
					q.AddRateLimited(x)
					m.addRateLimited(x)
				case r < 65:
					if m.length() == 0 && !m.shut {
						continue // Get would block
					}
					wantItem, wantShut := m.get()
					item, shut := q.Get()
					name = fmt.Sprintf("Get() = %d, %v", item, shut)
					require.Equal(t, [2]any{wantItem, wantShut}, [2]any{item, shut}, "%s after %v", name, log)
				case r < 80:
					for p := range m.proc { // any processing item
						x = p
						break
					}
					name = fmt.Sprintf("Done(%d)", x)
					q.Done(x)
					m.done(x)
				case r < 92:
					step := time.Duration(rng.IntN(4)) * 10 * time.Millisecond
					name = fmt.Sprintf("Step(%v)", step)
					fc.Step(step)
					m.now += step
				case r < 95:
					name = fmt.Sprintf("Forget(%d)", x)
					q.Forget(x)
					delete(m.fails, x)
				case r < 97:
					name = "TakeWaiting()"
					var got []int
					for _, w := range q.TakeWaiting() {
						got = append(got, w.Item)
					}
					require.Equal(t, m.takeWaiting(), got, "%s after %v", name, log)
				case op > 300:
					name = "ShutDown()"
					q.ShutDown()
					m.promote()
					m.shut = true
				default:
					continue
				}
				log = append(log, name)
				require.Equal(t, m.length(), q.Len(), "Len after %v", log)
				require.Equal(t, m.fails[x], q.NumRequeues(x), "NumRequeues(%d) after %v", x, log)
				at, ok := q.NextReadyAt()
				if w := m.waitingInOrder(); len(w) > 0 && !m.shut {
					require.True(t, ok, "NextReadyAt after %v", log)
					require.Equal(t, m.waiting[w[0]].at, at.Sub(epoch), "NextReadyAt after %v", log)
				} else {
					require.False(t, ok, "NextReadyAt after %v", log)
				}
			}
		})
	}
}
