// Package membudget keeps a worker's fetches within a memory budget: each fetch
// reserves what it is expected to need before it starts, grows its reservation when
// the estimate proves low, and waits while the budget is taken (ADR 0026).
//
// Admission is pure logic (Admission, no clock, no locks); Pool wraps it for
// goroutines that wait within their context.
package membudget

// DefaultMaxPasses bounds how many later requests may be granted ahead of the oldest
// waiting one because they fit and it does not: small fetches keep flowing past a
// large one, which still gets its turn once that many have passed.
const DefaultMaxPasses = 16

// Admission decides which memory requests are granted. A request is either a new
// reservation or the growth of a granted one; they wait in arrival order, growths
// ahead of new reservations (a growing fetch holds memory already: the sooner it ends,
// the sooner that comes back).
//
// Rules:
//   - the oldest waiting request is granted when it fits in what the budget has left,
//     or when nothing else holds memory (a request larger than the budget runs alone);
//     a growth is also granted over the budget when every other reservation is
//     waiting to grow as well and it grows the oldest (else growths could wait on one
//     another for ever; the others hold only their start estimates meanwhile);
//   - a later request that fits is granted ahead of it, at most MaxPasses times for
//     one oldest waiter; after that, everyone waits until it has been granted.
//
// So a request never fails and is never overtaken for good: those ahead of it are
// bounded, and the memory held by granted ones comes back when they end.
type Admission struct {
	Budget    int64 // bytes; <= 0: no budget, every request is granted at once
	MaxPasses int   // 0: DefaultMaxPasses

	seq      uint64
	reserved int64
	granted  map[uint64]int64 // reservation id → bytes held
	waiting  []request        // growths first, then new reservations, each in arrival order
	passes   int              // later requests granted ahead of waiting[0]
	head     uint64           // the waiter passes counts for
}

type request struct {
	id     uint64 // reservation id (a growth names the reservation it grows)
	bytes  int64  // total the reservation wants to hold
	growth bool
}

// Reserved is the memory held by granted reservations (it can exceed the budget: a
// reservation larger than the budget alone, or the oldest one's growth).
func (a *Admission) Reserved() int64 { return a.reserved }

// Waiting is the number of requests waiting.
func (a *Admission) Waiting() int { return len(a.waiting) }

// Running is the number of granted reservations.
func (a *Admission) Running() int { return len(a.granted) }

// Held is what reservation id holds (0 if none).
func (a *Admission) Held(id uint64) int64 { return a.granted[id] }

// Request asks for a new reservation of bytes. It returns the reservation's id and
// the requests granted by this call (possibly including it).
func (a *Admission) Request(bytes int64) (uint64, []uint64) {
	a.seq++
	id := a.seq
	a.waiting = append(a.waiting, request{id: id, bytes: max(bytes, 0)})
	return id, a.grant()
}

// Grow asks for reservation id to hold bytes in all. It returns whether the growth is
// granted now (else it waits: a later call's result names id once it is) and the
// other requests granted.
func (a *Admission) Grow(id uint64, bytes int64) (bool, []uint64) {
	held, ok := a.granted[id]
	if !ok || bytes <= held {
		return true, nil
	}
	for _, w := range a.waiting {
		if w.id == id {
			return false, nil // already waiting to grow
		}
	}
	// Growths queue ahead of new reservations, oldest reservation first.
	i := 0
	for i < len(a.waiting) && a.waiting[i].growth && a.waiting[i].id < id {
		i++
	}
	a.waiting = append(a.waiting[:i], append([]request{{id: id, bytes: bytes, growth: true}}, a.waiting[i:]...)...)
	granted := a.grant()
	for k, g := range granted {
		if g == id {
			return true, append(granted[:k], granted[k+1:]...)
		}
	}
	return false, granted
}

// Withdraw takes back id's waiting request (its waiter gave up); a granted
// reservation keeps what it holds. It returns the requests this grants (the withdrawn
// one may have been holding others up).
func (a *Admission) Withdraw(id uint64) []uint64 {
	a.withdraw(id)
	return a.grant()
}

func (a *Admission) withdraw(id uint64) {
	for i, w := range a.waiting {
		if w.id == id {
			a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
			return
		}
	}
}

// Release gives back what reservation id holds and withdraws its waiting request, if
// any. It returns the requests this grants.
func (a *Admission) Release(id uint64) []uint64 {
	a.withdraw(id)
	if held, ok := a.granted[id]; ok {
		a.reserved -= held
		delete(a.granted, id)
	}
	return a.grant()
}

func (a *Admission) fits(r request) bool {
	return a.reserved-a.granted[r.id]+r.bytes <= a.Budget
}

// alone reports whether r may be granted regardless of the budget: nothing else holds
// memory, or r grows the oldest reservation and every other one is waiting to grow
// too (each holds only its start estimate, and one of them must go first).
func (a *Admission) alone(r request) bool {
	if len(a.granted) == 0 {
		return true
	}
	if !r.growth {
		return false
	}
	for id := range a.granted {
		if id != r.id && (id < r.id || !a.growing(id)) {
			return false
		}
	}
	return true
}

func (a *Admission) growing(id uint64) bool {
	for _, w := range a.waiting {
		if !w.growth {
			return false
		}
		if w.id == id {
			return true
		}
	}
	return false
}

func (a *Admission) take(r request) {
	if a.granted == nil {
		a.granted = map[uint64]int64{}
	}
	a.reserved += r.bytes - a.granted[r.id]
	a.granted[r.id] = r.bytes
}

// grant grants what the rules allow, in order, and returns the ids granted.
func (a *Admission) grant() []uint64 {
	var out []uint64
	maxPasses := a.MaxPasses
	if maxPasses <= 0 {
		maxPasses = DefaultMaxPasses
	}
	for len(a.waiting) > 0 {
		h := a.waiting[0]
		if h.id != a.head {
			a.head, a.passes = h.id, 0
		}
		if a.Budget > 0 && !a.fits(h) && !a.alone(h) {
			break
		}
		a.take(h)
		a.waiting = a.waiting[1:]
		out = append(out, h.id)
	}
	if len(a.waiting) == 0 {
		return out
	}
	// The head waits: later requests that fit may pass it, a bounded number of times.
	for i := 1; i < len(a.waiting) && a.passes < maxPasses; {
		r := a.waiting[i]
		if !a.fits(r) && !a.alone(r) {
			i++
			continue
		}
		a.take(r)
		a.passes++
		a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
		out = append(out, r.id)
	}
	return out
}
