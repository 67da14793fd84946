package worker

import (
	"container/heap"
	"math"
	"time"

	"github.com/mirrorfleet/mirrorfleet/shared/priority"
)

// Queue is the fetch schedule of one worker: a min-priority queue of the repos
// it owns, plus a holding heap of repos that may not be fetched before a given time
// (per-repo minimum interval, back-off, Retry-After). It is not safe for concurrent use.
//
// A repo pushed with a time it may not be fetched before goes to the queue like any
// other, and is held only if it comes to the front before that time: nearly every poll
// requeues its repo past the minimum interval, and its turn comes much later, so a
// queue that held each one until then would move every repo through the holding heaps
// and back at every poll.
type Queue struct {
	ready   qheap    // repos by priority: the front one is eligible (after hold)
	waiting waitHeap // held repos, by the time they become eligible (few: a plain heap)
	held    qheap    // the waiting repos again, by priority: Min must not put a repo behind them
	items   map[string]*qitem
	free    *qitem // items no longer queued, for reuse
	seq     int64
	front   int64   // front pushes so far
	fronts  int     // items queued by PushFront and not yet popped or removed
	last    float64 // priority of the last pop: the queue's virtual "now"
}

type qitem struct {
	id        string
	priority  float64
	notBefore time.Time
	seq       int64  // FIFO among equal priorities; far below zero: pushed to the front
	pos       [2]int // position in ready or waiting (posQueue), and in held (posHeld)
	inReady   bool
	next      *qitem // in the free list
}

// NewQueue returns an empty queue.
func NewQueue() *Queue {
	return &Queue{items: map[string]*qitem{}, held: qheap{which: posHeld}}
}

// The slots of qitem.pos.
const (
	posQueue = iota
	posHeld
)

// newItem is a cleared item, reused when one is free.
func (q *Queue) newItem() *qitem {
	it := q.free
	if it == nil {
		return new(qitem)
	}
	q.free, *it = it.next, qitem{}
	return it
}

// freeItem keeps an item no longer queued for reuse.
func (q *Queue) freeItem(it *qitem) {
	*it = qitem{next: q.free}
	q.free = it
}

// Len is the number of queued repos (not counting those popped and in flight).
func (q *Queue) Len() int { return len(q.items) }

// Has reports whether id is queued.
func (q *Queue) Has(id string) bool { _, ok := q.items[id]; return ok }

// Min is the priority at the front of the queue: the smallest queued priority, held
// repos included (they are served first once eligible), or the last one popped when
// that is smaller. Pushing at Min puts a repo next in line.
func (q *Queue) Min() float64 {
	m := q.last
	if len(q.ready.e) > 0 {
		m = min(m, q.ready.e[0].priority)
	}
	if len(q.held.e) > 0 {
		m = min(m, q.held.e[0].priority)
	}
	return m
}

// Push queues id (or requeues it) with priority, not to be fetched before notBefore.
func (q *Queue) Push(id string, priority float64, notBefore time.Time) {
	q.seq++
	q.push(id, priority, notBefore, q.seq)
}

// PushFront queues id (or requeues it) next in line: at Min, ahead of the repos already
// there that were not pushed to the front themselves.
func (q *Queue) PushFront(id string) {
	q.front++
	q.push(id, q.Min(), time.Time{}, math.MinInt64/2+q.front)
}

// FrontClones is how many repos may wait at the front of a queue before a repo not
// cloned yet is queued further back (PushNew).
const FrontClones = 64

// PushNew queues a repo not cloned yet. While fewer than FrontClones repos wait at the
// front it goes there, so a repo added alone (or a few) is cloned at once. Past that it
// is a bulk add: each goes at a phase of its own (from its id) within step of Min, step
// being the policy's for a repo of unknown rate, so the clones are spread over that
// step and the repos already cloned keep their turns in between. Cloning 10,000 repos
// at a quarter of a poll a day takes four days; with every clone at the front, no repo
// cloned on the first day would be fetched again before the fifth.
func (q *Queue) PushNew(id string, step float64) {
	if q.fronts < FrontClones || step <= 0 {
		q.PushFront(id)
		return
	}
	phase := float64(idHash("first-clone/", id)>>11) / (1 << 53) // uniform in [0, 1)
	q.Push(id, q.Min()+phase*step, time.Time{})
}

func (q *Queue) push(id string, priority float64, notBefore time.Time, seq int64) {
	q.Remove(id)
	it := q.newItem()
	it.id, it.priority, it.notBefore, it.seq = id, priority, notBefore, seq
	if seq < 0 {
		q.fronts++
	}
	q.items[id] = it
	it.inReady = true
	q.ready.push(it)
}

// Remove drops id; it reports whether id was queued.
func (q *Queue) Remove(id string) bool {
	it, ok := q.items[id]
	if !ok {
		return false
	}
	delete(q.items, id)
	if it.seq < 0 {
		q.fronts--
	}
	if it.inReady {
		q.ready.remove(it.pos[posQueue])
	} else {
		heap.Remove(&q.waiting, it.pos[posQueue])
		q.held.remove(it.pos[posHeld])
	}
	q.freeItem(it)
	return true
}

// Priority returns id's queued priority.
func (q *Queue) Priority(id string) (float64, bool) {
	it, ok := q.items[id]
	if !ok {
		return 0, false
	}
	return it.priority, true
}

