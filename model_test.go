package backoff_test

import (
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/require"
	"math/rand/v2"
	"os"
	"sort"
	"testing"
	"time"
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

// prioModel is a plain sequential model of a RateLimitingQueue with
// priorities, written from the documented semantics of AddWithOptions: the
// queue under test must agree with it after every operation.
type prioModel struct {
	now     time.Duration
	ready   []prioEntry // in the order the entries joined; Get takes the first of the highest priority
	dirty   map[int]bool
	proc    map[int]bool
	pend    map[int]int // the priority of a dirty item's pending run
	waiting map[int]prioWait
	seq     int
	shut    bool
	fails   map[int]int
	delay   func(n int) time.Duration
	maxWait time.Duration
	// fair is WithFairness(fairKey): turns holds, per priority, the keys
	// that have ready entries, in the order in which they are served.
	fair  bool
	turns map[int][]string
}

// fairKey is the key of the model tests' queues with fairness.
func fairKey(x int) string { return fmt.Sprint(x % 3) }

type prioEntry struct {
	x, prio int
	at      time.Duration // when it joined
}

type prioWait struct {
	at   time.Duration
	seq  int
	prio int
}

func newPrioModel(delay func(n int) time.Duration, maxWait time.Duration, fair bool) *prioModel {
	return &prioModel{dirty: map[int]bool{}, proc: map[int]bool{}, pend: map[int]int{},
		waiting: map[int]prioWait{}, fails: map[int]int{}, delay: delay, maxWait: maxWait,
		fair: fair, turns: map[int][]string{}}
}

// hasReady reports whether an entry of priority prio and key k is ready.
func (m *prioModel) hasReady(prio int, k string) bool {
	for _, e := range m.ready {
		if e.prio == prio && fairKey(e.x) == k {
			return true
		}
	}
	return false
}

// appendReady makes e ready; with fairness, a key that had no entry of
// e's priority joins the end of the serving order.
func (m *prioModel) appendReady(e prioEntry) {
	if m.fair && !m.hasReady(e.prio, fairKey(e.x)) {
		m.turns[e.prio] = append(m.turns[e.prio], fairKey(e.x))
	}
	m.ready = append(m.ready, e)
}

// removeReady takes the ready entry at index i out; with fairness, a key
// left without an entry of its priority leaves the serving order.
func (m *prioModel) removeReady(i int) prioEntry {
	e := m.ready[i]
	m.ready = append(m.ready[:i:i], m.ready[i+1:]...)
	if k := fairKey(e.x); m.fair && !m.hasReady(e.prio, k) {
		turns := m.turns[e.prio]
		for j, tk := range turns {
			if tk == k {
				m.turns[e.prio] = append(turns[:j:j], turns[j+1:]...)
				break
			}
		}
	}
	return e
}

func (m *prioModel) waitingInOrder() []int {
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

func (m *prioModel) promote() {
	if m.shut {
		return
	}
	for _, x := range m.waitingInOrder() {
		if w := m.waiting[x]; w.at <= m.now {
			delete(m.waiting, x)
			m.enqueue(x, w.prio, w.at)
		}
	}
}

func (m *prioModel) enqueue(x, prio int, at time.Duration) {
	if m.dirty[x] {
		if prio <= m.pend[x] {
			return
		}
		m.pend[x] = prio
		if !m.proc[x] {
			for i, e := range m.ready {
				if e.x == x {
					m.removeReady(i)
					break
				}
			}
			m.appendReady(prioEntry{x, prio, at})
		}
		return
	}
	m.dirty[x] = true
	m.pend[x] = prio
	if !m.proc[x] {
		m.appendReady(prioEntry{x, prio, at})
	}
}

func (m *prioModel) add(x, prio int) {
	if m.shut {
		return
	}
	m.promote()
	if w, ok := m.waiting[x]; ok {
		prio = max(prio, w.prio)
		delete(m.waiting, x)
	}
	m.enqueue(x, prio, m.now)
}

func (m *prioModel) wait(x int, d time.Duration, prio int) {
	w, ok := m.waiting[x]
	if !ok {
		m.waiting[x] = prioWait{m.now + d, m.seq, prio}
		m.seq++
		return
	}
	w.prio = max(w.prio, prio)
	if m.now+d < w.at {
		w.at, w.seq = m.now+d, m.seq
		m.seq++
	}
	m.waiting[x] = w
}

func (m *prioModel) addAfter(x int, d time.Duration, prio int) {
	if m.shut {
		return
	}
	m.promote()
	if d <= 0 {
		m.add(x, prio)
		return
	}
	m.wait(x, d, prio)
}

func (m *prioModel) addRateLimited(x int, after time.Duration, prio int) {
	if m.shut {
		return
	}
	m.promote()
	_, waits := m.waiting[x]
	if waits || m.dirty[x] {
		if waits {
			if after > 0 {
				m.wait(x, after, prio)
			} else {
				w := m.waiting[x]
				w.prio = max(w.prio, prio)
				m.waiting[x] = w
			}
		}
		if m.dirty[x] {
			m.enqueue(x, prio, m.now)
		}
		return
	}
	d := m.delay(m.fails[x])
	m.fails[x]++
	if after > 0 {
		d = min(d, after)
	}
	m.addAfter(x, d, prio)
}

// get hands out the oldest overdue entry with maxWait; else, from the
// highest priority, the first entry, or with fairness the first entry of
// the key whose turn it is, which then moves to the end of the order if it
// has more.
func (m *prioModel) get() (x, prio int, shut bool) {
	m.promote()
	if len(m.ready) == 0 {
		return 0, 0, true
	}
	pick := -1
	if m.maxWait > 0 {
		// The oldest overdue entry of a priority (its first: the entries
		// joined in time order), the higher priority on ties.
		heads := map[int]int{}
		for i, e := range m.ready {
			if _, ok := heads[e.prio]; !ok {
				heads[e.prio] = i
			}
		}
		for _, i := range heads {
			e := m.ready[i]
			if m.now-e.at <= m.maxWait {
				continue
			}
			if pick < 0 || e.at < m.ready[pick].at || (e.at == m.ready[pick].at && e.prio > m.ready[pick].prio) {
				pick = i
			}
		}
		if pick >= 0 {
			return m.take(pick)
		}
	}
	top := m.ready[0].prio
	for _, e := range m.ready {
		top = max(top, e.prio)
	}
	k := ""
	if m.fair {
		k = m.turns[top][0]
	}
	for i, e := range m.ready {
		if e.prio == top && (!m.fair || fairKey(e.x) == k) {
			pick = i
			break
		}
	}
	x, prio, shut = m.take(pick)
	if turns := m.turns[top]; m.fair && len(turns) > 0 && turns[0] == k {
		m.turns[top] = append(turns[1:len(turns):len(turns)], k)
	}
	return x, prio, shut
}

// take hands out the ready entry at index i.
func (m *prioModel) take(i int) (x, prio int, shut bool) {
	e := m.removeReady(i)
	m.dirty[e.x] = false
	m.proc[e.x] = true
	m.pend[e.x] = 0
	return e.x, e.prio, false
}

func (m *prioModel) done(x int) {
	m.promote()
	if !m.proc[x] {
		return
	}
	delete(m.proc, x)
	if m.dirty[x] {
		m.appendReady(prioEntry{x, m.pend[x], m.now})
	}
}

func (m *prioModel) length() int {
	m.promote()
	return len(m.ready)
}

// runPriorityModel drives a queue and the model with the operations that
// ops encodes, and reports the first disagreement.
// With fair, the queue and the model have WithFairness(fairKey).
func runPriorityModel(t *testing.T, ops []byte, maxWait time.Duration, fair bool) {
	t.Helper()
	delay := func(n int) time.Duration { return time.Duration(1+n%4) * 10 * time.Millisecond }
	fc := newQueueClock()
	l := newQLimiter[int](delay)
	opts := []backoff.Option{backoff.WithClock(fc), backoff.WithMaxReadyWait(maxWait)}
	if fair {
		opts = append(opts, backoff.WithFairness(fairKey))
	}
	q := backoff.NewRateLimitingQueue[int](l, opts...)
	defer q.ShutDown()
	m := newPrioModel(delay, maxWait, fair)
	prios := [...]int{-100, -1, 0, 0, 1, 5, 0, -100}
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s after %v", fmt.Sprintf(format, args...), log[max(0, len(log)-40):])
	}
	for i := 0; i+3 <= len(ops); i += 3 {
		op, a, b := ops[i], ops[i+1], ops[i+2]
		x := int(a % 6)
		prio := prios[(a>>3)%8]
		d := time.Duration(int(b%8)-2) * 10 * time.Millisecond
		var name string
		switch r := op % 100; {
		case r < 15:
			name = fmt.Sprintf("Add(%d)", x)
			q.Add(x)
			m.add(x, 0)
		case r < 30:
			o := backoff.AddOptions{After: d, Priority: prio, RateLimited: b&64 != 0}
			name = fmt.Sprintf("AddWithOptions(%+v, %d)", o, x)
			q.AddWithOptions(o, x)
			if o.RateLimited {
				m.addRateLimited(x, d, prio)
			} else {
				m.addAfter(x, d, prio)
			}
		case r < 38:
			name = fmt.Sprintf("AddAfter(%d, %v)", x, d)
			q.AddAfter(x, d)
			m.addAfter(x, d, 0)
		case r < 44:
			name = fmt.Sprintf("AddRateLimited(%d)", x)
			q.AddRateLimited(x)
			m.addRateLimited(x, 0, 0)
		case r < 64:
			if m.length() == 0 && !m.shut {
				continue // Get would block
			}
			item, p, shut := q.GetWithPriority()
			wx, wp, ws := m.get()
			name = fmt.Sprintf("GetWithPriority() = %d, %d, %v", item, p, shut)
			if item != wx || p != wp || shut != ws {
				fail("%s, want %d, %d, %v", name, wx, wp, ws)
			}
		case r < 80:
			for p := range m.proc {
				x = p
				break
			}
			name = fmt.Sprintf("Done(%d)", x)
			q.Done(x)
			m.done(x)
		case r < 92:
			step := time.Duration(b%4) * 10 * time.Millisecond
			name = fmt.Sprintf("Step(%v)", step)
			fc.Step(step)
			m.now += step
		case r < 95:
			name = fmt.Sprintf("Forget(%d)", x)
			q.Forget(x)
			delete(m.fails, x)
		case r < 97:
			name = "TakeWaiting()"
			m.promote()
			want := []string{}
			for _, x := range m.waitingInOrder() {
				want = append(want, fmt.Sprintf("%d@%d", x, m.waiting[x].prio))
			}
			m.waiting = map[int]prioWait{}
			got := []string{}
			for _, w := range q.TakeWaiting() {
				got = append(got, fmt.Sprintf("%d@%d", w.Item, w.Priority))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				fail("%s = %v, want %v", name, got, want)
			}
		case r < 98:
			name = "ShutDown()"
			q.ShutDown()
			m.promote()
			m.shut = true
		default:
			continue
		}
		log = append(log, name)
		if got, want := q.Len(), m.length(); got != want {
			fail("Len() = %d, want %d", got, want)
		}
		if got, want := q.NumRequeues(x), m.fails[x]; got != want {
			fail("NumRequeues(%d) = %d, want %d", x, got, want)
		}
		at, ok := q.NextReadyAt()
		if w := m.waitingInOrder(); len(w) > 0 && !m.shut {
			if !ok || at.Sub(epoch) != m.waiting[w[0]].at {
				fail("NextReadyAt() = %v, %v, want %v", at.Sub(epoch), ok, m.waiting[w[0]].at)
			}
		} else if ok {
			fail("NextReadyAt() = %v, true, want false", at.Sub(epoch))
		}
	}
}

func TestPriorityQueueAgreesWithModel(t *testing.T) {
	runPriorityModelSeeds(t, false, 21)
}

// runPriorityModelSeeds runs runPriorityModel over random operation
// sequences (40 seeds of 600 operations, 400 of 3,000 with BACKOFF_LONG),
// without and with a max-ready-wait bound; stream picks the sequences.
func runPriorityModelSeeds(t *testing.T, fair bool, stream uint64) {
	seeds, n := uint64(40), 600
	if os.Getenv("BACKOFF_LONG") != "" {
		seeds, n = 400, 3000
	}
	for _, maxWait := range []time.Duration{0, 25 * time.Millisecond} {
		for seed := uint64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprintf("maxWait=%v/%d", maxWait, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, stream))
				ops := make([]byte, 3*n)
				for i := range ops {
					ops[i] = byte(rng.Uint32())
				}
				runPriorityModel(t, ops, maxWait, fair)
			})
		}
	}
}

func FuzzPriorityQueue(f *testing.F) {
	f.Add([]byte{20, 8, 70, 50, 0, 0, 70, 1, 1}, false)
	f.Add([]byte{25, 200, 3, 10, 40, 2, 85, 1, 3, 55, 0, 0}, true)
	f.Fuzz(func(t *testing.T, ops []byte, bounded bool) {
		maxWait := time.Duration(0)
		if bounded {
			maxWait = 25 * time.Millisecond
		}
		fair := len(ops) > 0 && ops[0]&1 == 1
		runPriorityModel(t, ops, maxWait, fair)
	})
}

// TestPriorityQueueWithFairnessAgreesWithModel is
// TestPriorityQueueAgreesWithModel with fairness: the exact round-robin
// order, raised items included, and with the bound the oldest overdue item
// first.
func TestPriorityQueueWithFairnessAgreesWithModel(t *testing.T) {
	runPriorityModelSeeds(t, true, 22)
}
