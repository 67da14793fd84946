package worker

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

var q0 = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)

func TestQueuePopsSmallestEligiblePriority(t *testing.T) {
	q := NewQueue()
	q.Push("a", 5, time.Time{})
	q.Push("b", 1, q0.Add(time.Minute)) // smallest, but held for a minute
	q.Push("c", 3, time.Time{})
	q.Push("d", 3, time.Time{}) // ties: first pushed first
	var got []string
	for {
		id, _, ok := q.Pop(q0)
		if !ok {
			break
		}
		got = append(got, id)
	}
	if want := "c d a"; strings.Join(got, " ") != want {
		t.Fatalf("pop order %q, want %q", strings.Join(got, " "), want)
	}
	if at, ok := q.NextEligible(q0); !ok || !at.Equal(q0.Add(time.Minute)) {
		t.Fatalf("next eligible %v %v", at, ok)
	}
	if id, _, ok := q.Pop(q0.Add(time.Minute)); !ok || id != "b" {
		t.Fatalf("held repo not released: %q %v", id, ok)
	}
}

// A repo pushed with a hold waits only if it comes to the front before its time: one
// whose time has passed by its turn is served in its place, and one that reaches the
// front early lets the eligible repos behind it go first, and is counted by Min and
// NextEligible while it waits.
func TestQueueHoldsOnlyARepoAtTheFrontBeforeItsTime(t *testing.T) {
	q := NewQueue()
	q.Push("late", 2, q0.Add(time.Hour)) // its time passes before its turn
	q.Push("early", 1, q0.Add(time.Hour))
	q.Push("x", 3, time.Time{})
	q.Push("y", 4, time.Time{})
	if at, ok := q.NextEligible(q0); !ok || !at.IsZero() {
		t.Fatalf("with x eligible behind a held front: next eligible %v %v", at, ok)
	}
	if id, _, ok := q.Pop(q0); !ok || id != "x" {
		t.Fatalf("first pop %q %v, want x (early and late held)", id, ok)
	}
	if m := q.Min(); m != 1 {
		t.Fatalf("Min %v, want the held repo's 1", m)
	}
	if id, _, _ := q.Pop(q0); id != "y" {
		t.Fatalf("second pop %q, want y", id)
	}
	if at, ok := q.NextEligible(q0); !ok || !at.Equal(q0.Add(time.Hour)) {
		t.Fatalf("only held repos left: next eligible %v %v", at, ok)
	}
	var got []string
	for {
		id, _, ok := q.Pop(q0.Add(2 * time.Hour))
		if !ok {
			break
		}
		got = append(got, id)
	}
	if strings.Join(got, " ") != "early late" || q.Len() != 0 {
		t.Fatalf("after their time: %v, %d left", got, q.Len())
	}
}

func TestQueueRemoveAndRequeue(t *testing.T) {
	q := NewQueue()
	q.Push("a", 1, time.Time{})
	q.Push("b", 2, q0.Add(time.Hour))
	if !q.Remove("b") || q.Remove("b") || q.Len() != 1 {
		t.Fatal("remove of held repo")
	}
	q.Push("a", 9, time.Time{}) // requeue replaces
	if p, _ := q.Priority("a"); p != 9 || q.Len() != 1 {
		t.Fatalf("requeue: priority %v len %d", p, q.Len())
	}
}

func TestQueueFrontIsAheadOfEverythingReady(t *testing.T) {
	q := NewQueue()
	q.Push("a", 100, time.Time{})
	q.Push("b", 200, time.Time{})
	q.Pop(q0) // a; the queue's virtual now is 100
	q.Push("orphan", q.Min(), time.Time{})
	if id, _, _ := q.Pop(q0); id != "orphan" {
		t.Fatalf("front push popped after %q", id)
	}
}

// A repo pushed at Min also goes ahead of held repos with smaller priorities: once their
// hold ends they would be served first otherwise (a dead worker's orphans waited behind a
// stream of repos coming out of their minimum interval).
func TestQueueFrontIsAheadOfHeldRepos(t *testing.T) {
	q := NewQueue()
	q.Push("a", 100, time.Time{})
	q.Pop(q0)                               // the queue's virtual now is 100
	q.Push("held", 40, q0.Add(time.Second)) // overdue, out of its minimum interval in a second
	q.Push("b", 200, time.Time{})
	if m := q.Min(); m != 40 {
		t.Fatalf("Min = %v, want the held repo's 40", m)
	}
	q.PushFront("orphan")
	q.PushFront("orphan2")
	var got []string
	for range 3 {
		id, _, _ := q.Pop(q0.Add(time.Second))
		got = append(got, id)
	}
	if strings.Join(got, " ") != "orphan orphan2 held" {
		t.Fatalf("pop order %v, want the front pushes ahead of the held repo", got)
	}
}