// Ahead reports how many queued repos come before id (a smaller priority, or the same
// one queued earlier) and when id may be fetched at the earliest; false if id is not
// queued. It walks the whole queue: for a person asking, not for the fetch loop.
func (q *Queue) Ahead(id string) (n int, notBefore time.Time, ok bool) {
	it, ok := q.items[id]
	if !ok {
		return 0, time.Time{}, false
	}
	for _, o := range q.items {
		if o.priority < it.priority || o.priority == it.priority && o.seq < it.seq {
			n++
		}
	}
	return n, it.notBefore, true
}

// Peek returns the repo Pop would return at now, leaving it queued.
func (q *Queue) Peek(now time.Time) (id string, priority float64, ok bool) {
	q.settle(now)
	if len(q.ready.e) == 0 {
		return "", 0, false
	}
	return q.ready.e[0].it.id, q.ready.e[0].priority, true
}

// Pop removes and returns the repo with the smallest priority among those eligible at now.
func (q *Queue) Pop(now time.Time) (id string, priority float64, ok bool) {
	q.settle(now)
	if len(q.ready.e) == 0 {
		return "", 0, false
	}
	it := q.ready.remove(0)
	delete(q.items, it.id)
	if it.seq < 0 {
		q.fronts--
	}
	q.last = it.priority
	id, priority = it.id, it.priority
	q.freeItem(it)
	return id, priority, true
}

// settle readies the queue for now: the held repos eligible at now go back to the
// queue, then the front is held while it is not eligible. The front is then the
// eligible repo of the smallest priority: every eligible repo is in the queue, and
// none before it.
func (q *Queue) settle(now time.Time) {
	for len(q.waiting) > 0 && !q.waiting[0].notBefore.After(now) {
		it := heap.Pop(&q.waiting).(*qitem)
		q.held.remove(it.pos[posHeld])
		it.inReady = true
		q.ready.push(it)
	}
	for len(q.ready.e) > 0 && q.ready.e[0].it.notBefore.After(now) {
		it := q.ready.remove(0)
		it.inReady = false
		heap.Push(&q.waiting, it)
		q.held.push(it)
	}
}

// NextEligible is when the earliest held repo becomes eligible after now (zero if one
// is eligible at now or the queue is empty; ok=false when nothing is queued).
func (q *Queue) NextEligible(now time.Time) (time.Time, bool) {
	q.settle(now)
	if len(q.ready.e) > 0 {
		return time.Time{}, true
	}
	if len(q.waiting) > 0 {
		return q.waiting[0].notBefore, true
	}
	return time.Time{}, false
}

// qheap is a queue's heap by priority, then seq (ready, held), four-ary: shallower than
// binary, as a pop, the fetch loop's commonest step, compares more per level but walks
// half as many. Its entries keep their item's priority and seq beside it, so that
// ordering them reads no item. Each item records its position in it
// (qitem.pos[which]). The order is total (seq breaks ties), so the heap's shape never
// shows in what is popped.
type qheap struct {
	e     []qentry
	which int // the item's position slot this heap keeps
}

type qentry struct {
	priority float64
	seq      int64
	it       *qitem
}

const qarity = 4

func (h *qheap) less(a, b *qentry) bool {
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	return a.seq < b.seq
}

// waitHeap orders the waiting repos by when they become eligible, then seq.
type waitHeap []*qitem

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	if !h[i].notBefore.Equal(h[j].notBefore) {
		return h[i].notBefore.Before(h[j].notBefore)
	}
	return h[i].seq < h[j].seq
}
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos[posQueue], h[j].pos[posQueue] = i, j
}
func (h *waitHeap) Push(x any) { it := x.(*qitem); it.pos[posQueue] = len(*h); *h = append(*h, it) }
func (h *waitHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.pos[posQueue] = -1
	return it
}

// set puts x at i.
func (h *qheap) set(i int, x qentry) {
	h.e[i] = x
	x.it.pos[h.which] = i
}

func (h *qheap) push(it *qitem) {
	h.e = append(h.e, qentry{})
	h.up(len(h.e)-1, qentry{priority: it.priority, seq: it.seq, it: it})
}

// remove takes out the entry at i and returns its item.
func (h *qheap) remove(i int) *qitem {
	n := len(h.e) - 1
	it := h.e[i].it
	last := h.e[n]
	h.e[n] = qentry{}
	h.e = h.e[:n]
	if i < n {
		if i > 0 && h.less(&last, &h.e[(i-1)/qarity]) {
			h.up(i, last)
		} else {
			h.down(i, last)
		}
	}
	it.pos[h.which] = -1
	return it
}

// up places x at the hole j or above it.
func (h *qheap) up(j int, x qentry) {
	for j > 0 {
		i := (j - 1) / qarity
		if !h.less(&x, &h.e[i]) {
			break
		}
		h.set(j, h.e[i])
		j = i
	}
	h.set(j, x)
}

// down places x at the hole i or below it.
func (h *qheap) down(i int, x qentry) {
	n := len(h.e)
	for {
		c := qarity*i + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < min(c+qarity, n); k++ {
			if h.less(&h.e[k], &h.e[m]) {
				m = k
			}
		}
		if !h.less(&h.e[m], &x) {
			break
		}
		h.set(i, h.e[m])
		i = m
	}
	h.set(i, x)
}

// CloneStep is the step policy gives a repo not cloned yet: what one failed clone adds
// to its wait, the step of a repo of unknown rate.
func CloneStep(policy priority.Policy, prior *priority.Prior) float64 {
	return policy.Next(priority.Input{CloneFailCnt: 1, Prior: prior}) - policy.Next(priority.Input{Prior: prior})
}
