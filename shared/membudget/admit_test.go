package membudget

import (
	"slices"
	"testing"
)

func TestAdmissionFIFOWithinBudget(t *testing.T) {
	a := Admission{Budget: 100}
	id1, g := a.Request(60)
	if !slices.Equal(g, []uint64{id1}) {
		t.Fatalf("first request: granted %v", g)
	}
	id2, g := a.Request(60)
	if len(g) != 0 {
		t.Fatalf("second request over the budget granted: %v", g)
	}
	id3, g := a.Request(70)
	if len(g) != 0 {
		t.Fatalf("third: %v", g)
	}
	if g := a.Release(id1); !slices.Equal(g, []uint64{id2}) {
		t.Fatalf("after release: granted %v, want [%d]", g, id2)
	}
	if g := a.Release(id2); !slices.Equal(g, []uint64{id3}) {
		t.Fatalf("after release: granted %v, want [%d]", g, id3)
	}
	if a.Reserved() != 70 || a.Waiting() != 0 {
		t.Fatalf("reserved %d waiting %d", a.Reserved(), a.Waiting())
	}
}

func TestAdmissionLargerThanBudgetRunsAlone(t *testing.T) {
	a := Admission{Budget: 100}
	small, _ := a.Request(10)
	big, g := a.Request(500)
	if len(g) != 0 {
		t.Fatalf("big granted beside another: %v", g)
	}
	// Nothing may pass it? Small ones may, boundedly; but once alone it runs.
	if g := a.Release(small); !slices.Equal(g, []uint64{big}) {
		t.Fatalf("big not granted once alone: %v", g)
	}
	if a.Reserved() != 500 {
		t.Fatalf("reserved %d", a.Reserved())
	}
	// While it runs, nothing else fits.
	if _, g := a.Request(1); len(g) != 0 {
		t.Fatalf("granted beside an over-budget reservation: %v", g)
	}
}

func TestAdmissionSmallPassBigBoundedly(t *testing.T) {
	a := Admission{Budget: 100, MaxPasses: 3}
	hold, _ := a.Request(80) // a large first mirror holds most of the budget
	big, g := a.Request(50)  // waits
	if len(g) != 0 {
		t.Fatal("big granted")
	}
	var passed []uint64
	for range 5 {
		id, g := a.Request(5) // polls
		if slices.Contains(g, id) {
			passed = append(passed, id)
			a.Release(id)
		}
	}
	if len(passed) != 3 {
		t.Fatalf("%d small requests passed the waiting big one, want MaxPasses=3", len(passed))
	}
	// The two not passed wait behind big; when hold ends, big goes first, then they fit.
	g = a.Release(hold)
	if len(g) != 3 || g[0] != big {
		t.Fatalf("after release: granted %v, want big first then the two small", g)
	}
}

func TestAdmissionPollsFlowBesideLargeFetch(t *testing.T) {
	a := Admission{Budget: 100}
	a.Request(90)
	for i := range 50 {
		id, g := a.Request(4)
		if !slices.Contains(g, id) {
			t.Fatalf("poll %d waits beside a fetch holding 90 of 100", i)
		}
		a.Release(id)
	}
}

func TestAdmissionGrowth(t *testing.T) {
	a := Admission{Budget: 100}
	old, _ := a.Request(10)
	young, _ := a.Request(10)
	poll, _ := a.Request(10)
	if a.Waiting() != 0 {
		t.Fatal("all three should fit")
	}
	// A growth that fits is granted at once.
	if ok, _ := a.Grow(young, 40); !ok {
		t.Fatal("a growth within the budget waits")
	}
	// Growths over the budget wait while another reservation runs (the poll).
	if ok, _ := a.Grow(young, 90); ok {
		t.Fatal("young growth granted over the budget")
	}
	if ok, _ := a.Grow(old, 200); ok {
		t.Fatal("old growth granted while the poll runs")
	}
	// A small new request that fits passes the waiting growths.
	late, g := a.Request(1)
	if !slices.Equal(g, []uint64{late}) {
		t.Fatalf("small request not passed: %v", g)
	}
	if g := a.Release(poll); len(g) != 0 {
		t.Fatalf("granted while late runs: %v", g)
	}
	// late ends: everyone else waits to grow, so the oldest goes, over the budget.
	g = a.Release(late)
	if !slices.Equal(g, []uint64{old}) || a.Reserved() != 240 {
		t.Fatalf("after late: granted %v, reserved %d; want [%d], 240", g, a.Reserved(), old)
	}
	// old ends: young (holding 40) grows to 90.
	g = a.Release(old)
	if !slices.Equal(g, []uint64{young}) || a.Held(young) != 90 {
		t.Fatalf("after old: granted %v, young holds %d", g, a.Held(young))
	}
}

// Growths never wait on one another for ever, whichever grows first.
func TestAdmissionGrowthsCannotDeadlock(t *testing.T) {
	a := Admission{Budget: 100}
	x, _ := a.Request(20)
	y, _ := a.Request(20)
	if ok, _ := a.Grow(y, 90); ok {
		t.Fatal("y granted over budget beside x")
	}
	ok, g := a.Grow(x, 90)
	if !ok || len(g) != 0 {
		t.Fatalf("x, the oldest, all others waiting to grow: granted %v %v", ok, g)
	}
	if g := a.Release(x); !slices.Equal(g, []uint64{y}) {
		t.Fatalf("y not granted once x ended: %v", g)
	}
}

func TestAdmissionWithdraw(t *testing.T) {
	a := Admission{Budget: 100}
	a.Request(90)
	big, _ := a.Request(50)
	small, _ := a.Request(20)
	// small fits? 90+20 > 100: no. Withdrawing big changes nothing for small yet.
	if g := a.Withdraw(big); len(g) != 0 || a.Waiting() != 1 {
		t.Fatalf("withdraw: %v, waiting %d", g, a.Waiting())
	}
	if a.Held(small) != 0 {
		t.Fatal("small granted over budget")
	}
}

func TestAdmissionNoBudget(t *testing.T) {
	a := Admission{}
	for range 10 {
		id, g := a.Request(1 << 40)
		if !slices.Equal(g, []uint64{id}) {
			t.Fatal("no budget must grant everything")
		}
	}
}

// Every request is granted eventually, whatever the arrival order, as fetches end
// oldest first; reserved never exceeds the budget except for one alone or the oldest's
// growth.
func TestAdmissionEveryoneServed(t *testing.T) {
	a := Admission{Budget: 100, MaxPasses: 2}
	sizes := []int64{70, 5, 90, 5, 5, 120, 5, 40, 40, 5, 5, 5}
	var order []uint64
	pending := map[uint64]bool{}
	for _, s := range sizes {
		id, g := a.Request(s)
		pending[id] = true
		for _, x := range g {
			order = append(order, x)
			delete(pending, x)
		}
	}
	for steps := 0; len(order) > 0 && steps < 100; steps++ {
		id := order[0]
		order = order[1:]
		if a.Reserved() > a.Budget && a.Running() > 1 {
			t.Fatalf("reserved %d over budget with %d running", a.Reserved(), a.Running())
		}
		for _, x := range a.Release(id) {
			order = append(order, x)
			delete(pending, x)
		}
	}
	if len(pending) != 0 || a.Waiting() != 0 {
		t.Fatalf("never granted: %v", pending)
	}
}