// A repo held by its minimum interval comes back at its priority, which may be far
// behind the last one popped (a busy repo steps little, a quiet one a lot): the front
// is ahead of it too.
func TestQueueMinCountsHeldRepos(t *testing.T) {
	q := NewQueue()
	q.Push("busy", 10, q0.Add(time.Minute)) // held for a minute
	q.Push("quiet", 500, time.Time{})
	q.Pop(q0) // quiet: the last popped is 500
	if got := q.Min(); got != 10 {
		t.Fatalf("Min = %v with a repo held at 10", got)
	}
	q.Push("orphan", q.Min()-1e-9, time.Time{})
	q.Push("later", 20, q0.Add(time.Minute))
	if id, _, _ := q.Pop(q0.Add(2 * time.Minute)); id != "orphan" {
		t.Fatalf("%s popped before the orphan", id)
	}
}

// Ahead counts what Pop would serve first, held repos included, ties by arrival.
func TestQueueAhead(t *testing.T) {
	q := NewQueue()
	q.Push("a", 5, time.Time{})
	q.Push("b", 1, q0.Add(time.Minute)) // held, but served first once eligible
	q.Push("c", 3, time.Time{})
	q.Push("d", 3, time.Time{})
	q.PushFront("e")
	for id, want := range map[string]int{"e": 0, "b": 1, "c": 2, "d": 3, "a": 4} {
		n, notBefore, ok := q.Ahead(id)
		if !ok || n != want {
			t.Errorf("Ahead(%s) = %d, %v; want %d", id, n, ok, want)
		}
		if id == "b" && !notBefore.Equal(q0.Add(time.Minute)) {
			t.Errorf("Ahead(b) not before %v, want the minute it is held", notBefore)
		}
	}
	if _, _, ok := q.Ahead("zz"); ok {
		t.Error("Ahead of a repo not queued is ok")
	}
}

// A few new repos go to the front; past FrontClones a bulk add is spread over one step,
// each at a phase of its own, and a repo already cloned keeps its turn among them.
func TestQueuePushNewSpreadsABulkAdd(t *testing.T) {
	q := NewQueue()
	q.Push("cloned", 1, time.Time{}) // a repo with a mirror, due one unit from now
	const step, bulk = 10.0, 1000
	for i := range FrontClones + bulk {
		q.PushNew(fmt.Sprint("new", i), step)
	}
	again := NewQueue()
	for i := range FrontClones + bulk {
		again.PushNew(fmt.Sprint("new", i), step)
	}
	var spread []float64
	for i := range FrontClones + bulk {
		id := fmt.Sprint("new", i)
		p, _ := q.Priority(id)
		if p2, _ := again.Priority(id); p2 != p {
			t.Fatalf("%s: priority %v, then %v: want it from the id alone", id, p, p2)
		}
		if i < FrontClones {
			if p != 0 {
				t.Fatalf("%s (one of the first %d): priority %v, want the front", id, FrontClones, p)
			}
			continue
		}
		if p < 0 || p >= step {
			t.Fatalf("%s: priority %v, want within [0, %v)", id, p, step)
		}
		spread = append(spread, p)
	}
	slices.Sort(spread)
	if lo, mid, hi := spread[bulk/10], spread[bulk/2], spread[9*bulk/10]; math.Abs(lo-1) > 0.3 || math.Abs(mid-5) > 0.5 || math.Abs(hi-9) > 0.3 {
		t.Fatalf("deciles of the bulk add at %.2f, %.2f, %.2f: want about 1, 5, 9 (uniform over the step)", lo, mid, hi)
	}
	// The cloned repo comes round after the front and the tenth of the bulk placed
	// within one unit, not after all of it.
	before := 0
	for {
		id, _, ok := q.Pop(q0)
		if !ok {
			t.Fatal("the cloned repo never came round")
		}
		if id == "cloned" {
			break
		}
		before++
	}
	if before < FrontClones || before > FrontClones+bulk/5 {
		t.Fatalf("%d repos before the cloned one; want the %d at the front and about %d of the bulk", before, FrontClones, bulk/10)
	}
	// With the front drained, a repo added alone is next again.
	q.PushNew("alone", step)
	if id, _, _ := q.Pop(q0); id != "alone" {
		t.Fatalf("after the bulk add, a repo added alone popped after %q", id)
	}
}
